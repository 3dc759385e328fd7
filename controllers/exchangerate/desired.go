package exchangerate

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// ConfigMap keys (docs/exchangerate.md, "The ConfigMap").
const (
	KeyRate     = "rate"
	KeyBase     = "base"
	KeyCurrency = "currency"
	KeyDate     = "date"
	KeySource   = "source"
)

// Our ConfigMaps carry this label, which the controller's ConfigMap cache selects.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "quartet-exchangerate"
)

// Quote is the rates for one ExchangeRate's spec, from one source, ready to write.
type Quote struct {
	Base, Date, Source string                     // common to all rates; Date is the oldest rate's
	Currency, Rate     string                     // spec.currency's rate; empty for spec.currencies
	Rates              []operatorsv1.CurrencyRate // spec.currencies' rates, in the spec's order; nil for spec.currency
}

// list is the quote's rates, one for spec.currency.
func (q *Quote) list() []operatorsv1.CurrencyRate {
	if q.Rates == nil {
		return []operatorsv1.CurrencyRate{{Currency: q.Currency, Rate: q.Rate}}
	}
	return q.Rates
}

// quoteFor prices the spec from the table (nil: none yet), or says which currency it lacks.
func quoteFor(t *Table, spec operatorsv1.ExchangeRateSpec) (*Quote, error) {
	if t == nil {
		return nil, nil
	}
	// The API server defaults the base to EUR; objects written before the default have none.
	q := &Quote{Base: cmp.Or(spec.Base, euro), Source: t.Source}
	codes := spec.Currencies
	if len(codes) == 0 {
		codes = []string{spec.Currency}
	}
	for _, c := range codes {
		rate, err := t.Rate(q.Base, c)
		if err != nil {
			return nil, err
		}
		q.Rates = append(q.Rates, operatorsv1.CurrencyRate{Currency: c, Rate: rate})
		if d := t.DateOf(q.Base, c); q.Date == "" || d < q.Date {
			q.Date = d
		}
	}
	if len(spec.Currencies) == 0 {
		q.Currency, q.Rate, q.Rates = spec.Currency, q.Rates[0].Rate, nil
	}
	return q, nil
}

// desiredConfigMap is xr's whole ConfigMap: our label, a controller reference, the quote.
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
