package copyratorrule

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	manyConflicts := make([]conflict, 25)
	for i := range manyConflicts {
		manyConflicts[i] = conflict{Key: copyKey{kindSecret, fmt.Sprintf("ns-%02d", i), "reg"}, Reason: "r", Foreign: true}
	}
	type cond struct {
		status metav1.ConditionStatus
		reason string
	}
	for _, tc := range []struct {
		name          string
		pass          outcome
		ready         cond
		degraded      cond
		wantObserved  int64
		wantInSync    int32
		wantConflicts int
		wantCount     int32
	}{
		{name: "all in sync", pass: outcome{Kind: "Secret", Sources: 1, Targets: 3, Desired: 3, InSync: 3},
			ready: cond{"True", flantv1.ReasonCopiesInSync}, degraded: cond{"False", flantv1.ReasonAsExpected}, wantObserved: 4, wantInSync: 3},
		{name: "no sources", pass: outcome{Kind: "Secret", Targets: 3},
			ready: cond{"True", flantv1.ReasonNoSourcesMatched}, degraded: cond{"False", flantv1.ReasonAsExpected}, wantObserved: 4},
		{name: "no targets", pass: outcome{Kind: "Secret", Sources: 2},
			ready: cond{"True", flantv1.ReasonNoTargetNamespaces}, degraded: cond{"False", flantv1.ReasonAsExpected}, wantObserved: 4},
		{name: "pending copies", pass: outcome{Kind: "Secret", Sources: 1, Targets: 3, Desired: 3, InSync: 2},
			ready: cond{"False", flantv1.ReasonCopiesPending}, degraded: cond{"False", flantv1.ReasonAsExpected}, wantObserved: 4, wantInSync: 2},
		{name: "conflicts: ready for the rest, degraded, list bounded", pass: outcome{Kind: "Secret", Sources: 1, Targets: 30, Desired: 30, InSync: 5, Conflicts: manyConflicts},
			ready: cond{"True", flantv1.ReasonCopiesInSync}, degraded: cond{"True", flantv1.ReasonConflicts}, wantObserved: 4, wantInSync: 5, wantConflicts: 20, wantCount: 25},
		{name: "failed writes", pass: outcome{Kind: "Secret", Sources: 1, Targets: 3, Desired: 3, InSync: 1, WriteErrs: []string{"a", "b"}},
			ready: cond{"False", flantv1.ReasonWriteFailed}, degraded: cond{"True", flantv1.ReasonWriteFailed}, wantObserved: 3, wantInSync: 1},
		{name: "named sources missing, none there", pass: outcome{Kind: "Secret", Targets: 3, Missing: []string{"a", "b"}},
			ready: cond{"False", flantv1.ReasonSourcesMissing}, degraded: cond{"False", flantv1.ReasonAsExpected}, wantObserved: 4},
		{name: "some named sources missing, the rest in sync", pass: outcome{Kind: "Secret", Sources: 1, Targets: 3, Desired: 3, InSync: 3, Missing: []string{"b"}},
			ready: cond{"False", flantv1.ReasonSourcesMissing}, degraded: cond{"False", flantv1.ReasonAsExpected}, wantObserved: 4, wantInSync: 3},
		{name: "invalid spec keeps the old counts", pass: outcome{SpecErr: errors.New("spec.namespaceSelector: bad")},
			ready: cond{"False", flantv1.ReasonInvalidSpec}, degraded: cond{"True", flantv1.ReasonInvalidSpec}, wantObserved: 4, wantInSync: 7},
		{name: "read failure keeps the old counts and generation", pass: outcome{SyncErr: errors.New("timeout")},
			ready: cond{"False", flantv1.ReasonSyncFailed}, degraded: cond{"True", flantv1.ReasonSyncFailed}, wantObserved: 3, wantInSync: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := flantv1.CopyratorRuleStatus{ObservedGeneration: 3, CopiesInSync: 7}
			tc.pass.Generation, tc.pass.Namespace = 4, "src"
			st := computeStatus(prev, tc.pass, now.Time)
			ready := meta.FindStatusCondition(st.Conditions, flantv1.ConditionReady)
			degraded := meta.FindStatusCondition(st.Conditions, flantv1.ConditionDegraded)
			require.NotNil(t, ready)
			require.NotNil(t, degraded)
			assert.Equal(t, tc.ready, cond{ready.Status, ready.Reason}, ready.Message)
			assert.Equal(t, tc.degraded, cond{degraded.Status, degraded.Reason}, degraded.Message)
			assert.NotEmpty(t, ready.Message)
			assert.Equal(t, int64(4), ready.ObservedGeneration)
			assert.Equal(t, prev.ObservedGeneration, st.ObservedGeneration, "status.Writer.Finish sets it, not computeStatus")
			// Finish's acted is Reconcile's err == nil, and Reconcile returns the pass's err.
			observed := prev.ObservedGeneration
			if tc.pass.err() == nil {
				observed = tc.pass.Generation
			}
			assert.Equal(t, tc.wantObserved, observed, "observedGeneration after Finish")
			assert.Equal(t, tc.wantInSync, st.CopiesInSync)
			assert.Len(t, st.Conflicts, tc.wantConflicts)
			assert.Equal(t, tc.wantCount, st.ConflictCount)
		})
	}
}

func TestMissingMessage(t *testing.T) {
	msg := missingMessage(outcome{Kind: "Secret", Namespace: "src", Missing: []string{"a", "b", "c", "d", "e", "f", "g"}})
	assert.Equal(t, "7 Secrets spec.sourceNames names are not in namespace src (or are Copyrator's copies, never sources): a, b, c, d, e and 2 more; copied once they exist", msg)
	msg = missingMessage(outcome{Kind: "ConfigMap", Namespace: "src", Missing: []string{"cfg"}})
	assert.Equal(t, "1 ConfigMap spec.sourceNames names is not in namespace src (or is one of Copyrator's copies, never sources): cfg; copied once they exist", msg)
}

func TestComputeStatusConsent(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	sa := types.NamespacedName{Namespace: "t1", Name: "copyrator"}
	many := make([]refusal, 23)
	for i := range many {
		many[i] = rbacRefusal(fmt.Sprintf("ns-%02d", i), sa, "secrets")
	}
	type cond struct {
		status metav1.ConditionStatus
		reason string
	}
	for _, tc := range []struct {
		name         string
		pass         outcome
		ready        cond
		authorized   cond
		wantListed   int
		wantCount    int32
		wantInMsg    []string
		wantNotInMsg []string
	}{
		{name: "every selected namespace consents",
			pass:  outcome{Kind: "Secret", Sources: 1, Targets: 2, Desired: 2, InSync: 2},
			ready: cond{"True", flantv1.ReasonCopiesInSync}, authorized: cond{"True", flantv1.ReasonTargetsAuthorized},
			wantInMsg: []string{"t1/copyrator"}},
		{name: "some refuse: the rest is served, Authorized says who refused and what to do",
			pass: outcome{Kind: "Secret", Sources: 1, Targets: 1, Desired: 1, InSync: 1, Frozen: 2,
				Refused: []refusal{protectedRefusal("kube-system"), rbacRefusal("t2", sa, "secrets")}},
			ready: cond{"True", flantv1.ReasonCopiesInSync}, authorized: cond{"False", flantv1.ReasonTargetsRefused}, wantListed: 2, wantCount: 2,
			wantInMsg: []string{"kube-system is protected", "t1/copyrator may not create secrets in namespace t2", TargetClusterRole,
				"2 copies already in refusing namespaces are left as they are"}},
		{name: "all refuse: not Ready",
			pass:  outcome{Kind: "Secret", Sources: 1, Refused: many},
			ready: cond{"False", flantv1.ReasonTargetsRefused}, authorized: cond{"False", flantv1.ReasonTargetsRefused}, wantListed: 20, wantCount: 23,
			wantInMsg: []string{"23 namespaces", "and 20 more"}, wantNotInMsg: []string{"left as they are"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pass.Generation, tc.pass.Namespace, tc.pass.ServiceAccount = 2, "t1", sa
			st := computeStatus(flantv1.CopyratorRuleStatus{}, tc.pass, now.Time)
			ready := meta.FindStatusCondition(st.Conditions, flantv1.ConditionReady)
			auth := meta.FindStatusCondition(st.Conditions, flantv1.ConditionAuthorized)
			require.NotNil(t, ready)
			require.NotNil(t, auth)
			assert.Equal(t, tc.ready, cond{ready.Status, ready.Reason}, ready.Message)
			assert.Equal(t, tc.authorized, cond{auth.Status, auth.Reason}, auth.Message)
			for _, want := range tc.wantInMsg {
				assert.Contains(t, auth.Message, want)
			}
			for _, not := range tc.wantNotInMsg {
				assert.NotContains(t, auth.Message, not)
			}
			assert.Len(t, st.Refused, tc.wantListed)
			assert.Equal(t, tc.wantCount, st.RefusedCount)
		})
	}

	t.Run("every condition is set on a spec mistake and on the first failed read", func(t *testing.T) {
		for _, pass := range []outcome{{SpecErr: errors.New("bad")}, {SyncErr: errors.New("timeout")}} {
			st := computeStatus(flantv1.CopyratorRuleStatus{}, pass, now.Time)
			auth := meta.FindStatusCondition(st.Conditions, flantv1.ConditionAuthorized)
			require.NotNil(t, auth)
			assert.Equal(t, metav1.ConditionUnknown, auth.Status)
		}
	})
	t.Run("a never-copied source is named", func(t *testing.T) {
		st := computeStatus(flantv1.CopyratorRuleStatus{}, outcome{Kind: "Secret", Namespace: "t1", Skipped: []string{"bootstrap-token-abcdef"}}, now.Time)
		ready := meta.FindStatusCondition(st.Conditions, flantv1.ConditionReady)
		assert.Equal(t, flantv1.ReasonNoSourcesMatched, ready.Reason)
		assert.Contains(t, ready.Message, "bootstrap-token-abcdef")
		assert.Contains(t, ready.Message, "bootstrap.kubernetes.io/token")
	})
}

func TestNewRefusals(t *testing.T) {
	listed := func(nss ...string) []flantv1.RefusedNamespace {
		var out []flantv1.RefusedNamespace
		for _, ns := range nss {
			out = append(out, flantv1.RefusedNamespace{Namespace: ns, Reason: "r"})
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		prev, next   flantv1.CopyratorRuleStatus
		wantFresh    []string
		wantUnlisted int
	}{
		{name: "first refusals", next: flantv1.CopyratorRuleStatus{RefusedCount: 2, Refused: listed("a", "b")}, wantFresh: []string{"a", "b"}},
		{name: "unchanged: nothing new",
			prev: flantv1.CopyratorRuleStatus{RefusedCount: 2, Refused: listed("a", "b")},
			next: flantv1.CopyratorRuleStatus{RefusedCount: 2, Refused: listed("a", "b")}},
		{name: "one more, one consented",
			prev: flantv1.CopyratorRuleStatus{RefusedCount: 2, Refused: listed("a", "b")},
			next: flantv1.CopyratorRuleStatus{RefusedCount: 2, Refused: listed("b", "c")}, wantFresh: []string{"c"}},
		{name: "growth beyond the listed ones is counted",
			prev: flantv1.CopyratorRuleStatus{RefusedCount: 20, Refused: listed("a")},
			next: flantv1.CopyratorRuleStatus{RefusedCount: 25, Refused: listed("a")}, wantUnlisted: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh, unlisted := newRefusals(tc.prev, tc.next)
			var got []string
			for _, r := range fresh {
				got = append(got, r.Namespace)
			}
			assert.Equal(t, tc.wantFresh, got)
			assert.Equal(t, tc.wantUnlisted, unlisted)
		})
	}
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	pass := outcome{Generation: 1, Kind: "Secret", Sources: 1, Targets: 2, Desired: 2, InSync: 2}
	prev := computeStatus(flantv1.CopyratorRuleStatus{}, pass, t0.Time)

	pass.Targets, pass.Desired, pass.InSync = 3, 3, 3
	st := computeStatus(prev, pass, t1.Time)
	ready := meta.FindStatusCondition(st.Conditions, flantv1.ConditionReady)
	assert.Equal(t, t0, ready.LastTransitionTime, "same status: the transition time stays")
	assert.Contains(t, ready.Message, "3 copies")

	pass.WriteErrs = []string{"boom"}
	st = computeStatus(prev, pass, t1.Time)
	assert.Equal(t, t1, meta.FindStatusCondition(st.Conditions, flantv1.ConditionReady).LastTransitionTime)
	assert.Equal(t, prev, computeStatus(prev, outcome{Generation: 1, Kind: "Secret", Sources: 1, Targets: 2, Desired: 2, InSync: 2}, t1.Time),
		"an unchanged pass yields an equal status, so no write")
}

func TestWithWrites(t *testing.T) {
	key := func(ns string) copyKey { return copyKey{kindSecret, ns, "reg"} }
	planned := conflict{Key: key("d"), Reason: "other rule"}
	found := conflict{Key: key("b"), Reason: "foreign", Foreign: true}
	p := plan{Desired: 6, InSync: 1, Conflicts: []conflict{planned}}
	results := []writeResult{
		{Action: action{Op: opCreate, Key: key("a")}, Done: true},
		{Action: action{Op: opCreate, Key: key("b")}, Conflict: &found},
		{Action: action{Op: opUpdate, Key: key("c")}, Err: errors.New("updating c: boom")},
		{Action: action{Op: opRecreate, Key: key("e")}, Done: true},
		{Action: action{Op: opDelete, Key: key("f")}, Done: true},
		{Action: action{Op: opUpdate, Key: key("g")}}, // deleted meanwhile: neither done nor failed
		{Action: action{Op: opCreate, Key: key("h")}, Found: true},
		{Action: action{Op: opCreate, Key: key("0")}, Done: true}, // a fresh namespace's copy, written first
	}
	o := outcome{Kind: kindSecret, Sources: 1, Targets: 5}.withWrites(p, results)

	assert.Equal(t, 6, o.Desired)
	assert.Equal(t, 5, o.InSync, "the planned copy in sync, the created ones, the re-created one and the one found; a delete is no copy")
	assert.Equal(t, []conflict{found, planned}, o.Conflicts, "conflicts of the plan and of the writes, sorted")
	assert.Equal(t, map[copyKey]bool{key("b"): true}, o.Checked)
	assert.Equal(t, map[op][]copyKey{opCreate: {key("0"), key("a")}, opRecreate: {key("e")}, opDelete: {key("f")}}, o.Written,
		"sorted; a copy found in sync was not written")
	assert.Equal(t, []string{"updating c: boom"}, o.WriteErrs)
	assert.Equal(t, []conflict{planned}, p.Conflicts, "the plan is not changed")
}

func TestSummarize(t *testing.T) {
	assert.Equal(t, "a", summarize([]string{"a"}))
	assert.Equal(t, "a; b; c; and 2 more", summarize([]string{"a", "b", "c", "d", "e"}))
}

// TestSpecMistake: namespace events skip a rule whose status says its current spec is a
// mistake; an edit (a newer generation) or another reason wakes it as before.
func TestSpecMistake(t *testing.T) {
	rule := func(gen, observed int64, reason string) *flantv1.CopyratorRule {
		return &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Status: flantv1.CopyratorRuleStatus{
			ObservedGeneration: observed, Conditions: []metav1.Condition{{Type: flantv1.ConditionReady, Reason: reason}}}}
	}
	assert.True(t, specMistake(rule(2, 2, flantv1.ReasonInvalidSpec)))
	assert.False(t, specMistake(rule(3, 2, flantv1.ReasonInvalidSpec)), "edited since: woken")
	assert.False(t, specMistake(rule(2, 2, flantv1.ReasonTargetsRefused)))
	assert.False(t, specMistake(&flantv1.CopyratorRule{}), "no status yet")
}
