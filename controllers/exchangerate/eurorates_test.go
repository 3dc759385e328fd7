package exchangerate

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustTable(t testing.TB, src, date string, rates map[string]string) *Table {
	t.Helper()
	tab := &Table{Source: src, Date: date, Rates: map[string]*big.Rat{}}
	for c, r := range rates {
		v, err := parseRate(r)
		require.NoError(t, err)
		tab.Rates[c] = v
	}
	return tab
}

func TestTableRate(t *testing.T) {
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{
		"USD": "1.1625", "JPY": "171.58", "GBP": "0.86485", "IDR": "19254.12", "CHF": "0.9343",
	})
	tests := []struct {
		name, base, currency, want string
		wantUnknown                string
	}{
		{name: "against EUR is the published digits", base: "EUR", currency: "USD", want: "1.1625"},
		{name: "published trailing zero dropped", base: "EUR", currency: "GBP", want: "0.86485"},
		{name: "large published rate", base: "EUR", currency: "IDR", want: "19254.12"},
		{name: "EUR priced in USD is the inverse, six digits", base: "USD", currency: "EUR", want: "0.860215"},
		{name: "cross rate JPY per USD", base: "USD", currency: "JPY", want: "147.596"},
		{name: "cross rate GBP per USD", base: "USD", currency: "GBP", want: "0.743957"},
		{name: "cross rate IDR per CHF", base: "CHF", currency: "IDR", want: "20608.1"},
		{name: "cross rate of small currencies", base: "JPY", currency: "USD", want: "0.00677527"},
		{name: "same currency", base: "USD", currency: "USD", want: "1"},
		{name: "EUR per EUR", base: "EUR", currency: "EUR", want: "1"},
		{name: "unknown currency", base: "EUR", currency: "XYZ", wantUnknown: "XYZ"},
		{name: "unknown base", base: "ABC", currency: "USD", wantUnknown: "ABC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tab.Rate(tt.base, tt.currency)
			if tt.wantUnknown != "" {
				var u *UnknownCurrencyError
				require.ErrorAs(t, err, &u)
				assert.Equal(t, tt.wantUnknown, u.Code)
				assert.Contains(t, err.Error(), "ecb does not publish a rate for "+tt.wantUnknown)
				assert.Contains(t, err.Error(), "EUR, GBP, IDR")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRoundSignificant(t *testing.T) {
	tests := []struct {
		in     string
		digits int
		want   string
	}{
		{"1/3", 6, "0.333333"},
		{"2/3", 6, "0.666667"},
		{"1234567/1", 6, "1234567"},
		{"9999995/1000000", 6, "10"}, // rounding carries into a new digit
		{"1/1000000", 6, "0.000001"},
		{"123456789/1000", 6, "123457"},
		{"5/2", 1, "3"}, // half away from zero
		{"100/1", 6, "100"},
		{"0/1", 6, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, ok := new(big.Rat).SetString(tt.in)
			require.True(t, ok)
			assert.Equal(t, tt.want, roundSignificant(r, tt.digits))
		})
	}
}

func TestDecimalExponent(t *testing.T) {
	for in, want := range map[string]int{"1": 0, "9.99": 0, "10": 1, "0.1": -1, "0.0999": -2, "123456": 5, "1/3": -1} {
		r, _ := new(big.Rat).SetString(in)
		assert.Equal(t, want, decimalExponent(r), in)
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{in: "1.1625", want: "1.1625"},
		{in: "142.60", want: "142.6"},
		{in: "19254", want: "19254"},
		{in: "1.2e-05", want: "0.000012"},
		{in: "1E2", want: "100"},
		{in: "0", wantErr: "not positive"},
		{in: "0.0000", wantErr: "not positive"},
		{in: "-1.2", wantErr: "not a decimal"},
		{in: "1,2", wantErr: "not a decimal"},
		{in: "", wantErr: "not a decimal"},
		{in: "1e999999999", wantErr: "not a decimal"},
		{in: "NaN", wantErr: "not a decimal"},
		{in: "1/3", wantErr: "not a decimal"},
		{in: " 1.2", wantErr: "not a decimal"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := parseRate(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, exactDecimal(r))
		})
	}
}

func TestValidateTable(t *testing.T) {
	one, _ := parseRate("1")
	two, _ := parseRate("2")
	usd, _ := parseRate("1.1")
	tests := []struct {
		name    string
		tab     Table
		wantErr string
	}{
		{name: "ok", tab: Table{Date: "2026-05-15", Rates: map[string]*big.Rat{"USD": usd}}},
		{name: "EUR at 1 is dropped", tab: Table{Date: "2026-05-15", Rates: map[string]*big.Rat{"USD": usd, "EUR": one}}},
		{name: "EUR not at 1", tab: Table{Date: "2026-05-15", Rates: map[string]*big.Rat{"USD": usd, "EUR": two}}, wantErr: "EUR is priced"},
		{name: "bad date", tab: Table{Date: "15.05.2026", Rates: map[string]*big.Rat{"USD": usd}}, wantErr: "not YYYY-MM-DD"},
		{name: "impossible date", tab: Table{Date: "2026-02-30", Rates: map[string]*big.Rat{"USD": usd}}, wantErr: "not YYYY-MM-DD"},
		{name: "no rates", tab: Table{Date: "2026-05-15", Rates: map[string]*big.Rat{}}, wantErr: "no rates"},
		{name: "only EUR", tab: Table{Date: "2026-05-15", Rates: map[string]*big.Rat{"EUR": one}}, wantErr: "no rates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateTable(&tt.tab)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.NotContains(t, tt.tab.Rates, "EUR")
		})
	}
}
