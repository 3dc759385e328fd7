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

// ParseECB reads the ECB's eurofxref-daily.xml (Envelope > Cube > Cube time > Cube
// currency rate); of several days (the 90-day file) the latest.
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

// ParseFrankfurter reads a Frankfurter /v1/latest answer; rates are divided by amount.
func ParseFrankfurter(data []byte) (*Table, error) {
	var doc struct {
		Amount json.Number            `json:"amount"`
		Base   string                 `json:"base"`
		Date   string                 `json:"date"`
		Rates  map[string]json.Number `json:"rates"`
	}
	if err := decodeJSON(data, &doc, "Frankfurter JSON", "object"); err != nil {
		return nil, err
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

// ParseFrankfurterV2 reads a Frankfurter /v2/rates answer, [{"date","base":"EUR","quote",
// "rate"},…]: each row's date in Dates, the newest as Date; EUR's identity row is dropped.
func ParseFrankfurterV2(data []byte) (*Table, error) {
	var rows []struct {
		Date  string      `json:"date"`
		Base  string      `json:"base"`
		Quote string      `json:"quote"`
		Rate  json.Number `json:"rate"`
	}
	if err := decodeJSON(data, &rows, "Frankfurter v2 JSON", "array"); err != nil {
		return nil, err
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

// decodeJSON decodes one JSON value (what) into v, numbers as written, and nothing after it.
func decodeJSON(data []byte, v any, doc, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w", doc, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decoding %s: data after the %s", doc, what)
	}
	return nil
}

// frankfurterMessage extracts {"message": "..."} from an error answer, or "".
func frankfurterMessage(data []byte) string {
	var doc struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &doc) // invalid JSON sets nothing
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
