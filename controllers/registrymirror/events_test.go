package registrymirror

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/egress"
)

func TestStatusEvents(t *testing.T) {
	degraded := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: mirrorsv1alpha1.ConditionDegraded, Status: status, Reason: reason, Message: msg}
	}
	upstream := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: mirrorsv1alpha1.ConditionUpstreamReachable, Status: status, Reason: reason, Message: "https://quay.io " + reason}
	}
	access := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: mirrorsv1alpha1.ConditionNodeAccess, Status: status, Reason: reason, Message: "access " + reason}
	}
	fine := degraded(metav1.ConditionFalse, mirrorsv1alpha1.ReasonAsExpected, "All objects are applied and owned by this mirror")
	conflict := degraded(metav1.ConditionTrue, mirrorsv1alpha1.ReasonObjectConflict, "Service ns/a-registry exists")
	for _, tc := range []struct {
		name       string
		prev, next []metav1.Condition
		want       []event
	}{
		{"first pass, all fine, not probed", nil, []metav1.Condition{fine, upstream(metav1.ConditionUnknown, mirrorsv1alpha1.ReasonNotProbed)}, nil},
		{"a problem appears", []metav1.Condition{fine}, []metav1.Condition{conflict},
			[]event{{corev1.EventTypeWarning, mirrorsv1alpha1.ReasonObjectConflict, "Reconcile", "Service ns/a-registry exists"}}},
		{"the same problem again", []metav1.Condition{conflict}, []metav1.Condition{conflict}, nil},
		{"another problem", []metav1.Condition{conflict}, []metav1.Condition{degraded(metav1.ConditionTrue, mirrorsv1alpha1.ReasonObjectConflict, "Service ns/a-registry exists; applying X was refused")},
			[]event{{corev1.EventTypeWarning, mirrorsv1alpha1.ReasonObjectConflict, "Reconcile", "Service ns/a-registry exists; applying X was refused"}}},
		{"the problem is gone", []metav1.Condition{conflict}, []metav1.Condition{fine}, nil},
		{"upstream reached first", []metav1.Condition{upstream(metav1.ConditionUnknown, mirrorsv1alpha1.ReasonNotProbed)}, []metav1.Condition{upstream(metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable)},
			[]event{{corev1.EventTypeNormal, "UpstreamReachable", "Probe", "https://quay.io Reachable"}}},
		{"upstream gone", []metav1.Condition{upstream(metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable)}, []metav1.Condition{upstream(metav1.ConditionFalse, mirrorsv1alpha1.ReasonUnreachable)},
			[]event{{corev1.EventTypeWarning, "UpstreamUnreachable", "Probe", "https://quay.io Unreachable"}}},
		{"upstream never reached", nil, []metav1.Condition{upstream(metav1.ConditionFalse, mirrorsv1alpha1.ReasonNeverReached)},
			[]event{{corev1.EventTypeWarning, "UpstreamNeverReached", "Probe", "https://quay.io NeverReached"}}},
		{"upstream still gone", []metav1.Condition{upstream(metav1.ConditionFalse, mirrorsv1alpha1.ReasonUnreachable)}, []metav1.Condition{upstream(metav1.ConditionFalse, mirrorsv1alpha1.ReasonUnreachable)}, nil},
		{"probing turned off", []metav1.Condition{upstream(metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable)}, []metav1.Condition{upstream(metav1.ConditionUnknown, mirrorsv1alpha1.ReasonNotProbed)}, nil},
		{"node access granted", []metav1.Condition{access(metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant)}, []metav1.Condition{access(metav1.ConditionTrue, mirrorsv1alpha1.ReasonGranted)},
			[]event{{corev1.EventTypeNormal, "NodeAccessGranted", "Authorize", "access " + mirrorsv1alpha1.ReasonGranted}}},
		{"first pass without node access: news, no warning", nil, []metav1.Condition{access(metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant)},
			[]event{{corev1.EventTypeNormal, "NodeAccessNoHostGrant", "Authorize", "access " + mirrorsv1alpha1.ReasonNoHostGrant}}},
		{"node access lost: a warning", []metav1.Condition{access(metav1.ConditionTrue, mirrorsv1alpha1.ReasonGranted)},
			[]metav1.Condition{access(metav1.ConditionFalse, mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror)},
			[]event{{corev1.EventTypeWarning, "NodeAccessHostGrantedToAnotherMirror", "Authorize", "access " + mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror}}},
		{"no node access still", []metav1.Condition{access(metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant)}, []metav1.Condition{access(metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant)}, nil},
		{"both at once, Degraded first", []metav1.Condition{fine, upstream(metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable)},
			[]metav1.Condition{conflict, upstream(metav1.ConditionFalse, mirrorsv1alpha1.ReasonUnreachable)},
			[]event{{corev1.EventTypeWarning, mirrorsv1alpha1.ReasonObjectConflict, "Reconcile", "Service ns/a-registry exists"},
				{corev1.EventTypeWarning, "UpstreamUnreachable", "Probe", "https://quay.io Unreachable"}}},
	} {
		assert.Equal(t, tc.want, statusEvents(tc.prev, tc.next), tc.name)
	}
}

// TestUpstreamEventsCarryNoErrorText: the Events of the upstream's changes, made from the
// conditions computeStatus writes, name the failure with a phrase and the refused
// address case with a reason of its own.
func TestUpstreamEventsCarryNoErrorText(t *testing.T) {
	t0 := metav1.Now()
	m := minimalMirror()
	banner := fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", fmt.Errorf("malformed HTTP response %q", "SSH-2.0-OpenSSH_9.6 banner-secret"))
	for _, tc := range []struct {
		name string
		err  error
		want event
	}{
		{"a banner", banner, event{corev1.EventTypeWarning, "UpstreamNeverReached", "Probe",
			"https://registry-1.docker.io has never answered (the answer was not HTTP); the mirror has nothing to serve until it does"}},
		{"connection refused", dialError("10.213.0.2:5002", syscall.ECONNREFUSED), event{corev1.EventTypeWarning, "UpstreamNeverReached", "Probe",
			"https://registry-1.docker.io has never answered (connection refused); the mirror has nothing to serve until it does"}},
		{"a metadata address", dialError("169.254.169.254:80", egress.AddressRefusedError{Addr: netip.MustParseAddr("169.254.169.254")}),
			event{corev1.EventTypeWarning, "UpstreamAddressRefused", "Probe", "https://registry-1.docker.io is not probed: address not allowed for probes " +
				"(loopback, link-local or metadata); a cluster admin can allow its range with --registrymirror-probe-allowed-cidrs"}},
	} {
		o := probedOK()
		o.probes.upstreamErr = tc.err
		st := computeStatus(m, o, t0)
		prev := []metav1.Condition{*meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionNodeAccess)}
		evs := statusEvents(prev, st.Conditions)
		assert.Equal(t, []event{tc.want}, evs, tc.name)
	}
}

func TestSpecEventsWarnOfCacheTTLOncePerGeneration(t *testing.T) {
	withTTL := minimalMirror()
	withTTL.Spec.CacheTTL = &metav1.Duration{Duration: 168 * time.Hour}
	withBoth := withTTL.DeepCopy()
	withBoth.Spec.Retention = &metav1.Duration{Duration: 2160 * time.Hour}
	for _, tc := range []struct {
		name       string
		m          *mirrorsv1alpha1.RegistryMirror
		prev, next int64
		want       []event
	}{
		{"no cacheTTL", minimalMirror(), 0, 1, nil},
		{"cacheTTL on a new generation", withTTL, 0, 1, []event{{corev1.EventTypeWarning, EventCacheTTLIgnored, "Reconcile",
			"spec.cacheTTL (168h0m0s) is deprecated and has no effect: the cache keeps what was pulled for spec.retention (720h0m0s) after its last pull; remove cacheTTL"}}},
		{"cacheTTL, generation already observed", withTTL, 3, 3, nil},
		{"cacheTTL next to a retention", withBoth, 1, 2, []event{{corev1.EventTypeWarning, EventCacheTTLIgnored, "Reconcile",
			"spec.cacheTTL (168h0m0s) is deprecated and has no effect: the cache keeps what was pulled for spec.retention (2160h0m0s) after its last pull; remove cacheTTL"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, specEvents(tc.m, tc.prev, tc.next))
		})
	}
}
