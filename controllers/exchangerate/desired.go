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
	// KeySource names the upstream (ecb, frankfurter).
	KeySource = "source"
)

// Our ConfigMaps carry this label; the controller's ConfigMap cache selects on it, so
// it holds only these ConfigMaps and never the rest of the cluster's.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "quartet-exchangerate"
)

// Quote is one rate for one ExchangeRate's spec, ready to write.
type Quote struct {
	Base, Currency, Rate, Date, Source string
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
	rate, err := t.Rate(base, spec.Currency)
	if err != nil {
		return nil, err
	}
	return &Quote{Base: base, Currency: spec.Currency, Rate: rate, Date: t.Date, Source: t.Source}, nil
}

// desiredConfigMap is the whole ConfigMap for xr: same name and namespace, our label, a
// controller reference (so the garbage collector deletes it with xr) and the quote.
func desiredConfigMap(xr *operatorsv1.ExchangeRate, q Quote) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            xr.Name,
			Namespace:       xr.Namespace,
			Labels:          map[string]string{managedByLabel: managedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(xr, operatorsv1.GroupVersion.WithKind("ExchangeRate"))},
		},
		Data: map[string]string{
			KeyRate:     q.Rate,
			KeyBase:     q.Base,
			KeyCurrency: q.Currency,
			KeyDate:     q.Date,
			KeySource:   q.Source,
		},
	}
}
