package exchangerate

import (
	"errors"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// jitterFraction spreads requeues over this share of the wait, so thousands of
// ExchangeRates do not write their ConfigMaps in the same second. The first one to wake
// refreshes the shared table; the rest find it fresh.
const jitterFraction = 0.1

// minRequeue keeps a clock skew or an already-due retry from turning into a hot loop.
const minRequeue = time.Second

// refreshInterval is the spec's interval, else the manager's default.
func refreshInterval(spec operatorsv1.ExchangeRateSpec, def time.Duration) time.Duration {
	if spec.RefreshInterval != nil && spec.RefreshInterval.Duration > 0 {
		return spec.RefreshInterval.Duration
	}
	return def
}

// nextRefresh returns when to look at an ExchangeRate again; 0 means not until it changes.
//   - unknown currency: a spec mistake, wait for the next edit;
//   - after a failed fetch: when the cache allows the next attempt;
//   - otherwise: when the shared table turns older than the refresh interval.
//
// random returns a number in [0, 1).
func nextRefresh(o outcome, interval time.Duration, random func() float64) time.Duration {
	var unknown *UnknownCurrencyError
	if errors.As(o.QuoteErr, &unknown) {
		return 0
	}
	var wait time.Duration
	if o.Fetch.Err != nil {
		wait = o.Fetch.RetryAt.Sub(o.Now)
	} else {
		wait = o.Fetch.CheckedAt.Add(interval).Sub(o.Now)
	}
	wait = max(wait, 0)
	// Jitter is a share of the whole period (not of what is left of it), so CRs that
	// reconcile at different moments still spread over the same window.
	period := interval
	if o.Fetch.Err != nil {
		period = wait
	}
	wait += time.Duration(random() * jitterFraction * float64(period))
	return max(wait, minRequeue)
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

// routineUpdate reports whether a ConfigMap update only brings a new table from the source:
// the spec is unchanged since the last pass without error, and the ConfigMap holds what
// that pass wrote (the rate and publication date in status, the same keys, base and
// currency). Such an update is the controller's everyday work, shown by the ConfigMap and
// the status; it sends no Event, so a new publication costs one ConfigMap write and one
// status write per ExchangeRate. A spec change or a ConfigMap someone else edited is not
// routine.
func routineUpdate(existing, desired *corev1.ConfigMap, xr *operatorsv1.ExchangeRate) bool {
	return xr.Generation == xr.Status.ObservedGeneration &&
		xr.Status.Rate != "" &&
		existing.Data[KeyRate] == xr.Status.Rate &&
		existing.Data[KeyDate] == xr.Status.PublicationDate &&
		len(existing.Data) == len(desired.Data) &&
		existing.Data[KeyBase] == desired.Data[KeyBase] &&
		existing.Data[KeyCurrency] == desired.Data[KeyCurrency] &&
		existing.Data[KeySource] == desired.Data[KeySource]
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
