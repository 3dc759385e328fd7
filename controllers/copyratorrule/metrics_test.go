package copyratorrule

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestLastChange: a source last changed at its newest managedFields time, else when created.
func TestLastChange(t *testing.T) {
	created := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	entry := func(d time.Duration) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "kubectl", Time: &metav1.Time{Time: created.Add(d)}}
	}
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    time.Time
	}{
		{"no managed fields: created", nil, created},
		{"one write", []metav1.ManagedFieldsEntry{entry(0)}, created},
		{"the newest, in any order", []metav1.ManagedFieldsEntry{entry(time.Hour), entry(3 * time.Hour), entry(2 * time.Hour)}, created.Add(3 * time.Hour)},
		{"an entry without a time", []metav1.ManagedFieldsEntry{{Manager: "old"}, entry(time.Minute)}, created.Add(time.Minute)},
		{"no entry with a time: created", []metav1.ManagedFieldsEntry{{Manager: "old"}}, created},
	} {
		obj := secret("s", corev1.SecretTypeOpaque, nil)
		obj.SetCreationTimestamp(metav1.NewTime(created))
		obj.SetManagedFields(tc.entries)
		assert.Equal(t, tc.want, lastChange(obj), tc.name)
	}
}

// propagationSamples returns the count and sum of quartet_copyrator_propagation_seconds.
func propagationSamples(t *testing.T) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	require.NoError(t, propagationSeconds.Write(&m))
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestObservePropagation: every create, update and re-create written is observed, from its
// source's last change to now on the controller's clock; nothing else is.
func TestObservePropagation(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	src := newSource(secret("reg", corev1.SecretTypeOpaque, map[string]string{"k": "v"}))
	src.Changed = now.Add(-90 * time.Second)
	unknown := src
	unknown.Changed = time.Time{}
	key := copyKey{kindSecret, "team-a", "reg"}
	for _, tc := range []struct {
		name string
		res  writeResult
		want float64 // seconds; 0: not observed
	}{
		{"created", writeResult{Action: action{Op: opCreate, Key: key, Source: &src}, Done: true}, 90},
		{"updated", writeResult{Action: action{Op: opUpdate, Key: key, Source: &src}, Done: true}, 90},
		{"re-created", writeResult{Action: action{Op: opRecreate, Key: key, Source: &src}, Done: true}, 90},
		{"failed", writeResult{Action: action{Op: opCreate, Key: key, Source: &src}, Err: assert.AnError}, 0},
		{"the name is taken", writeResult{Action: action{Op: opCreate, Key: key, Source: &src}, Conflict: &conflict{Key: key}}, 0},
		{"found the copy already", writeResult{Action: action{Op: opCreate, Key: key, Source: &src}, Found: true}, 0},
		{"deleted", writeResult{Action: action{Op: opDelete, Key: key, Existing: &copyState{Key: key}}, Done: true}, 0},
		{"released", writeResult{Action: action{Op: opRelease, Key: key, Existing: &copyState{Key: key}}, Done: true}, 0},
		{"source's change unknown", writeResult{Action: action{Op: opCreate, Key: key, Source: &unknown}, Done: true}, 0},
	} {
		count, sum := propagationSamples(t)
		observePropagation(tc.res, clk)
		newCount, newSum := propagationSamples(t)
		if tc.want == 0 {
			assert.Equal(t, count, newCount, tc.name)
			continue
		}
		assert.Equal(t, count+1, newCount, tc.name)
		assert.InDelta(t, tc.want, newSum-sum, 1e-9, tc.name)
	}
}

// TestRecordPassGauges: a pass's status sets the copies wanted (what copies_in_sync counts
// toward), the refusing namespaces and whether a limit holds the rule back; a fresh-only pass
// (no status) keeps them; they go with the rule.
func TestRecordPassGauges(t *testing.T) {
	rule := types.NamespacedName{Namespace: "metrics-test", Name: "r"}
	series := map[string]string{"rule_namespace": rule.Namespace, "rule": rule.Name}
	withReady := func(reason string) flantv1.CopyratorRuleStatus {
		return flantv1.CopyratorRuleStatus{SourcesMatched: 3, TargetNamespaces: 4, ConflictCount: 2, CopiesInSync: 7, RefusedCount: 5,
			Conditions: []metav1.Condition{{Type: flantv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}}
	}
	for _, tc := range []struct {
		name                      string
		st                        *flantv1.CopyratorRuleStatus
		desired, refused, limited float64
	}{
		{"held back by a limit", ptr.To(withReady(flantv1.ReasonLimitReached)), 10, 5, 1},
		{"a fresh-only pass keeps them", nil, 10, 5, 1},
		{"pending", ptr.To(withReady(flantv1.ReasonCopiesPending)), 10, 5, 0},
		{"nothing to copy", &flantv1.CopyratorRuleStatus{}, 0, 0, 0},
	} {
		recordPass(rule, outcome{}, tc.st)
		assert.Equal(t, tc.desired, testutil.ToFloat64(copiesDesiredGauge.WithLabelValues(rule.Namespace, rule.Name)), tc.name)
		assert.Equal(t, tc.refused, testutil.ToFloat64(refusedGauge.WithLabelValues(rule.Namespace, rule.Name)), tc.name)
		assert.Equal(t, tc.limited, testutil.ToFloat64(limitReachedGauge.WithLabelValues(rule.Namespace, rule.Name)), tc.name)
	}
	forgetMetrics(rule)
	assert.Zero(t, testenv.Series(copiesDesiredGauge, series)+testenv.Series(refusedGauge, series)+testenv.Series(limitReachedGauge, series),
		"forgotten with the rule")
}
