package chaosagent

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/test/testenv"
)

func rec(kind v1beta1.ActionKind, target, result string, dry bool) v1beta1.ChaosAction {
	return v1beta1.ChaosAction{Kind: kind, Target: target, Result: result, DryRun: dry}
}

func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 700_000_000, time.UTC)
	next := now.Add(30 * time.Second)
	spec := withDefaults(v1beta1.ChaosAgentSpec{})

	t.Run("first round counts successes only and sets every condition", func(t *testing.T) {
		s := computeStatus(v1beta1.ChaosAgentStatus{}, outcome{Now: now, Generation: 3, Spec: spec, Round: roundOutcome{
			Ran: true, NextRound: &next, ChangedObjects: ptr.To[int32](2),
			Records: []v1beta1.ChaosAction{
				rec(v1beta1.ActionKillPod, "a/p1", ResultSucceeded, false),
				rec(v1beta1.ActionKillPod, "a/p2", skipped(SkipDisruptionBudget), false),
				rec(v1beta1.ActionScaleDeployment, "a/d", ResultSucceeded, false),
				rec(v1beta1.ActionIpsumConfigMap, "a/c", ResultSucceeded, false),
			}}})
		assert.EqualValues(t, 1, s.Rounds)
		assert.Equal(t, now.Truncate(time.Second), s.LastRoundTime.UTC(), "whole seconds, as the API stores it")
		assert.Equal(t, next.Truncate(time.Second), s.NextRoundTime.UTC())
		assert.Equal(t, v1beta1.ChaosCounts{PodsKilled: 1, DeploymentsScaled: 1, ConfigMapsIpsumed: 1}, s.Counts)
		assert.EqualValues(t, 2, s.ChangedObjects)
		assert.EqualValues(t, 3, s.ObservedGeneration)
		require.Len(t, s.LastActions, 4)
		assert.Equal(t, "a/c", s.LastActions[0].Target, "newest first")
		assert.Equal(t, metav1.ConditionTrue, testenv.Condition(s.Conditions, ConditionReady).Status)
		assert.Equal(t, ReasonRoundsRunning, testenv.Condition(s.Conditions, ConditionReady).Reason)
		assert.Equal(t, metav1.ConditionFalse, testenv.Condition(s.Conditions, ConditionPaused).Status)
		assert.Equal(t, metav1.ConditionFalse, testenv.Condition(s.Conditions, ConditionDegraded).Status)
	})
	t.Run("dry-run records actions but counts nothing", func(t *testing.T) {
		dry := spec
		dry.DryRun = true
		s := computeStatus(v1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: dry, Round: roundOutcome{Ran: true, NextRound: &next,
			Records: []v1beta1.ChaosAction{rec(v1beta1.ActionKillPod, "a/p1", ResultDryRun, true)}}})
		assert.Equal(t, v1beta1.ChaosCounts{}, s.Counts)
		assert.Len(t, s.LastActions, 1)
		assert.Contains(t, testenv.Condition(s.Conditions, ConditionReady).Message, "dry run")
	})
	t.Run("failed actions make the agent Degraded until a clean round", func(t *testing.T) {
		s := computeStatus(v1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: spec, Round: roundOutcome{Ran: true, NextRound: &next,
			Records: []v1beta1.ChaosAction{rec(v1beta1.ActionKillPod, "a/p1", failed("Forbidden"), false),
				rec(v1beta1.ActionKillPod, "a/p2", ResultSucceeded, false)}}})
		c := testenv.Condition(s.Conditions, ConditionDegraded)
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, ReasonActionsFailed, c.Reason)
		assert.Contains(t, c.Message, "1 of 2")
		idle := computeStatus(s, outcome{Now: now.Add(time.Second), Spec: spec, Round: roundOutcome{NextRound: &next}})
		assert.Equal(t, metav1.ConditionTrue, testenv.Condition(idle.Conditions, ConditionDegraded).Status, "a pass without a round keeps it")
		clean := computeStatus(s, outcome{Now: now.Add(time.Minute), Spec: spec, Round: roundOutcome{Ran: true, NextRound: &next}})
		assert.Equal(t, metav1.ConditionFalse, testenv.Condition(clean.Conditions, ConditionDegraded).Status)
	})
	t.Run("paused", func(t *testing.T) {
		paused := spec
		paused.Paused = true
		s := computeStatus(v1beta1.ChaosAgentStatus{NextRoundTime: &metav1.Time{Time: now}, ChangedObjects: 1}, outcome{Now: now, Spec: paused,
			Restore: restoreOutcome{Attempted: true,
				Records: []v1beta1.ChaosAction{rec(v1beta1.ActionRestoreDeployment, "a/d", ResultSucceeded, false)}}})
		assert.Nil(t, s.NextRoundTime)
		assert.EqualValues(t, 0, s.Rounds)
		assert.EqualValues(t, 1, s.Counts.Restored)
		assert.EqualValues(t, 0, s.ChangedObjects, "everything put back")
		assert.Equal(t, ReasonPaused, testenv.Condition(s.Conditions, ConditionReady).Reason)
		assert.Equal(t, metav1.ConditionTrue, testenv.Condition(s.Conditions, ConditionPaused).Status)
	})
	t.Run("restore failures", func(t *testing.T) {
		s := computeStatus(v1beta1.ChaosAgentStatus{ObservedGeneration: 1}, outcome{Now: now, Generation: 2, Spec: spec,
			Restore: restoreOutcome{Attempted: true, Failed: 2}, Err: errors.New("boom")})
		assert.Equal(t, ReasonRestoreFailed, testenv.Condition(s.Conditions, ConditionDegraded).Reason)
		assert.Equal(t, ReasonRoundFailed, testenv.Condition(s.Conditions, ConditionReady).Reason)
		assert.EqualValues(t, 1, s.ObservedGeneration, "not observed while failing")
		assert.EqualValues(t, 2, s.ChangedObjects, "the objects not put back still carry the marks")
		unlisted := computeStatus(v1beta1.ChaosAgentStatus{ChangedObjects: 3}, outcome{Now: now, Spec: spec, Err: errors.New("listing")})
		assert.EqualValues(t, 3, unlisted.ChangedObjects, "unknown when the changed objects could not be listed")
	})
	t.Run("objects left as they are by restore are reported, not retried", func(t *testing.T) {
		s := computeStatus(v1beta1.ChaosAgentStatus{ObservedGeneration: 1, ChangedObjects: 3}, outcome{Now: now, Generation: 2, Spec: spec,
			Restore: restoreOutcome{Attempted: true, Left: 2, Records: []v1beta1.ChaosAction{
				rec(v1beta1.ActionRestoreDeployment, "a/d", ResultSucceeded, false),
				rec(v1beta1.ActionRestoreConfigMap, "kube-system/c", skipped(SkipOutOfScope), false),
				rec(v1beta1.ActionRestoreConfigMap, "a/frozen", skipped(SkipImmutable), false),
			}}})
		c := testenv.Condition(s.Conditions, ConditionDegraded)
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, ReasonRestoreSkipped, c.Reason)
		assert.Contains(t, c.Message, "2 object(s)")
		assert.EqualValues(t, 2, s.ChangedObjects, "the objects left still carry the marks")
		assert.EqualValues(t, 1, s.Counts.Restored)
		assert.EqualValues(t, 2, s.ObservedGeneration, "a skip is not an error")
		assert.Equal(t, "a/frozen", s.LastActions[0].Target)
	})
	t.Run("invalid selector waits for an edit", func(t *testing.T) {
		s := computeStatus(v1beta1.ChaosAgentStatus{}, outcome{Now: now, Generation: 4, Spec: spec, InvalidSpec: "spec.podSelector: bad"})
		c := testenv.Condition(s.Conditions, ConditionReady)
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, ReasonInvalidSelector, c.Reason)
		assert.Nil(t, s.NextRoundTime)
		assert.EqualValues(t, 4, s.ObservedGeneration)
	})
	t.Run("an idle pass over the stored status changes nothing", func(t *testing.T) {
		first := computeStatus(v1beta1.ChaosAgentStatus{}, outcome{Now: now, Spec: spec, Round: roundOutcome{Ran: true, NextRound: &next}})
		again := computeStatus(first, outcome{Now: now.Add(10 * time.Second), Spec: spec, Round: roundOutcome{NextRound: &next}})
		assert.True(t, equality.Semantic.DeepEqual(first, again), "no status write when nothing happened")
	})
	t.Run("input not modified", func(t *testing.T) {
		old := v1beta1.ChaosAgentStatus{Rounds: 1, LastActions: []v1beta1.ChaosAction{rec(v1beta1.ActionKillPod, "x/y", ResultSucceeded, false)}}
		before := *old.DeepCopy()
		computeStatus(old, outcome{Now: now, Spec: spec, Round: roundOutcome{Ran: true, Records: []v1beta1.ChaosAction{rec(v1beta1.ActionKillPod, "a/b", ResultSucceeded, false)}}})
		assert.Equal(t, before, old)
	})
}

func TestNewestFirstIsBounded(t *testing.T) {
	var previous []v1beta1.ChaosAction
	for round := 0; round < 5; round++ {
		var records []v1beta1.ChaosAction
		for i := 0; i < 8; i++ {
			records = append(records, rec(v1beta1.ActionKillPod, fmt.Sprintf("r%d/p%d", round, i), ResultSucceeded, false))
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
