package exchangerate

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/test/fakeupstream"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

// ecbDoc wraps day cubes in the ECB envelope.
func ecbDoc(days string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<gesmes:Envelope xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01" xmlns="http://www.ecb.int/vocabulary/2002-08-01/eurofxref">
<gesmes:subject>Reference rates</gesmes:subject><Cube>` + days + `</Cube></gesmes:Envelope>`
}

// parseCase is one document for a parser and what it must yield.
type parseCase struct {
	name      string
	doc       string
	wantDate  string
	wantRates map[string]string // a few to check
	wantCount int
	wantErr   string
}

// runParseCases runs the cases against one parser (ECB or Frankfurter).
func runParseCases(t *testing.T, parse func([]byte) (*Table, error), tests []parseCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := parse([]byte(tt.doc))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Nil(t, tab)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantDate, tab.Date)
			assert.Len(t, tab.Rates, tt.wantCount)
			for c, want := range tt.wantRates {
				got, err := tab.Rate("EUR", c)
				require.NoError(t, err)
				assert.Equal(t, want, got, c)
			}
		})
	}
}

func TestParseECB(t *testing.T) {
	daily := string(readTestdata(t, "eurofxref-daily.xml"))
	tests := []parseCase{
		{name: "daily file", doc: daily, wantDate: "2026-05-15", wantCount: 29,
			wantRates: map[string]string{"USD": "1.1625", "ISK": "142.6", "IDR": "19254.12"}},
		{name: "fake upstream renders the same format", doc: string(fakeupstream.RenderECB("2026-05-15", map[string]string{"USD": "1.1625"})),
			wantDate: "2026-05-15", wantCount: 1, wantRates: map[string]string{"USD": "1.1625"}},
		{name: "double-quoted attributes too", doc: ecbDoc(`<Cube time="2026-05-15"><Cube currency="USD" rate="1.1"/></Cube>`),
			wantDate: "2026-05-15", wantCount: 1, wantRates: map[string]string{"USD": "1.1"}},
		{name: "history file: latest day wins", doc: ecbDoc(`<Cube time='2026-05-14'><Cube currency='USD' rate='1.10'/></Cube>
			<Cube time='2026-05-15'><Cube currency='USD' rate='1.20'/></Cube><Cube time='2026-05-13'><Cube currency='USD' rate='1.30'/></Cube>`),
			wantDate: "2026-05-15", wantCount: 1, wantRates: map[string]string{"USD": "1.2"}},
		{name: "EUR listed at 1 is ignored", doc: ecbDoc(`<Cube time='2026-05-15'><Cube currency='EUR' rate='1'/><Cube currency='USD' rate='1.1'/></Cube>`),
			wantDate: "2026-05-15", wantCount: 1},
		{name: "truncated", doc: daily[:len(daily)/2], wantErr: "decoding ECB XML"},
		{name: "garbage", doc: "\x00<<<}}}", wantErr: "decoding ECB XML"},
		{name: "empty", doc: "", wantErr: "decoding ECB XML"},
		{name: "HTML error page", doc: "<html><body>503</body></html>", wantErr: "decoding ECB XML"},
		{name: "no day cube", doc: ecbDoc(``), wantErr: "no Cube with a time"},
		{name: "day without rates", doc: ecbDoc(`<Cube time='2026-05-15'></Cube>`), wantErr: "no rates"},
		{name: "missing time", doc: ecbDoc(`<Cube><Cube currency='USD' rate='1.1'/></Cube>`), wantErr: "not YYYY-MM-DD"},
		{name: "bad time", doc: ecbDoc(`<Cube time='yesterday'><Cube currency='USD' rate='1.1'/></Cube>`), wantErr: "not YYYY-MM-DD"},
		{name: "bad rate", doc: ecbDoc(`<Cube time='2026-05-15'><Cube currency='USD' rate='1,1'/></Cube>`), wantErr: "USD: rate \"1,1\""},
		{name: "zero rate", doc: ecbDoc(`<Cube time='2026-05-15'><Cube currency='USD' rate='0'/></Cube>`), wantErr: "not positive"},
		{name: "missing rate", doc: ecbDoc(`<Cube time='2026-05-15'><Cube currency='USD'/></Cube>`), wantErr: "not a decimal"},
		{name: "bad code", doc: ecbDoc(`<Cube time='2026-05-15'><Cube currency='usd' rate='1.1'/></Cube>`), wantErr: "three upper-case letters"},
		{name: "duplicate currency", doc: ecbDoc(`<Cube time='2026-05-15'><Cube currency='USD' rate='1.1'/><Cube currency='USD' rate='1.2'/></Cube>`),
			wantErr: "listed twice"},
		{name: "wrong root element", doc: `<Other><Cube><Cube time='2026-05-15'><Cube currency='USD' rate='1.1'/></Cube></Cube></Other>`,
			wantErr: "decoding ECB XML"},
	}
	runParseCases(t, ParseECB, tests)
}

func TestParseFrankfurter(t *testing.T) {
	latest := string(readTestdata(t, "frankfurter-latest.json"))
	tests := []parseCase{
		{name: "latest", doc: latest, wantDate: "2026-05-15", wantCount: 29, wantRates: map[string]string{"USD": "1.1625", "IDR": "19254"}},
		{name: "amount 2 is divided out", doc: `{"amount":2,"base":"EUR","date":"2026-05-15","rates":{"USD":2.325}}`,
			wantDate: "2026-05-15", wantCount: 1, wantRates: map[string]string{"USD": "1.1625"}},
		{name: "amount missing means 1", doc: `{"base":"EUR","date":"2026-05-15","rates":{"USD":1.1625}}`,
			wantDate: "2026-05-15", wantCount: 1, wantRates: map[string]string{"USD": "1.1625"}},
		{name: "exponent notation", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"XAU":2.5e-04}}`,
			wantDate: "2026-05-15", wantCount: 1, wantRates: map[string]string{"XAU": "0.00025"}},
		{name: "trailing whitespace is fine", doc: latest + "\n\n", wantDate: "2026-05-15", wantCount: 29},
		{name: "other base", doc: `{"amount":1.0,"base":"USD","date":"2026-05-15","rates":{"EUR":0.86}}`, wantErr: `base is "USD"`},
		{name: "error body", doc: `{"message":"not found"}`, wantErr: `base is ""`},
		{name: "truncated", doc: latest[:len(latest)/2], wantErr: "decoding Frankfurter JSON"},
		{name: "garbage", doc: "\x00<<<}}}", wantErr: "decoding Frankfurter JSON"},
		{name: "empty", doc: "", wantErr: "decoding Frankfurter JSON"},
		{name: "two objects", doc: latest + latest, wantErr: "data after the object"},
		{name: "no rates", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{}}`, wantErr: "no rates"},
		{name: "bad date", doc: `{"amount":1.0,"base":"EUR","date":"May 15","rates":{"USD":1.1}}`, wantErr: "not YYYY-MM-DD"},
		{name: "negative rate", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"USD":-1.1}}`, wantErr: "not a decimal"},
		{name: "zero amount", doc: `{"amount":0,"base":"EUR","date":"2026-05-15","rates":{"USD":1.1}}`, wantErr: "amount"},
		{name: "string rate", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"USD":"abc"}}`, wantErr: "decoding Frankfurter JSON"},
		{name: "rates not an object", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":[1.1]}`, wantErr: "decoding Frankfurter JSON"},
		{name: "bad code", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"usd":1.1}}`, wantErr: "three upper-case letters"},
		{name: "huge exponent", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"USD":1e999999999}}`, wantErr: "not a decimal"},
	}
	runParseCases(t, ParseFrankfurter, tests)
}

func TestParseFrankfurterV2(t *testing.T) {
	latest := string(readTestdata(t, "frankfurter-v2-rates.json"))
	row := func(quote, rate string) string {
		return `{"date":"2026-05-15","base":"EUR","quote":"` + quote + `","rate":` + rate + `}`
	}
	tests := []parseCase{
		{name: "latest (33 currencies, the EUR identity row dropped)", doc: latest, wantDate: "2026-05-15", wantCount: 33,
			wantRates: map[string]string{"USD": "1.1625", "ARS": "1389.6", "XAU": "0.00029"}},
		{name: "a row from expand=providers keeps its rate", doc: `[{"date":"2026-05-15","base":"EUR","quote":"USD","rate":1.1625,` +
			`"providers":[{"key":"ECB","date":"2026-05-15","rate":1.1625},{"key":"FED","date":"2026-05-14","rate":1.2,"excluded":true}]}]`,
			wantDate: "2026-05-15", wantCount: 1, wantRates: map[string]string{"USD": "1.1625"}},
		{name: "exponent notation", doc: "[" + row("XAU", "2.5e-04") + "]", wantDate: "2026-05-15", wantCount: 1,
			wantRates: map[string]string{"XAU": "0.00025"}},
		{name: "empty list (an unknown provider)", doc: "[]", wantErr: "no rates"},
		{name: "the identity row alone", doc: "[" + row("EUR", "1.0") + "]", wantErr: "no rates"},
		{name: "identity row not 1", doc: "[" + row("EUR", "1.1") + "," + row("USD", "1.1") + "]", wantErr: "EUR is priced at"},
		{name: "other base", doc: `[{"date":"2026-05-15","base":"USD","quote":"EUR","rate":0.86}]`, wantErr: `EUR row has base "USD", want EUR`},
		{name: "the v1 shape", doc: `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"USD":1.1625}}`, wantErr: "decoding Frankfurter v2 JSON"},
		{name: "error body", doc: `{"status":422,"message":"unknown parameter: symbols"}`, wantErr: "decoding Frankfurter v2 JSON"},
		{name: "truncated", doc: latest[:len(latest)/2], wantErr: "decoding Frankfurter v2 JSON"},
		{name: "two arrays", doc: latest + latest, wantErr: "data after the array"},
		{name: "bad date", doc: `[{"date":"May 15","base":"EUR","quote":"USD","rate":1.1}]`, wantErr: `USD row's date "May 15" is not YYYY-MM-DD`},
		{name: "a currency twice", doc: "[" + row("USD", "1.1") + "," + row("USD", "1.2") + "]", wantErr: "USD listed twice"},
		{name: "negative rate", doc: "[" + row("USD", "-1.1") + "]", wantErr: "not a decimal"},
		{name: "string rate", doc: "[" + row("USD", `"abc"`) + "]", wantErr: "decoding Frankfurter v2 JSON"},
		{name: "bad code", doc: "[" + row("usd", "1.1") + "]", wantErr: "three upper-case letters"},
		{name: "huge exponent", doc: "[" + row("USD", "1e999999999") + "]", wantErr: "not a decimal"},
	}
	runParseCases(t, ParseFrankfurterV2, tests)

	t.Log("each currency keeps its own date; the table's is the newest")
	tab, err := ParseFrankfurterV2([]byte(latest))
	require.NoError(t, err)
	assert.Equal(t, "2026-05-14", tab.Dates["ARS"])
	assert.Equal(t, "2026-05-15", tab.Dates["USD"])
	assert.NotContains(t, tab.Dates, "EUR")
	assert.Equal(t, "2026-05-14", tab.DateOf("EUR", "ARS"))
	assert.Equal(t, "2026-05-14", tab.DateOf("ARS", "USD"), "a cross rate is as old as its older input")
	assert.Equal(t, "2026-05-15", tab.DateOf("USD", "EUR"))
}

func TestFrankfurterMessage(t *testing.T) {
	assert.Equal(t, "not found", frankfurterMessage([]byte(`{"message":"not found"}`)))
	assert.Equal(t, "", frankfurterMessage([]byte(`<html>`)))
	assert.Equal(t, "", frankfurterMessage([]byte(`{"amount":1}`)))
}

// checkParsed holds what every successful parse promises, whatever the input.
func checkParsed(t *testing.T, tab *Table) {
	t.Helper()
	require.NotNil(t, tab)
	require.NotEmpty(t, tab.Rates)
	require.Regexp(t, `^\d{4}-\d{2}-\d{2}$`, tab.Date)
	for c, r := range tab.Rates {
		require.Regexp(t, `^[A-Z]{3}$`, c)
		require.NotEqual(t, euro, c)
		require.Positive(t, r.Sign(), c)
		s, err := tab.Rate(euro, c)
		require.NoError(t, err)
		require.NotEmpty(t, s)
		require.False(t, strings.HasPrefix(s, "-"))
		inv, err := tab.Rate(c, euro)
		require.NoError(t, err)
		require.NotEmpty(t, inv)
	}
}

func FuzzParseECB(f *testing.F) {
	daily := readTestdata(f, "eurofxref-daily.xml")
	f.Add(daily)
	f.Add(daily[:len(daily)/2])
	f.Add([]byte(ecbDoc(`<Cube time='2026-05-14'><Cube currency='USD' rate='1.10'/></Cube><Cube time='2026-05-15'><Cube currency='JPY' rate='1E2'/></Cube>`)))
	f.Add([]byte(ecbDoc(`<Cube time='2026-05-15'><Cube currency='EUR' rate='1'/><Cube currency='USD' rate='0.000001'/></Cube>`)))
	f.Add([]byte("<html><body>503 Service Unavailable</body></html>"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseECB(data)
		if err != nil {
			require.Nil(t, tab)
			return
		}
		checkParsed(t, tab)
	})
}

func FuzzParseFrankfurterV2(f *testing.F) {
	latest := readTestdata(f, "frankfurter-v2-rates.json")
	f.Add(latest)
	f.Add(latest[:len(latest)/2])
	f.Add([]byte(`[{"date":"2026-05-15","base":"EUR","quote":"EUR","rate":1.0},{"date":"2026-05-16","base":"EUR","quote":"XAU","rate":2.5e-04}]`))
	f.Add([]byte(`{"status":404,"message":"not found"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseFrankfurterV2(data)
		if err != nil {
			require.Nil(t, tab)
			return
		}
		checkParsed(t, tab)
		for c, d := range tab.Dates {
			require.Contains(t, tab.Rates, c)
			require.LessOrEqual(t, d, tab.Date)
		}
	})
}

func FuzzParseFrankfurter(f *testing.F) {
	latest := readTestdata(f, "frankfurter-latest.json")
	f.Add(latest)
	f.Add(latest[:len(latest)/2])
	f.Add([]byte(`{"amount":2,"base":"EUR","date":"2026-05-15","rates":{"USD":2.325,"XAU":2.5e-04}}`))
	f.Add([]byte(`{"message":"not found"}`))
	f.Add([]byte(`{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"EUR":1,"USD":"1.1"}}`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseFrankfurter(data)
		if err != nil {
			require.Nil(t, tab)
			return
		}
		checkParsed(t, tab)
	})
}
