package exchangerate

import (
	"maps"
	"time"

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

// refreshInterval is the spec's interval, else the manager's default.
func refreshInterval(spec operatorsv1.ExchangeRateSpec, def time.Duration) time.Duration {
	if spec.RefreshInterval != nil && spec.RefreshInterval.Duration > 0 {
		return spec.RefreshInterval.Duration
	}
	return def
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

// controlledBy reports whether obj's controller reference points at xr (by UID, so a
// ConfigMap left by a deleted ExchangeRate of the same name does not count).
func controlledBy(obj metav1.Object, xr *operatorsv1.ExchangeRate) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == xr.UID
}

// configMapUpToDate reports whether existing already is desired in everything we own:
// the label, the data and the controller reference.
func configMapUpToDate(existing, desired *corev1.ConfigMap, xr *operatorsv1.ExchangeRate) bool {
	return existing.Labels[managedByLabel] == managedByValue &&
		controlledBy(existing, xr) &&
		maps.Equal(existing.Data, desired.Data) &&
		len(existing.BinaryData) == 0
}

// lastWriteOurs reports whether the newest managedFields entry of obj is our field
// manager's, i.e. the last change to the object was ours. A tie with another manager
// counts as not ours, so an edit is never missed.
func lastWriteOurs(obj metav1.Object) bool {
	var newest time.Time
	ours := false
	for _, e := range obj.GetManagedFields() {
		if e.Time == nil {
			continue
		}
		switch t := e.Time.Time; {
		case t.After(newest):
			newest, ours = t, e.Manager == string(fieldOwner)
		case t.Equal(newest):
			ours = ours && e.Manager == string(fieldOwner)
		}
	}
	return ours
}
