package exchangerate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// ConfigMap keys.
const (
	// KeyRate is how many units of currency one unit of base buys (decimal string).
	KeyRate = "rate"
	// KeyBase is the base currency (ISO 4217).
	KeyBase = "base"
	// KeyCurrency is the priced currency (ISO 4217), so a reader can tell which rate it holds.
	KeyCurrency = "currency"
	// KeyDate is the source's publication date (YYYY-MM-DD), not the fetch time.
	KeyDate = "date"
	// KeySource names the upstream (ecb, frankfurter, frankfurter-v2, frankfurter-v2:ECB).
	KeySource = "source"
)

// Our ConfigMaps carry this label; the controller's ConfigMap cache selects on it, so
// it holds only these ConfigMaps and never the rest of the cluster's.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "quartet-exchangerate"
)

// Quote is the rates for one ExchangeRate's spec, from one source, ready to write.
type Quote struct {
	// Base, Date and Source are common to all rates. Date is the oldest of the rates'
	// publication dates.
	Base, Date, Source string
	// Currency and Rate are spec.currency's rate; empty for spec.currencies.
	Currency, Rate string
	// Rates are spec.currencies' rates, in the spec's order; nil for spec.currency.
	Rates []operatorsv1.CurrencyRate
}

// list is the quote's rates, one for spec.currency.
func (q *Quote) list() []operatorsv1.CurrencyRate {
	if q.Rates == nil {
		return []operatorsv1.CurrencyRate{{Currency: q.Currency, Rate: q.Rate}}
	}
	return q.Rates
}

// byCurrency is the quote's rates by currency code.
func (q *Quote) byCurrency() map[string]string {
	out := map[string]string{}
	for _, r := range q.list() {
		out[r.Currency] = r.Rate
	}
	return out
}

// baseOf returns the spec's base; the API server defaults it to EUR, this covers objects
// written before the default existed.
func baseOf(spec operatorsv1.ExchangeRateSpec) string {
	if spec.Base == "" {
		return euro
	}
	return spec.Base
}

// quoteFor prices the spec from the table. A nil table gives no quote and no error (the
// source has not answered yet); a currency the table lacks gives *UnknownCurrencyError.
func quoteFor(t *Table, spec operatorsv1.ExchangeRateSpec) (*Quote, error) {
	if t == nil {
		return nil, nil
	}
	base := baseOf(spec)
	if len(spec.Currencies) == 0 {
		rate, err := t.Rate(base, spec.Currency)
		if err != nil {
			return nil, err
		}
		return &Quote{Base: base, Currency: spec.Currency, Rate: rate, Date: t.DateOf(base, spec.Currency), Source: t.Source}, nil
	}
	q := &Quote{Base: base, Source: t.Source, Rates: make([]operatorsv1.CurrencyRate, 0, len(spec.Currencies))}
	for _, c := range spec.Currencies {
		rate, err := t.Rate(base, c)
		if err != nil {
			return nil, err
		}
		q.Rates = append(q.Rates, operatorsv1.CurrencyRate{Currency: c, Rate: rate})
		if d := t.DateOf(base, c); q.Date == "" || d < q.Date {
			q.Date = d
		}
	}
	return q, nil
}

// desiredConfigMap is the whole ConfigMap for xr: same name and namespace, our label, a
// controller reference (so the garbage collector deletes it with xr) and the quote: for
// spec.currency the keys rate, base, currency, date and source; for spec.currencies one key
// per currency (its code, upper case, so never one of the lower-case keys) with base, date
// and source.
func desiredConfigMap(xr *operatorsv1.ExchangeRate, q Quote) *corev1.ConfigMap {
	data := map[string]string{KeyBase: q.Base, KeyDate: q.Date, KeySource: q.Source}
	if q.Rates == nil {
		data[KeyRate], data[KeyCurrency] = q.Rate, q.Currency
	}
	for _, r := range q.Rates {
		data[r.Currency] = r.Rate
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            xr.Name,
			Namespace:       xr.Namespace,
			Labels:          map[string]string{managedByLabel: managedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(xr, operatorsv1.GroupVersion.WithKind("ExchangeRate"))},
		},
		Data: data,
	}
}
