package exchangerate

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"
)

// euro is the currency every source's table is expressed in.
const euro = "EUR"

// crossRateDigits is how many significant digits a cross rate keeps. The ECB publishes five
// significant digits, so a quotient of two published rates is known to about five digits;
// six keeps the rounding of our division below the uncertainty of the inputs without
// pretending to more.
const crossRateDigits = 6

// dateLayout is the publication date format of both sources and of the ConfigMap's `date`.
const dateLayout = "2006-01-02"

var (
	currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)
	// decimalRate is what we accept as a published rate: a plain decimal, optionally with a
	// small exponent (JSON encoders write tiny numbers as 1.2e-05). Bounding the exponent
	// keeps big.Rat from building huge numbers out of hostile input such as 1e999999999.
	decimalRate = regexp.MustCompile(`^[0-9]{1,20}(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?$`)
)

// Table is one publication of euro reference rates: how many units of each currency one
// euro buys on Date. Rates are exact decimals as published (math/big, see Rate), so a
// rate against the euro is written exactly as the source published it.
type Table struct {
	// Source names the upstream that published the table (ecb, frankfurter).
	Source string
	// Date is the publication date (YYYY-MM-DD), not the time we fetched it: of a table
	// whose currencies carry dates of their own (Dates), the newest of them.
	Date string
	// Dates, when set, dates each currency by its own latest publication (Frankfurter v2,
	// where each central bank publishes on its own days). A currency not in it is dated Date.
	Dates map[string]string
	// Rates maps ISO 4217 codes to units per 1 EUR. EUR itself is implicit.
	Rates map[string]*big.Rat
	// ETag and LastModified are the response's validators, sent back on the next fetch
	// so an unchanged publication costs a 304 and no parsing.
	ETag, LastModified string
}

// UnknownCurrencyError says the table has no rate for a code: a spec mistake (or a
// currency the source does not publish), not an upstream failure.
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
	out := make([]string, 0, len(t.Rates)+1)
	out = append(out, euro)
	for c := range t.Rates {
		if c != euro {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
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

// DateOf is the publication date of a rate of currency per base: the older of the two
// currencies' dates (a cross rate is only as recent as its older input); EUR, the table's
// own base, has no date of its own.
func (t *Table) DateOf(base, currency string) string {
	date := ""
	for _, c := range []string{base, currency} {
		if c == euro {
			continue
		}
		d, ok := t.Dates[c]
		if !ok {
			d = t.Date
		}
		if date == "" || d < date {
			date = d
		}
	}
	if date == "" {
		return t.Date
	}
	return date
}

// Rate returns how many units of currency one unit of base buys, as a decimal string.
//
// The maths is done with math/big.Rat rather than float64: the published decimals are
// parsed exactly, a rate against the euro is returned digit for digit as published
// (1.1625 stays 1.1625, never 1.1624999999), and a cross rate R[currency]/R[base] is
// computed exactly and rounded once, half away from zero, to crossRateDigits significant
// digits. With floats the result would depend on binary rounding of both inputs and of
// the formatting step.
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
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("rate %q is not a decimal number", s)
	}
	if r.Sign() <= 0 {
		return nil, fmt.Errorf("rate %q is not positive", s)
	}
	return r, nil
}

// exactDecimal formats r, which came from a decimal string, without rounding and without
// trailing zeros.
func exactDecimal(r *big.Rat) string {
	prec, exact := r.FloatPrec()
	if !exact {
		return roundSignificant(r, crossRateDigits)
	}
	return trimZeros(r.FloatString(prec))
}

// roundSignificant formats a positive r with digits significant digits (half away from
// zero), trailing zeros removed. Numbers with more integer digits than that keep their
// integer part whole.
func roundSignificant(r *big.Rat, digits int) string {
	if r.Sign() <= 0 {
		return trimZeros(r.FloatString(digits))
	}
	e := decimalExponent(r)
	decimals := digits - 1 - e
	if decimals < 0 {
		decimals = 0
	}
	return trimZeros(r.FloatString(decimals))
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
	if e >= 0 {
		return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(e)), nil))
	}
	return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-e)), nil))
}

func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// validateTable checks what both parsers promise: a real date and at least one positive
// rate for a well-formed code. A parsed EUR entry must be exactly 1 and is dropped.
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

// errNoRates is a table without a single rate.
var errNoRates = errors.New("no rates")
