package registrymirror

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// Event reasons. Besides these, a Warning Event whose reason is the Degraded
// condition's (ObjectConflict, ApplyFailed, HostPortConflict, ...) announces a new
// problem, and the upstream's changes are Events with reason "Upstream" + the
// UpstreamReachable reason (UpstreamReachable, UpstreamUnreachable, UpstreamNeverReached,
// UpstreamAddressRefused). Their note is the condition's message, which names a failed
// probe with a fixed phrase (probeFailure), never with the error's text.
const (
	EventCreated = "Created"
	EventUpdated = "Updated"
	// EventDeleted: the node agent DaemonSet of a mirror without node access was deleted.
	EventDeleted = "Deleted"
	// EventReverted: fields others added to a child (see drift) were taken away.
	EventReverted = "Reverted"
	// eventNodeAccessPrefix prefixes the NodeAccess reason in the Events of its changes.
	eventNodeAccessPrefix = "NodeAccess"
	// eventUpstreamPrefix prefixes the UpstreamReachable reason in the upstream's Events.
	eventUpstreamPrefix = "Upstream"
	// EventCacheTTLIgnored: the spec sets cacheTTL, which is deprecated and has no effect.
	EventCacheTTLIgnored = "CacheTTLIgnored"
)

// specEvents are the Events a newly observed spec is news for (observedGeneration moves
// from prev to next): a Warning when it sets cacheTTL, which does nothing since retention
// replaced it, so whoever set it learns that from the mirror, once per generation.
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

// statusEvents are the Events a status change is news for, comparing the stored
// conditions (prev) with the new ones (next): a Warning when Degraded becomes True or
// its message changes (a new problem), and a Warning or Normal Event when the upstream
// goes away, comes back or is reached for the first time (news for whoever depends on
// the mirror).
func statusEvents(prev, next []metav1.Condition) []event {
	var out []event
	before := meta.FindStatusCondition(prev, mirrorsv1alpha1.ConditionDegraded)
	after := meta.FindStatusCondition(next, mirrorsv1alpha1.ConditionDegraded)
	if after != nil && after.Status == metav1.ConditionTrue &&
		(before == nil || before.Status != metav1.ConditionTrue || before.Message != after.Message) {
		out = append(out, event{corev1.EventTypeWarning, after.Reason, "Reconcile", after.Message})
	}
	upBefore := meta.FindStatusCondition(prev, mirrorsv1alpha1.ConditionUpstreamReachable)
	upAfter := meta.FindStatusCondition(next, mirrorsv1alpha1.ConditionUpstreamReachable)
	if upAfter != nil && upAfter.Status != metav1.ConditionUnknown && (upBefore == nil || upBefore.Status != upAfter.Status) {
		eventType := corev1.EventTypeNormal
		if upAfter.Status == metav1.ConditionFalse {
			eventType = corev1.EventTypeWarning
		}
		out = append(out, event{eventType, eventUpstreamPrefix + upAfter.Reason, "Probe", upAfter.Message})
	}
	accBefore := meta.FindStatusCondition(prev, mirrorsv1alpha1.ConditionNodeAccess)
	accAfter := meta.FindStatusCondition(next, mirrorsv1alpha1.ConditionNodeAccess)
	if accAfter != nil && accAfter.Status != metav1.ConditionUnknown &&
		(accBefore == nil || accBefore.Status != accAfter.Status || accBefore.Reason != accAfter.Reason) {
		// Losing node access is a warning; not having it (an in-cluster cache) is not.
		eventType := corev1.EventTypeNormal
		if accAfter.Status == metav1.ConditionFalse && accBefore != nil && accBefore.Status == metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		out = append(out, event{eventType, eventNodeAccessPrefix + accAfter.Reason, "Authorize", accAfter.Message})
	}
	return out
}

// recordEvents sends evs about mirror m.
func (r *Reconciler) recordEvents(m *mirrorsv1alpha1.RegistryMirror, evs []event) {
	for _, e := range evs {
		r.Recorder.Eventf(m, nil, e.eventType, e.reason, e.action, "%s", e.note)
	}
}

// recordChildWrite reports a child the pass created or updated, regarding the mirror
// and related to the child.
func (r *Reconciler) recordChildWrite(m *mirrorsv1alpha1.RegistryMirror, kind string, key types.NamespacedName, live client.Object, created bool) {
	reason, action := EventUpdated, "Update"
	if created {
		reason, action = EventCreated, "Create"
	}
	r.Recorder.Eventf(m, live, corev1.EventTypeNormal, reason, action, "%s %s %s", reason, kind, key)
}
