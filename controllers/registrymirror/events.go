package registrymirror

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/status"
)

// Event reasons; besides, statusEvents' (a condition's reason, prefixed for two).
const (
	EventCreated          = "Created"
	EventUpdated          = "Updated"
	EventDeleted          = "Deleted"  // node agents without node access, a replica above spec.replicas
	EventReverted         = "Reverted" // fields others added to a child (drift) were taken away
	EventCacheTTLIgnored  = "CacheTTLIgnored"
	eventNodeAccessPrefix = "NodeAccess"
	eventUpstreamPrefix   = "Upstream"
)

// specEvents: a Warning once per observed generation that sets the deprecated cacheTTL.
func specEvents(m *mirrorsv1alpha1.RegistryMirror, prev, next int64) []event {
	if m.Spec.CacheTTL == nil || prev == next {
		return nil
	}
	return []event{{corev1.EventTypeWarning, EventCacheTTLIgnored, "Reconcile", fmt.Sprintf(
		"spec.cacheTTL (%s) is deprecated and has no effect: the cache keeps what was pulled for spec.retention (%s) after its last pull; remove cacheTTL",
		m.Spec.CacheTTL.Duration, retention(m))}}
}

// event is one Event about a mirror.
type event struct {
	eventType, reason, action, note string
}

// statusEvents are the Events a change of conditions is news for: a new problem; the
// upstream gone, back or first reached; node access changed.
func statusEvents(prev, next []metav1.Condition) []event {
	var out []event
	if c := status.Began(prev, next, mirrorsv1alpha1.ConditionDegraded, metav1.ConditionTrue, "", true); c != nil {
		out = append(out, event{corev1.EventTypeWarning, c.Reason, "Reconcile", c.Message})
	}
	if c := began(prev, next, mirrorsv1alpha1.ConditionUpstreamReachable, false); c != nil {
		out = append(out, event{eventType(c.Status == metav1.ConditionFalse), eventUpstreamPrefix + c.Reason, "Probe", c.Message})
	}
	if c := began(prev, next, mirrorsv1alpha1.ConditionNodeAccess, true); c != nil {
		// Losing node access is a warning; not having it (an in-cluster cache) is not.
		lost := c.Status == metav1.ConditionFalse && meta.IsStatusConditionTrue(prev, mirrorsv1alpha1.ConditionNodeAccess)
		out = append(out, event{eventType(lost), eventNodeAccessPrefix + c.Reason, "Authorize", c.Message})
	}
	return out
}

// began is condition typ of next when it entered its status (or, byReason, its reason).
func began(prev, next []metav1.Condition, typ string, byReason bool) *metav1.Condition {
	n := meta.FindStatusCondition(next, typ)
	if n == nil {
		return nil
	}
	reason := ""
	if byReason {
		reason = n.Reason
	}
	return status.Began(prev, next, typ, n.Status, reason, false)
}

func eventType(warning bool) string {
	if warning {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// recordEvents sends the Events of the change from prev, whose status was derived, to m.
func (r *Reconciler) recordEvents(prev, m *mirrorsv1alpha1.RegistryMirror) {
	evs := statusEvents(prev.Status.Conditions, m.Status.Conditions)
	for _, e := range append(evs, specEvents(m, prev.Status.ObservedGeneration, m.Status.ObservedGeneration)...) {
		r.Recorder.Eventf(m, nil, e.eventType, e.reason, e.action, "%s", e.note)
	}
}
