package exchangerate

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/big"
	"time"
)

// ParseECB reads the ECB euro foreign exchange reference rates document
// (eurofxref-daily.xml: gesmes:Envelope > Cube > Cube time='YYYY-MM-DD' > Cube
// currency='USD' rate='1.1625', units per 1 EUR). When the document holds several days
// (the 90-day history file) the latest day is used.
func ParseECB(data []byte) (*Table, error) {
	var doc struct {
		XMLName xml.Name `xml:"Envelope"`
		Cube    struct {
			Days []struct {
				Time  string `xml:"time,attr"`
				Rates []struct {
					Currency string `xml:"currency,attr"`
					Rate     string `xml:"rate,attr"`
				} `xml:"Cube"`
			} `xml:"Cube"`
		} `xml:"Cube"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("decoding ECB XML: %w", err)
	}
	if len(doc.Cube.Days) == 0 {
		return nil, errors.New("ECB XML has no Cube with a time attribute")
	}
	latest := 0
	for i, d := range doc.Cube.Days {
		if d.Time > doc.Cube.Days[latest].Time {
			latest = i
		}
	}
	day := doc.Cube.Days[latest]
	t := &Table{Date: day.Time, Rates: make(map[string]*big.Rat, len(day.Rates))}
	for _, c := range day.Rates {
		if err := addRate(t, c.Currency, c.Rate); err != nil {
			return nil, fmt.Errorf("ECB XML, day %s: %w", day.Time, err)
		}
	}
	if err := validateTable(t); err != nil {
		return nil, fmt.Errorf("ECB XML: %w", err)
	}
	return t, nil
}

// ParseFrankfurter reads a Frankfurter /v1/latest answer (v1, frozen upstream):
// {"amount":1.0,"base":"EUR","date":"YYYY-MM-DD","rates":{"USD":1.1625,…}}. The base
// must be EUR (the source asks for it); rates are divided by amount when it is not 1.
func ParseFrankfurter(data []byte) (*Table, error) {
	var doc struct {
		Amount json.Number            `json:"amount"`
		Base   string                 `json:"base"`
		Date   string                 `json:"date"`
		Rates  map[string]json.Number `json:"rates"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decoding Frankfurter JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decoding Frankfurter JSON: data after the object")
	}
	if doc.Base != euro {
		return nil, fmt.Errorf("reading Frankfurter JSON: base is %q, want EUR", doc.Base)
	}
	amount := big.NewRat(1, 1)
	if doc.Amount != "" {
		a, err := parseRate(doc.Amount.String())
		if err != nil {
			return nil, fmt.Errorf("reading Frankfurter JSON: amount: %w", err)
		}
		amount = a
	}
	t := &Table{Date: doc.Date, Rates: make(map[string]*big.Rat, len(doc.Rates))}
	for code, rate := range doc.Rates {
		if err := addRate(t, code, rate.String()); err != nil {
			return nil, fmt.Errorf("reading Frankfurter JSON: %w", err)
		}
		t.Rates[code].Quo(t.Rates[code], amount)
	}
	if err := validateTable(t); err != nil {
		return nil, fmt.Errorf("reading Frankfurter JSON: %w", err)
	}
	return t, nil
}

// ParseFrankfurterV2 reads a Frankfurter /v2/rates answer for the latest rates against EUR:
// a JSON array of rows [{"date":"YYYY-MM-DD","base":"EUR","quote":"USD","rate":1.1625},…],
// one per currency, with an identity row for EUR (rate 1) that is dropped (lineofflight/frankfurter,
// lib/public/v2/openapi.json, schema Rate; CHANGELOG: "V2 rate responses now include an
// identity record for the base currency"). Rows are dated by their own latest observation,
// so they may differ: the table keeps each row's date (Dates), and its Date is the newest.
// Fields other than these four (providers, with expand=providers) are ignored.
func ParseFrankfurterV2(data []byte) (*Table, error) {
	var rows []struct {
		Date  string      `json:"date"`
		Base  string      `json:"base"`
		Quote string      `json:"quote"`
		Rate  json.Number `json:"rate"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		return nil, fmt.Errorf("decoding Frankfurter v2 JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decoding Frankfurter v2 JSON: data after the array")
	}
	t := &Table{Rates: make(map[string]*big.Rat, len(rows)), Dates: make(map[string]string, len(rows))}
	for _, row := range rows {
		if row.Base != euro {
			return nil, fmt.Errorf("reading Frankfurter v2 JSON: %s row has base %q, want EUR", row.Quote, row.Base)
		}
		if _, err := time.Parse(dateLayout, row.Date); err != nil {
			return nil, fmt.Errorf("reading Frankfurter v2 JSON: %s row's date %q is not YYYY-MM-DD", row.Quote, row.Date)
		}
		if err := addRate(t, row.Quote, row.Rate.String()); err != nil {
			return nil, fmt.Errorf("reading Frankfurter v2 JSON: %w", err)
		}
		t.Dates[row.Quote] = row.Date
		if row.Date > t.Date {
			t.Date = row.Date
		}
	}
	delete(t.Dates, euro)
	if len(t.Rates) == 0 {
		return nil, fmt.Errorf("reading Frankfurter v2 JSON: %w", errNoRates)
	}
	if err := validateTable(t); err != nil {
		return nil, fmt.Errorf("reading Frankfurter v2 JSON: %w", err)
	}
	return t, nil
}

// frankfurterMessage extracts {"message": "..."} from an error answer, or "".
func frankfurterMessage(data []byte) string {
	var doc struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return ""
	}
	return doc.Message
}

func addRate(t *Table, code, rate string) error {
	if !currencyCode.MatchString(code) {
		return fmt.Errorf("currency code %q is not three upper-case letters", code)
	}
	if _, dup := t.Rates[code]; dup {
		return fmt.Errorf("currency %s listed twice", code)
	}
	r, err := parseRate(rate)
	if err != nil {
		return fmt.Errorf("%s: %w", code, err)
	}
	t.Rates[code] = r
	return nil
}
