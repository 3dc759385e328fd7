package registrymirror

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusEvents(t *testing.T) {
	degraded := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: ConditionDegraded, Status: status, Reason: reason, Message: msg}
	}
	upstream := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: ConditionUpstreamReachable, Status: status, Reason: reason, Message: "https://quay.io " + reason}
	}
	fine := degraded(metav1.ConditionFalse, ReasonAsExpected, "All objects are applied and owned by this mirror")
	conflict := degraded(metav1.ConditionTrue, ReasonConflict, "Service ns/a-registry exists")
	for _, tc := range []struct {
		name       string
		prev, next []metav1.Condition
		want       []event
	}{
		{"first pass, all fine, not probed", nil, []metav1.Condition{fine, upstream(metav1.ConditionUnknown, ReasonNotProbed)}, nil},
		{"a problem appears", []metav1.Condition{fine}, []metav1.Condition{conflict},
			[]event{{corev1.EventTypeWarning, ReasonConflict, "Reconcile", "Service ns/a-registry exists"}}},
		{"the same problem again", []metav1.Condition{conflict}, []metav1.Condition{conflict}, nil},
		{"another problem", []metav1.Condition{conflict}, []metav1.Condition{degraded(metav1.ConditionTrue, ReasonConflict, "Service ns/a-registry exists; applying X was refused")},
			[]event{{corev1.EventTypeWarning, ReasonConflict, "Reconcile", "Service ns/a-registry exists; applying X was refused"}}},
		{"the problem is gone", []metav1.Condition{conflict}, []metav1.Condition{fine}, nil},
		{"upstream reached first", []metav1.Condition{upstream(metav1.ConditionUnknown, ReasonNotProbed)}, []metav1.Condition{upstream(metav1.ConditionTrue, ReasonReachable)},
			[]event{{corev1.EventTypeNormal, "UpstreamReachable", "Probe", "https://quay.io Reachable"}}},
		{"upstream gone", []metav1.Condition{upstream(metav1.ConditionTrue, ReasonReachable)}, []metav1.Condition{upstream(metav1.ConditionFalse, ReasonUnreachable)},
			[]event{{corev1.EventTypeWarning, "UpstreamUnreachable", "Probe", "https://quay.io Unreachable"}}},
		{"upstream never reached", nil, []metav1.Condition{upstream(metav1.ConditionFalse, ReasonNeverReached)},
			[]event{{corev1.EventTypeWarning, "UpstreamNeverReached", "Probe", "https://quay.io NeverReached"}}},
		{"upstream still gone", []metav1.Condition{upstream(metav1.ConditionFalse, ReasonUnreachable)}, []metav1.Condition{upstream(metav1.ConditionFalse, ReasonUnreachable)}, nil},
		{"probing turned off", []metav1.Condition{upstream(metav1.ConditionTrue, ReasonReachable)}, []metav1.Condition{upstream(metav1.ConditionUnknown, ReasonNotProbed)}, nil},
		{"both at once, Degraded first", []metav1.Condition{fine, upstream(metav1.ConditionTrue, ReasonReachable)},
			[]metav1.Condition{conflict, upstream(metav1.ConditionFalse, ReasonUnreachable)},
			[]event{{corev1.EventTypeWarning, ReasonConflict, "Reconcile", "Service ns/a-registry exists"},
				{corev1.EventTypeWarning, "UpstreamUnreachable", "Probe", "https://quay.io Unreachable"}}},
	} {
		assert.Equal(t, tc.want, statusEvents(tc.prev, tc.next), tc.name)
	}
}
