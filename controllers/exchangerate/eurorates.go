package exchangerate

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"
)

const (
	// euro is the currency every source's table is expressed in.
	euro = "EUR"
	// crossRateDigits are a cross rate's significant digits: the ECB publishes five.
	crossRateDigits = 6
	// dateLayout is the publication date format of the sources and of the ConfigMap's date.
	dateLayout = "2006-01-02"
)

var (
	currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)
	// decimalRate is a published rate; a small exponent only (1.2e-05, never 1e999999999).
	decimalRate = regexp.MustCompile(`^[0-9]{1,20}(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?$`)
	errNoRates  = errors.New("no rates")
)

// Table is one publication of euro reference rates, exact decimals as published.
type Table struct {
	Source             string              // the upstream that published the table
	Date               string              // the publication date (YYYY-MM-DD), the newest of Dates when it is set
	Dates              map[string]string   // a currency's own latest publication (Frankfurter v2), else Date
	Rates              map[string]*big.Rat // ISO 4217 codes to units per 1 EUR; EUR itself is implicit
	ETag, LastModified string              // the response's validators, sent back on the next fetch
}

// UnknownCurrencyError says the table has no rate for a code: a spec mistake.
type UnknownCurrencyError struct {
	Code   string
	Source string
	Known  []string
}

func (e *UnknownCurrencyError) Error() string {
	return fmt.Sprintf("%s does not publish a rate for %s (it publishes %s)", e.Source, e.Code, strings.Join(e.Known, ", "))
}

// Currencies returns the codes the table prices, EUR included, sorted.
func (t *Table) Currencies() []string {
	out := append(slices.Collect(maps.Keys(t.Rates)), euro)
	slices.Sort(out)
	return slices.Compact(out)
}

func (t *Table) perEuro(code string) (*big.Rat, error) {
	if code == euro {
		return big.NewRat(1, 1), nil
	}
	if r, ok := t.Rates[code]; ok {
		return r, nil
	}
	return nil, &UnknownCurrencyError{Code: code, Source: t.Source, Known: t.Currencies()}
}

// DateOf is the date of a rate of currency per base: the older of theirs.
func (t *Table) DateOf(base, currency string) string {
	date := t.Date
	for _, c := range []string{base, currency} {
		if d, ok := t.Dates[c]; ok && d < date {
			date = d
		}
	}
	return date
}

// Rate is how many units of currency one unit of base buys (docs/exchangerate.md, Precision).
func (t *Table) Rate(base, currency string) (string, error) {
	b, err := t.perEuro(base)
	if err != nil {
		return "", err
	}
	c, err := t.perEuro(currency)
	if err != nil {
		return "", err
	}
	if base == currency {
		return "1", nil
	}
	if base == euro {
		return exactDecimal(c), nil
	}
	return roundSignificant(new(big.Rat).Quo(c, b), crossRateDigits), nil
}

// parseRate reads one published rate; it must be a positive decimal.
func parseRate(s string) (*big.Rat, error) {
	if !decimalRate.MatchString(s) {
		return nil, fmt.Errorf("rate %q is not a decimal number", s)
	}
	r, _ := new(big.Rat).SetString(s) // decimalRate is a form SetString reads
	if r.Sign() <= 0 {
		return nil, fmt.Errorf("rate %q is not positive", s)
	}
	return r, nil
}

// exactDecimal formats r, read from a decimal, without rounding or trailing zeros.
func exactDecimal(r *big.Rat) string {
	prec, exact := r.FloatPrec()
	if !exact {
		return roundSignificant(r, crossRateDigits)
	}
	return trimZeros(r.FloatString(prec))
}

// roundSignificant formats r with digits significant digits, half away from zero.
func roundSignificant(r *big.Rat, digits int) string {
	if r.Sign() <= 0 {
		return trimZeros(r.FloatString(digits))
	}
	return trimZeros(r.FloatString(max(digits-1-decimalExponent(r), 0)))
}

// decimalExponent returns e with 10^e <= r < 10^(e+1) for a positive r.
func decimalExponent(r *big.Rat) int {
	e := len(r.Num().String()) - len(r.Denom().String())
	for pow10(e).Cmp(r) > 0 {
		e--
	}
	for pow10(e+1).Cmp(r) <= 0 {
		e++
	}
	return e
}

func pow10(e int) *big.Rat {
	p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(max(e, -e))), nil))
	if e < 0 {
		p.Inv(p)
	}
	return p
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// validateTable checks a parsed table: a date, a rate, EUR at 1 if at all (then dropped).
func validateTable(t *Table) error {
	if _, err := time.Parse(dateLayout, t.Date); err != nil {
		return fmt.Errorf("publication date %q is not YYYY-MM-DD", t.Date)
	}
	if r, ok := t.Rates[euro]; ok {
		if r.Cmp(big.NewRat(1, 1)) != 0 {
			return fmt.Errorf("EUR is priced at %s per EUR", r.FloatString(6))
		}
		delete(t.Rates, euro)
	}
	if len(t.Rates) == 0 {
		return errNoRates
	}
	return nil
}
