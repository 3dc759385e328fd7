package exchangerate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
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

// recordConfigMapWrite reports a ConfigMap the pass created, or updated for a spec change, a
// change of source or to undo someone else's edit. A new publication alone sends no Event
// (routineUpdate).
func (r *Reconciler) recordConfigMapWrite(xr *operatorsv1.ExchangeRate, cm *corev1.ConfigMap, action configMapAction) {
	switch action {
	case configMapCreated:
		r.Recorder.Eventf(xr, cm, corev1.EventTypeNormal, EventConfigMapCreated, "Create",
			"Created ConfigMap %s with %s %s per %s (published %s by %s)", cm.Name, cm.Data[KeyRate], cm.Data[KeyCurrency],
			cm.Data[KeyBase], cm.Data[KeyDate], cm.Data[KeySource])
	case configMapUpdated:
		r.Recorder.Eventf(xr, cm, corev1.EventTypeNormal, EventConfigMapUpdated, "Update",
			"Updated ConfigMap %s to %s %s per %s (published %s by %s)", cm.Name, cm.Data[KeyRate], cm.Data[KeyCurrency],
			cm.Data[KeyBase], cm.Data[KeyDate], cm.Data[KeySource])
	}
}

// recordTransitions reports failures when they begin, comparing the stored status with
// the new one (not on every retry, so an outage is one Warning per ExchangeRate rather
// than one per attempt).
func (r *Reconciler) recordTransitions(xr *operatorsv1.ExchangeRate, status operatorsv1.ExchangeRateStatus, o outcome) {
	if began(xr.Status.Conditions, status.Conditions, operatorsv1.ConditionDegraded, metav1.ConditionTrue, "") {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventFetchFailed, "Fetch", "%v", o.fetchErr())
	}
	if began(xr.Status.Conditions, status.Conditions, operatorsv1.ConditionDivergent, metav1.ConditionTrue, "") {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventSourcesDivergent, "CrossCheck", "%s",
			meta.FindStatusCondition(status.Conditions, operatorsv1.ConditionDivergent).Message)
	}
	if began(xr.Status.Conditions, status.Conditions, operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonTooManySources) {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventTooManySources, "Reconcile", "%v", o.SourcesErr)
	}
	if began(xr.Status.Conditions, status.Conditions, operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonUnknownCurrency) {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventUnknownCurrency, "Reconcile", "%v", o.QuoteErr)
	}
	if began(xr.Status.Conditions, status.Conditions, operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonConfigMapConflict) {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventConfigMapConflict, "Reconcile",
			"ConfigMap %s exists and is not controlled by this ExchangeRate; left unchanged", xr.Name)
	}
}

// began reports whether condition typ reached status (and, when reason is given, that
// reason with a new message) in this pass.
func began(prev, next []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) bool {
	n := meta.FindStatusCondition(next, typ)
	if n == nil || n.Status != status || (reason != "" && n.Reason != reason) {
		return false
	}
	p := meta.FindStatusCondition(prev, typ)
	if p == nil || p.Status != status {
		return true
	}
	return reason != "" && (p.Reason != reason || p.Message != n.Message)
}
