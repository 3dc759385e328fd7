package chaosagent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/status"
	"github.com/quartet-operator/quartet/test/testenv"
)

func rec(kind blackadderv1beta1.ActionKind, target string, res result, dry bool) record {
	r := record{ChaosAction: blackadderv1beta1.ChaosAction{Kind: kind, Target: target, DryRun: dry}}
	r.set("", res)
	return r
}

// finished ends a pass with outcome o over an agent whose status is old, as Reconcile does
// (Reconciler.finish: status.Writer.Finish with computeStatus), against a fake API server, and
// returns the status written. observedGeneration is set there, not by computeStatus.
func finished(t *testing.T, old blackadderv1beta1.ChaosAgentStatus, o outcome) blackadderv1beta1.ChaosAgentStatus {
	t.Helper()
	ctx := context.Background()
	agent := &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: "edmund", Generation: o.Generation}, Status: old}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(agent).WithStatusSubresource(agent).Build()
	r := &Reconciler{status: status.NewWriter(c, c, func(a *blackadderv1beta1.ChaosAgent) *int64 { return &a.Status.ObservedGeneration })}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(agent), agent))
	require.NoError(t, r.finish(ctx, agent, o))
	got := &blackadderv1beta1.ChaosAgent{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(agent), got))
	return got.Status
}

func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 700_000_000, time.UTC)
	next := now.Add(30 * time.Second)
	spec := withDefaults(blackadderv1beta1.ChaosAgentSpec{})

	t.Run("first round counts successes only and sets every condition", func(t *testing.T) {
		s := finished(t, blackadderv1beta1.ChaosAgentStatus{}, outcome{Now: now, Generation: 3, Spec: spec, Round: roundOutcome{
			Ran: true, NextRound: &next, ChangedObjects: ptr.To[int32](2),
			Records: []record{
				rec(blackadderv1beta1.ActionKillPod, "a/p1", succeeded, false),
				rec(blackadderv1beta1.ActionKillPod, "a/p2", skipped(SkipDisruptionBudget), false),
				rec(blackadderv1beta1.ActionScaleDeployment, "a/d", succeeded, false),
				rec(blackadderv1beta1.ActionIpsumConfigMap, "a/c", succeeded, false),
			}}})
		assert.EqualValues(t, 1, s.Rounds)
		assert.Equal(t, now.Truncate(time.Second), s.LastRoundTime.UTC(), "whole seconds, as the API stores it")
		assert.Equal(t, next.Truncate(time.Second), s.NextRoundTime.UTC())
		assert.Equal(t, blackadderv1beta1.ChaosCounts{PodsKilled: 1, DeploymentsScaled: 1, ConfigMapsIpsumed: 1}, s.Counts)
		assert.EqualValues(t, 2, s.ChangedObjects)
		assert.EqualValues(t, 3, s.ObservedGeneration)
		require.Len(t, s.LastActions, 4)
		assert.Equal(t, "a/c", s.LastActions[0].Target, "newest first")
		assert.Equal(t, metav1.ConditionTrue, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionReady).Status)
		assert.Equal(t, blackadderv1beta1.ReasonRoundsRunning, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionReady).Reason)
		assert.Equal(t, metav1.ConditionFalse, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionPaused).Status)
		assert.Equal(t, metav1.ConditionFalse, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionDegraded).Status)
	})
	t.Run("dry-run records actions but counts nothing", func(t *testing.T) {
		dry := spec
		dry.DryRun = true
		s := computeStatus(blackadderv1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: dry, Round: roundOutcome{Ran: true, NextRound: &next,
			Records: []record{rec(blackadderv1beta1.ActionKillPod, "a/p1", dryRun, true)}}})
		assert.Equal(t, blackadderv1beta1.ChaosCounts{}, s.Counts)
		assert.Len(t, s.LastActions, 1)
		assert.Contains(t, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionReady).Message, "dry run")
	})
	t.Run("failed actions make the agent Degraded until a clean round", func(t *testing.T) {
		s := computeStatus(blackadderv1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: spec, Round: roundOutcome{Ran: true, NextRound: &next,
			Records: []record{rec(blackadderv1beta1.ActionKillPod, "a/p1", failed("Forbidden"), false),
				rec(blackadderv1beta1.ActionKillPod, "a/p2", succeeded, false)}}})
		c := testenv.Condition(s.Conditions, blackadderv1beta1.ConditionDegraded)
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, blackadderv1beta1.ReasonActionsFailed, c.Reason)
		assert.Contains(t, c.Message, "1 of 2")
		idle := computeStatus(s, outcome{Now: now.Add(time.Second), Spec: spec, Round: roundOutcome{NextRound: &next}})
		assert.Equal(t, metav1.ConditionTrue, testenv.Condition(idle.Conditions, blackadderv1beta1.ConditionDegraded).Status, "a pass without a round keeps it")
		clean := computeStatus(s, outcome{Now: now.Add(time.Minute), Spec: spec, Round: roundOutcome{Ran: true, NextRound: &next}})
		assert.Equal(t, metav1.ConditionFalse, testenv.Condition(clean.Conditions, blackadderv1beta1.ConditionDegraded).Status)
	})
	t.Run("paused", func(t *testing.T) {
		paused := spec
		paused.Paused = true
		s := computeStatus(blackadderv1beta1.ChaosAgentStatus{NextRoundTime: &metav1.Time{Time: now}, ChangedObjects: 1}, outcome{Now: now, Spec: paused,
			Restore: restoreOutcome{Attempted: true,
				Records: []record{rec(blackadderv1beta1.ActionRestoreDeployment, "a/d", succeeded, false)}}})
		assert.Nil(t, s.NextRoundTime)
		assert.EqualValues(t, 0, s.Rounds)
		assert.EqualValues(t, 1, s.Counts.Restored)
		assert.EqualValues(t, 0, s.ChangedObjects, "everything put back")
		assert.Equal(t, blackadderv1beta1.ReasonPausedBySpec, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionReady).Reason)
		assert.Equal(t, metav1.ConditionTrue, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionPaused).Status)
	})
	t.Run("restore failures", func(t *testing.T) {
		s := finished(t, blackadderv1beta1.ChaosAgentStatus{ObservedGeneration: 1}, outcome{Now: now, Generation: 2, Spec: spec,
			Restore: restoreOutcome{Attempted: true, Failed: 2}, Err: errors.New("boom")})
		assert.Equal(t, blackadderv1beta1.ReasonRestoreFailed, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionDegraded).Reason)
		assert.Equal(t, blackadderv1beta1.ReasonRoundFailed, testenv.Condition(s.Conditions, blackadderv1beta1.ConditionReady).Reason)
		assert.EqualValues(t, 1, s.ObservedGeneration, "a failed pass does not claim the spec; Ready says it failed")
		assert.EqualValues(t, 2, s.ChangedObjects, "the objects not put back still carry the marks")
		unlisted := computeStatus(blackadderv1beta1.ChaosAgentStatus{ChangedObjects: 3}, outcome{Now: now, Spec: spec, Err: errors.New("listing")})
		assert.EqualValues(t, 3, unlisted.ChangedObjects, "unknown when the changed objects could not be listed")
	})
	t.Run("objects left as they are by restore are reported, not retried", func(t *testing.T) {
		s := finished(t, blackadderv1beta1.ChaosAgentStatus{ObservedGeneration: 1, ChangedObjects: 3}, outcome{Now: now, Generation: 2, Spec: spec,
			Restore: restoreOutcome{Attempted: true, Left: 2, Records: []record{
				rec(blackadderv1beta1.ActionRestoreDeployment, "a/d", succeeded, false),
				rec(blackadderv1beta1.ActionRestoreConfigMap, "kube-system/c", skipped(SkipOutOfScope), false),
				rec(blackadderv1beta1.ActionRestoreConfigMap, "a/frozen", skipped(SkipImmutable), false),
			}}})
		c := testenv.Condition(s.Conditions, blackadderv1beta1.ConditionDegraded)
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, blackadderv1beta1.ReasonRestoreSkipped, c.Reason)
		assert.Contains(t, c.Message, "2 object(s)")
		assert.EqualValues(t, 2, s.ChangedObjects, "the objects left still carry the marks")
		assert.EqualValues(t, 1, s.Counts.Restored)
		assert.EqualValues(t, 2, s.ObservedGeneration, "a skip is not an error")
		assert.Equal(t, "a/frozen", s.LastActions[0].Target)
	})
	t.Run("invalid selector waits for an edit", func(t *testing.T) {
		s := finished(t, blackadderv1beta1.ChaosAgentStatus{}, outcome{Now: now, Generation: 4, Spec: spec, InvalidSpec: "spec.podSelector: bad"})
		c := testenv.Condition(s.Conditions, blackadderv1beta1.ConditionReady)
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, blackadderv1beta1.ReasonInvalidSelector, c.Reason)
		assert.Nil(t, s.NextRoundTime)
		assert.EqualValues(t, 4, s.ObservedGeneration)
	})
	t.Run("an idle pass over the stored status changes nothing", func(t *testing.T) {
		first := computeStatus(blackadderv1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: spec, Round: roundOutcome{Ran: true, NextRound: &next}})
		again := computeStatus(first, outcome{Now: now.Add(10 * time.Second), Spec: spec, Round: roundOutcome{NextRound: &next}})
		assert.True(t, equality.Semantic.DeepEqual(first, again), "no status write when nothing happened")
	})
	t.Run("input not modified", func(t *testing.T) {
		old := blackadderv1beta1.ChaosAgentStatus{Rounds: 1, LastActions: []blackadderv1beta1.ChaosAction{rec(blackadderv1beta1.ActionKillPod, "x/y", succeeded, false).ChaosAction}}
		before := *old.DeepCopy()
		computeStatus(old, outcome{Now: now, Spec: spec, Round: roundOutcome{Ran: true, Records: []record{rec(blackadderv1beta1.ActionKillPod, "a/b", succeeded, false)}}})
		assert.Equal(t, before, old)
	})
}

// TestResultStrings pins status.lastActions[].result, which is API: the typed result only
// saves the controller parsing it back.
func TestResultStrings(t *testing.T) {
	for res, want := range map[result]string{
		succeeded:                     "Succeeded",
		dryRun:                        "DryRun",
		skipped(SkipDisruptionBudget): "Skipped: DisruptionBudget",
		failed("ProtectedNamespace"):  "Failed: ProtectedNamespace",
	} {
		assert.Equal(t, want, res.String())
		r := rec(blackadderv1beta1.ActionKillPod, "a/p", res, false)
		assert.Equal(t, want, r.Result, "set keeps the string and the outcome together")
		assert.Equal(t, res, r.Outcome)
	}
}

func TestNewestFirstIsBounded(t *testing.T) {
	var previous []blackadderv1beta1.ChaosAction
	for round := 0; round < 5; round++ {
		var records []record
		for i := 0; i < 8; i++ {
			records = append(records, rec(blackadderv1beta1.ActionKillPod, fmt.Sprintf("r%d/p%d", round, i), succeeded, false))
		}
		previous = newestFirst(records, previous)
		assert.LessOrEqual(t, len(previous), maxLastActions)
		assert.Equal(t, fmt.Sprintf("r%d/p7", round), previous[0].Target)
	}
	assert.Len(t, previous, maxLastActions)
	assert.Equal(t, "r2/p4", previous[maxLastActions-1].Target)
}

func TestRoundDue(t *testing.T) {
	now := time.Unix(1000, 0)
	pause := 30 * time.Second
	for _, tc := range []struct {
		name string
		last *time.Time
		due  bool
		next time.Time
	}{
		{"never ran", nil, true, now.Add(pause)},
		{"pause elapsed", ptr.To(now.Add(-pause)), true, now.Add(pause)},
		{"long ago", ptr.To(now.Add(-time.Hour)), true, now.Add(pause)},
		{"in the middle of the pause", ptr.To(now.Add(-10 * time.Second)), false, now.Add(20 * time.Second)},
	} {
		due, next := roundDue(tc.last, pause, now)
		assert.Equal(t, tc.due, due, tc.name)
		assert.Equal(t, tc.next, next, tc.name)
	}
}

// TestComputeStatusWindowsGuardsRuns: the conditions and fields of schedules, guards and
// runs, pass after pass.
func TestComputeStatusWindowsGuardsRuns(t *testing.T) {
	now := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	next := now.Add(30 * time.Second)
	opens := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	guards := []blackadderv1beta1.SteadyStateGuard{
		{Name: "web", Deployment: &blackadderv1beta1.DeploymentGuard{Namespace: "shop", Name: "web"}},
		{Name: "api", HTTP: &blackadderv1beta1.HTTPGuard{URL: "http://api.shop.svc"}},
	}
	spec := withDefaults(blackadderv1beta1.ChaosAgentSpec{Guards: guards, RunName: "one"})
	cond := func(s blackadderv1beta1.ChaosAgentStatus, typ string) metav1.Condition {
		return testenv.Condition(s.Conditions, typ)
	}

	t.Run("an agent of the article: no schedule, no guards", func(t *testing.T) {
		s := computeStatus(blackadderv1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: withDefaults(blackadderv1beta1.ChaosAgentSpec{}),
			Round: roundOutcome{Ran: true, NextRound: &next}})
		assert.Equal(t, blackadderv1beta1.ReasonNoSchedule, cond(s, blackadderv1beta1.ConditionInWindow).Reason)
		assert.Equal(t, metav1.ConditionTrue, cond(s, blackadderv1beta1.ConditionInWindow).Status)
		assert.Equal(t, blackadderv1beta1.ReasonNoGuards, cond(s, blackadderv1beta1.ConditionGuardTripped).Reason)
		assert.Equal(t, metav1.ConditionFalse, cond(s, blackadderv1beta1.ConditionGuardTripped).Status)
		assert.Nil(t, s.Run, "no run recorded before one started")
		assert.Nil(t, s.NextWindowTime)
		assert.Empty(t, s.Guards)
	})
	t.Run("outside every window: Ready, waiting, and when the next opens", func(t *testing.T) {
		s := computeStatus(blackadderv1beta1.ChaosAgentStatus{NextRoundTime: &metav1.Time{Time: now}}, outcome{Now: now, Spec: spec, Run: blackadderv1beta1.ChaosRun{Name: "one"},
			Window: windowState{Scheduled: true, Open: false, Change: &opens, Zone: berlin}})
		assert.Equal(t, opens, s.NextWindowTime.UTC())
		assert.Nil(t, s.NextRoundTime)
		ready := cond(s, blackadderv1beta1.ConditionReady)
		assert.Equal(t, metav1.ConditionTrue, ready.Status)
		assert.Equal(t, blackadderv1beta1.ReasonWaitingForWindow, ready.Reason)
		in := cond(s, blackadderv1beta1.ConditionInWindow)
		assert.Equal(t, metav1.ConditionFalse, in.Status)
		assert.Equal(t, blackadderv1beta1.ReasonOutsideWindow, in.Reason)
		assert.Equal(t, "Outside every window of spec.schedule: the next opens at 2026-11-30T09:00:00+01:00 (Mon 09:00 Europe/Berlin)", in.Message)
		assert.Equal(t, metav1.ConditionUnknown, cond(s, blackadderv1beta1.ConditionGuardTripped).Status, "guards not checked yet")
		assert.Equal(t, blackadderv1beta1.ReasonNotChecked, cond(s, blackadderv1beta1.ConditionGuardTripped).Reason)
	})
	var running blackadderv1beta1.ChaosAgentStatus
	t.Run("inside a window, guards held: the run starts", func(t *testing.T) {
		closes := now.Add(8 * time.Hour)
		start := apiTime(now)
		running = computeStatus(blackadderv1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: spec,
			Run:    blackadderv1beta1.ChaosRun{Name: "one", StartTime: &start},
			Window: windowState{Scheduled: true, Open: true, Change: &closes, Zone: berlin},
			Guards: []guardVerdict{{Name: "web", Reason: blackadderv1beta1.GuardReasonPassed, Message: "3 ready"}, {Name: "api", Reason: blackadderv1beta1.GuardReasonPassed, Message: "200"}},
			Round:  roundOutcome{Ran: true, NextRound: &next}})
		assert.Nil(t, running.NextWindowTime)
		assert.Equal(t, blackadderv1beta1.ReasonInsideWindow, cond(running, blackadderv1beta1.ConditionInWindow).Reason)
		assert.Contains(t, cond(running, blackadderv1beta1.ConditionInWindow).Message, "until 2026-11-28T11:00:00+01:00")
		assert.Equal(t, metav1.ConditionFalse, cond(running, blackadderv1beta1.ConditionGuardTripped).Status)
		assert.Equal(t, blackadderv1beta1.ReasonGuardsPassed, cond(running, blackadderv1beta1.ConditionGuardTripped).Reason)
		require.NotNil(t, running.Run)
		assert.Equal(t, start, *running.Run.StartTime)
		require.Len(t, running.Guards, 2)
		assert.Equal(t, "web", running.Guards[0].Name, "in the order of spec")
		assert.Equal(t, blackadderv1beta1.GuardPassed, running.Guards[1].Result)
	})
	var tripped blackadderv1beta1.ChaosAgentStatus
	t.Run("a guard trips: the run ends and says why", func(t *testing.T) {
		run := endRun(*running.Run, blackadderv1beta1.RunEndGuardTripped, `guard "web" tripped: Deployment shop/web has 1 ready replica(s), below its floor of 2`, now.Add(time.Minute))
		tripped = computeStatus(running, outcome{Now: now.Add(time.Minute), Spec: spec, Run: run,
			Window: windowState{Scheduled: true, Open: true},
			Guards: []guardVerdict{{Name: "web", Failed: true, Reason: blackadderv1beta1.GuardReasonDeploymentBelowFloor, Message: "1 ready"}},
			Restore: restoreOutcome{Attempted: true, Records: []record{
				rec(blackadderv1beta1.ActionRestoreDeployment, "shop/api", succeeded, false)}}})
		gt := cond(tripped, blackadderv1beta1.ConditionGuardTripped)
		assert.Equal(t, metav1.ConditionTrue, gt.Status)
		assert.Equal(t, blackadderv1beta1.GuardReasonDeploymentBelowFloor, gt.Reason)
		assert.Contains(t, gt.Message, `guard "web" tripped`)
		ready := cond(tripped, blackadderv1beta1.ConditionReady)
		assert.Equal(t, metav1.ConditionFalse, ready.Status)
		assert.Equal(t, blackadderv1beta1.ReasonGuardTripped, ready.Reason)
		assert.Contains(t, ready.Message, "Give spec.runName a new value")
		assert.Equal(t, blackadderv1beta1.ReasonGuardTripped, cond(tripped, blackadderv1beta1.ConditionPaused).Reason)
		assert.Equal(t, metav1.ConditionTrue, cond(tripped, blackadderv1beta1.ConditionPaused).Status)
		assert.Equal(t, blackadderv1beta1.RunEndGuardTripped, tripped.Run.EndReason)
		assert.EqualValues(t, 1, tripped.Counts.Restored)
		assert.Equal(t, blackadderv1beta1.GuardFailed, tripped.Guards[0].Result, "web checked again")
		assert.Equal(t, blackadderv1beta1.GuardPassed, tripped.Guards[1].Result, "api not checked: its last result stays")
		assert.Nil(t, tripped.NextRoundTime)
	})
	t.Run("the stop holds over later passes", func(t *testing.T) {
		later := computeStatus(tripped, outcome{Now: now.Add(time.Hour), Spec: spec, Run: *tripped.Run, Window: windowState{Scheduled: true, Open: true},
			Restore: restoreOutcome{Attempted: true}})
		assert.Equal(t, blackadderv1beta1.GuardReasonDeploymentBelowFloor, cond(later, blackadderv1beta1.ConditionGuardTripped).Reason, "the guard's reason is kept")
		assert.Equal(t, cond(tripped, blackadderv1beta1.ConditionGuardTripped).LastTransitionTime, cond(later, blackadderv1beta1.ConditionGuardTripped).LastTransitionTime)
		assert.Equal(t, blackadderv1beta1.ReasonGuardTripped, cond(later, blackadderv1beta1.ConditionReady).Reason)
		assert.True(t, equality.Semantic.DeepEqual(tripped, later), "no status write while stopped")
	})
	t.Run("a pause while stopped is a pause", func(t *testing.T) {
		paused := spec
		paused.Paused = true
		s := computeStatus(tripped, outcome{Now: now.Add(time.Hour), Spec: paused, Run: *tripped.Run})
		assert.Equal(t, blackadderv1beta1.ReasonPausedBySpec, cond(s, blackadderv1beta1.ConditionReady).Reason)
		assert.Equal(t, blackadderv1beta1.ReasonPausedBySpec, cond(s, blackadderv1beta1.ConditionPaused).Reason)
		assert.Equal(t, metav1.ConditionTrue, cond(s, blackadderv1beta1.ConditionGuardTripped).Status, "and the trip is still shown")
	})
	t.Run("a new runName starts a new run", func(t *testing.T) {
		two := spec
		two.RunName = "two"
		s := computeStatus(tripped, outcome{Now: now.Add(2 * time.Hour), Spec: two, Run: currentRun(tripped.Run, "two"), Window: windowState{Scheduled: true, Open: false}})
		assert.Equal(t, &blackadderv1beta1.ChaosRun{Name: "two"}, s.Run)
		assert.Equal(t, metav1.ConditionUnknown, cond(s, blackadderv1beta1.ConditionGuardTripped).Status, "the trip of the last run is not this run's")
		assert.Equal(t, metav1.ConditionFalse, cond(s, blackadderv1beta1.ConditionPaused).Status)
		assert.Equal(t, blackadderv1beta1.ReasonWaitingForWindow, cond(s, blackadderv1beta1.ConditionReady).Reason)
		assert.Nil(t, s.NextWindowTime, "no window within the horizon")
		assert.Contains(t, cond(s, blackadderv1beta1.ConditionInWindow).Message, "no window opens in the next 800 days")
	})
	t.Run("the duration elapsed", func(t *testing.T) {
		hour := spec
		hour.DurationSeconds = ptr.To[int32](3600)
		run, expired := expireRun(hour, *running.Run, now.Add(time.Hour))
		require.True(t, expired)
		s := computeStatus(running, outcome{Now: now.Add(time.Hour), Spec: hour, Run: run, Window: windowState{Scheduled: true, Open: true}})
		assert.Equal(t, blackadderv1beta1.ReasonDurationElapsed, cond(s, blackadderv1beta1.ConditionReady).Reason)
		assert.Equal(t, blackadderv1beta1.ReasonDurationElapsed, cond(s, blackadderv1beta1.ConditionPaused).Reason)
		assert.Equal(t, metav1.ConditionTrue, cond(s, blackadderv1beta1.ConditionPaused).Status)
		assert.Equal(t, metav1.ConditionFalse, cond(s, blackadderv1beta1.ConditionGuardTripped).Status, "no guard tripped")
		assert.Equal(t, blackadderv1beta1.RunEndDurationElapsed, s.Run.EndReason)
	})
	t.Run("guards removed from spec leave status", func(t *testing.T) {
		none := spec
		none.Guards = nil
		s := computeStatus(running, outcome{Now: now.Add(time.Minute), Spec: none, Run: *running.Run, Round: roundOutcome{NextRound: &next}})
		assert.Empty(t, s.Guards)
		assert.Equal(t, blackadderv1beta1.ReasonNoGuards, cond(s, blackadderv1beta1.ConditionGuardTripped).Reason)
	})
	t.Run("an invalid schedule waits for an edit and keeps the run", func(t *testing.T) {
		s := computeStatus(tripped, outcome{Now: now, Spec: spec, InvalidSpec: "spec.schedule.timeZone: bad", InvalidReason: blackadderv1beta1.ReasonInvalidSchedule})
		assert.Equal(t, blackadderv1beta1.ReasonInvalidSchedule, cond(s, blackadderv1beta1.ConditionReady).Reason)
		assert.Equal(t, tripped.Run, s.Run)
	})
}
