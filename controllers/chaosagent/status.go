package chaosagent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// Condition types.
const (
	ConditionReady    = "Ready"
	ConditionPaused   = "Paused"
	ConditionDegraded = "Degraded"
)

// Condition reasons.
const (
	ReasonRoundsRunning   = "RoundsRunning"
	ReasonPaused          = "PausedBySpec"
	ReasonNotPaused       = "NotPaused"
	ReasonInvalidSelector = "InvalidSelector"
	ReasonRoundFailed     = "RoundFailed"
	ReasonActionsFailed   = "ActionsFailed"
	ReasonRestoreFailed   = "RestoreFailed"
	ReasonRestoreSkipped  = "RestoreSkipped"
	ReasonNoFailures      = "NoFailures"
)

// Results of an action (ChaosAction.result).
const (
	ResultSucceeded = "Succeeded"
	ResultDryRun    = "DryRun"
	skippedPrefix   = "Skipped: "
	failedPrefix    = "Failed: "
)

// maxLastActions bounds status.lastActions (the CRD refuses more).
const maxLastActions = 20

func skipped(reason string) string { return skippedPrefix + reason }
func failed(reason string) string  { return failedPrefix + reason }
func isFailed(result string) bool  { return strings.HasPrefix(result, failedPrefix) }
func isSkipped(result string) bool { return strings.HasPrefix(result, skippedPrefix) }

// roundOutcome is what the round phase returns.
type roundOutcome struct {
	// Ran is true when this pass ran a round.
	Ran bool
	// NextRound is when the next round is due (nil when the round could not run).
	NextRound *time.Time
	// Records are the round's actions (taken, or only recorded in dry-run), in order.
	Records []v1beta1.ChaosAction
	// ChangedObjects, when known, is the number of objects still carrying this agent's marks.
	ChangedObjects *int32
}

// restoreOutcome is what the restore phase (a paused or deleted agent) returns.
type restoreOutcome struct {
	// Attempted is true when the agent's changed objects were listed and each was tried.
	Attempted bool
	// Records are the restores done, in order.
	Records []v1beta1.ChaosAction
	// Failed counts objects that could not be put back yet; they still carry the agent's marks
	// and are retried.
	Failed int
	// Left counts objects restoreSkip rules out (outside the agent's scope, or immutable
	// ConfigMaps): they keep the agent's marks and are not retried.
	Left int
}

// outcome is what one reconcile of an agent found and did, gathered by Reconcile from the
// values its phases returned; computeStatus turns it into status.
type outcome struct {
	Now        time.Time
	Generation int64
	// Spec is the agent's spec with defaults filled.
	Spec v1beta1.ChaosAgentSpec
	// InvalidSpec says why the spec cannot be used (a user's mistake: wait for the next edit).
	InvalidSpec string
	Round       roundOutcome
	Restore     restoreOutcome
	// Err is why a phase failed (reading the cache, restoring); the pass is retried.
	Err error
}

// records returns the actions and restores of the pass, in order.
func (o outcome) records() []v1beta1.ChaosAction {
	return slices.Concat(o.Round.Records, o.Restore.Records)
}

// changedObjects returns the number of objects still carrying the agent's marks, when the
// pass learned it.
func (o outcome) changedObjects() (int32, bool) {
	switch {
	case o.Restore.Attempted:
		return int32(o.Restore.Failed + o.Restore.Left), true
	case o.Round.ChangedObjects != nil:
		return *o.Round.ChangedObjects, true
	}
	return 0, false
}

// computeStatus returns old updated with what the pass o did. It is pure, so that a status
// write that lost a conflict can apply the same outcome again to the newest status.
func computeStatus(old v1beta1.ChaosAgentStatus, o outcome) v1beta1.ChaosAgentStatus {
	s := *old.DeepCopy()
	now := apiTime(o.Now)
	if o.Round.Ran {
		s.Rounds++
		s.LastRoundTime = &now
	}
	s.NextRoundTime = nil
	if o.Round.NextRound != nil {
		t := apiTime(*o.Round.NextRound)
		s.NextRoundTime = &t
	}
	records := o.records()
	for _, r := range records {
		if r.DryRun || r.Result != ResultSucceeded {
			continue
		}
		switch r.Kind {
		case v1beta1.ActionKillPod:
			s.Counts.PodsKilled++
		case v1beta1.ActionScaleDeployment:
			s.Counts.DeploymentsScaled++
		case v1beta1.ActionIpsumConfigMap:
			s.Counts.ConfigMapsIpsumed++
		case v1beta1.ActionRestoreDeployment, v1beta1.ActionRestoreConfigMap:
			s.Counts.Restored++
		}
	}
	s.LastActions = newestFirst(records, s.LastActions)
	if n, known := o.changedObjects(); known {
		s.ChangedObjects = n
	}
	setConditions(&s, o, records)
	if o.Err == nil {
		s.ObservedGeneration = o.Generation
	}
	return s
}

// newestFirst puts records (oldest first) in front of previous (newest first), at most
// maxLastActions in all.
func newestFirst(records, previous []v1beta1.ChaosAction) []v1beta1.ChaosAction {
	if len(records) == 0 {
		return previous
	}
	out := make([]v1beta1.ChaosAction, 0, min(len(records)+len(previous), maxLastActions))
	for i := len(records) - 1; i >= 0 && len(out) < maxLastActions; i-- {
		out = append(out, records[i])
	}
	for i := 0; i < len(previous) && len(out) < maxLastActions; i++ {
		out = append(out, previous[i])
	}
	return out
}

// setConditions sets Ready, Paused and Degraded. Degraded describes the last pass that acted:
// a pass that neither ran a round nor recorded an action keeps it as it was (it is set to
// False the first time).
func setConditions(s *v1beta1.ChaosAgentStatus, o outcome, records []v1beta1.ChaosAction) {
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: o.Generation, LastTransitionTime: apiTime(o.Now)})
	}
	mode := ""
	if o.Spec.DryRun {
		mode = " (dry run: records what it would do, changes nothing)"
	}
	switch {
	case o.InvalidSpec != "":
		set(ConditionReady, metav1.ConditionFalse, ReasonInvalidSelector, o.InvalidSpec)
	case o.Spec.Paused:
		set(ConditionReady, metav1.ConditionFalse, ReasonPaused, "spec.paused is true: no rounds run")
	case o.Err != nil:
		set(ConditionReady, metav1.ConditionFalse, ReasonRoundFailed, o.Err.Error())
	default:
		set(ConditionReady, metav1.ConditionTrue, ReasonRoundsRunning,
			fmt.Sprintf("Runs a round every %ds%s", o.Spec.PauseDuration, mode))
	}
	if o.Spec.Paused {
		set(ConditionPaused, metav1.ConditionTrue, ReasonPaused, "spec.paused is true")
	} else {
		set(ConditionPaused, metav1.ConditionFalse, ReasonNotPaused, "Rounds run every spec.pauseDuration seconds")
	}

	failures := 0
	for _, r := range records {
		if isFailed(r.Result) {
			failures++
		}
	}
	switch {
	case o.Restore.Failed > 0:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonRestoreFailed,
			fmt.Sprintf("%d changed object(s) could not be put back yet; retrying", o.Restore.Failed))
	case o.Restore.Left > 0:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonRestoreSkipped,
			fmt.Sprintf("%d object(s) carrying the agent's marks were left as they are (outside the agent's scope, or immutable); see status.lastActions", o.Restore.Left))
	case failures > 0:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonActionsFailed,
			fmt.Sprintf("%d of %d action(s) failed in the last pass; see status.lastActions", failures, len(records)))
	case o.Round.Ran || len(records) > 0 || meta.FindStatusCondition(s.Conditions, ConditionDegraded) == nil:
		set(ConditionDegraded, metav1.ConditionFalse, ReasonNoFailures, "No action failed in the last pass")
	}
}

// roundDue says whether a round is due at now, given when the last one ran (nil: never), and
// when the next one is due.
func roundDue(last *time.Time, pause time.Duration, now time.Time) (due bool, next time.Time) {
	if last == nil || !now.Before(last.Add(pause)) {
		return true, now.Add(pause)
	}
	return false, last.Add(pause)
}

// apiTime returns t as the API stores it (whole seconds), so that a status computed in memory
// equals the same status read back and unchanged status is not written again.
func apiTime(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second))
}
