package exchangerate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

func testXR(currency, base string) *operatorsv1.ExchangeRate {
	return &operatorsv1.ExchangeRate{
		ObjectMeta: metav1.ObjectMeta{Name: "exchange-rate-usd", Namespace: "shop", UID: "uid-1", Generation: 3},
		Spec:       operatorsv1.ExchangeRateSpec{Currency: currency, Base: base},
	}
}

func TestQuoteFor(t *testing.T) {
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625", "JPY": "171.58"})
	tests := []struct {
		name        string
		tab         *Table
		spec        operatorsv1.ExchangeRateSpec
		want        *Quote
		wantUnknown bool
	}{
		{name: "no table yet", tab: nil, spec: operatorsv1.ExchangeRateSpec{Currency: "USD"}},
		{name: "base defaults to EUR", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "USD"},
			want: &Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}},
		{name: "cross rate", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "JPY", Base: "USD"},
			want: &Quote{Base: "USD", Currency: "JPY", Rate: "147.596", Date: "2026-05-15", Source: "ecb"}},
		{name: "unknown currency", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "XYZ"}, wantUnknown: true},
		{name: "unknown base", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "USD", Base: "XYZ"}, wantUnknown: true},
		{name: "several currencies, in the spec's order", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currencies: []string{"USD", "JPY"}},
			want: &Quote{Base: "EUR", Date: "2026-05-15", Source: "ecb",
				Rates: []operatorsv1.CurrencyRate{{Currency: "USD", Rate: "1.1625"}, {Currency: "JPY", Rate: "171.58"}}}},
		{name: "several currencies against another base", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currencies: []string{"JPY", "EUR"}, Base: "USD"},
			want: &Quote{Base: "USD", Date: "2026-05-15", Source: "ecb",
				Rates: []operatorsv1.CurrencyRate{{Currency: "JPY", Rate: "147.596"}, {Currency: "EUR", Rate: "0.860215"}}}},
		{name: "one unknown of several", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currencies: []string{"USD", "XYZ"}}, wantUnknown: true},
		{name: "dated by the older input (Frankfurter v2)", tab: &Table{Source: "frankfurter-v2", Date: "2026-05-15", Rates: tab.Rates,
			Dates: map[string]string{"USD": "2026-05-15", "JPY": "2026-05-14"}}, spec: operatorsv1.ExchangeRateSpec{Currencies: []string{"USD", "JPY"}},
			want: &Quote{Base: "EUR", Date: "2026-05-14", Source: "frankfurter-v2",
				Rates: []operatorsv1.CurrencyRate{{Currency: "USD", Rate: "1.1625"}, {Currency: "JPY", Rate: "171.58"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := quoteFor(tt.tab, tt.spec)
			if tt.wantUnknown {
				var u *UnknownCurrencyError
				require.ErrorAs(t, err, &u)
				assert.Nil(t, q)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, q)
		})
	}
}

func TestDesiredConfigMap(t *testing.T) {
	xr := testXR("USD", "EUR")
	cm := desiredConfigMap(xr, Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"})
	assert.Equal(t, "exchange-rate-usd", cm.Name)
	assert.Equal(t, "shop", cm.Namespace)
	assert.Equal(t, map[string]string{"app.kubernetes.io/managed-by": "quartet-exchangerate"}, cm.Labels)
	assert.Equal(t, map[string]string{"rate": "1.1625", "base": "EUR", "currency": "USD", "date": "2026-05-15", "source": "ecb"}, cm.Data)
	assert.Equal(t, []metav1.OwnerReference{{
		APIVersion: "operators.brennerm.github.io/v1", Kind: "ExchangeRate", Name: "exchange-rate-usd", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}, cm.OwnerReferences)

	t.Log("spec.currencies: one key per currency, no rate or currency key")
	cm = desiredConfigMap(xr, Quote{Base: "EUR", Date: "2026-05-15", Source: "frankfurter-v2:ECB",
		Rates: []operatorsv1.CurrencyRate{{Currency: "USD", Rate: "1.1625"}, {Currency: "GBP", Rate: "0.86485"}}})
	assert.Equal(t, map[string]string{"USD": "1.1625", "GBP": "0.86485", "base": "EUR", "date": "2026-05-15", "source": "frankfurter-v2:ECB"}, cm.Data)
}
