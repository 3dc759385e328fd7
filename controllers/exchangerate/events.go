package exchangerate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/status"
)

// Event reasons.
const (
	EventConfigMapCreated  = "ConfigMapCreated"
	EventConfigMapUpdated  = "ConfigMapUpdated"
	EventFetchFailed       = "FetchFailed"
	EventUnknownCurrency   = "UnknownCurrency"
	EventConfigMapConflict = "ConfigMapConflict"
	EventSourcesDivergent  = "SourcesDivergent"
	EventTooManySources    = "TooManySources"
	EventOlderPublication  = "OlderPublication"
)

// recordConfigMapWrite reports a ConfigMap created or updated, not a new publication alone.
func (r *Reconciler) recordConfigMapWrite(xr *operatorsv1.ExchangeRate, cm *corev1.ConfigMap, action configMapAction) {
	reason, verb, what := EventConfigMapCreated, "Create", "Created ConfigMap %s with"
	switch action {
	case configMapUpdated:
		reason, verb, what = EventConfigMapUpdated, "Update", "Updated ConfigMap %s to"
	case configMapUnchanged, configMapRefreshed:
		return
	}
	r.Recorder.Eventf(xr, cm, corev1.EventTypeNormal, reason, verb, what+" %s %s per %s (published %s by %s)", cm.Name,
		cm.Data[KeyRate], cm.Data[KeyCurrency], cm.Data[KeyBase], cm.Data[KeyDate], cm.Data[KeySource])
}

// recordTransitions sends a Warning when a failure begins (prev to xr): one per outage.
func (r *Reconciler) recordTransitions(prev, xr *operatorsv1.ExchangeRate, o outcome) {
	was, is := prev.Status.Conditions, xr.Status.Conditions
	if status.Began(was, is, operatorsv1.ConditionDegraded, metav1.ConditionTrue, "", false) != nil {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventFetchFailed, "Fetch", "%v", o.fetchErr())
	}
	if c := status.Began(was, is, operatorsv1.ConditionDivergent, metav1.ConditionTrue, "", false); c != nil {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventSourcesDivergent, "CrossCheck", "%s", c.Message)
	}
	notReady := func(reason string) bool {
		return status.Began(was, is, operatorsv1.ConditionReady, metav1.ConditionFalse, reason, true) != nil
	}
	switch {
	case notReady(operatorsv1.ReasonTooManySources):
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventTooManySources, "Reconcile", "%v", o.SourcesErr)
	case notReady(operatorsv1.ReasonUnknownCurrency):
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventUnknownCurrency, "Reconcile", "%v", o.QuoteErr)
	case notReady(operatorsv1.ReasonConfigMapConflict):
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventConfigMapConflict, "Reconcile",
			"ConfigMap %s exists and is not controlled by this ExchangeRate; left unchanged", xr.Name)
	}
}
