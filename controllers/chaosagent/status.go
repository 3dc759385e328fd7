package chaosagent

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/status"
)

// ChaosAction.result of an action that succeeded, or was only recorded (dry-run).
const (
	ResultSucceeded = "Succeeded"
	ResultDryRun    = "DryRun"
)

// maxLastActions bounds status.lastActions (the CRD refuses more).
const maxLastActions = 20

// resultKind is how an action ended, in the order result.String and metricResult name it.
type resultKind int

const (
	resultSucceeded resultKind = iota
	resultDryRun
	resultSkipped
	resultFailed
)

// result is how an action ended and, for a skip or a failure, why.
type result struct {
	Kind   resultKind
	Reason string
}

var (
	succeeded = result{Kind: resultSucceeded}
	dryRun    = result{Kind: resultDryRun}
)

func skipped(reason string) result { return result{Kind: resultSkipped, Reason: reason} }
func failed(reason string) result  { return result{Kind: resultFailed, Reason: reason} }

// String is the result as ChaosAction.result shows it, never parsed back.
func (r result) String() string {
	return [...]string{ResultSucceeded, ResultDryRun, "Skipped: ", "Failed: "}[r.Kind] + r.Reason
}

// record is one action or restore of a pass: its status.lastActions entry and Outcome.
type record struct {
	blackadderv1beta1.ChaosAction
	Outcome result
}

func (rec *record) set(detail string, res result) {
	rec.Detail, rec.Outcome, rec.Result = detail, res, res.String()
}

// roundOutcome is what a round did; ChangedObjects, when known, still carry the agent's marks.
type roundOutcome struct {
	Ran            bool
	NextRound      *time.Time
	Records        []record
	ChangedObjects *int32
}

// restoreOutcome is what a restore did: how many failed (retried) and restoreSkip left (not retried).
type restoreOutcome struct {
	Attempted    bool
	Records      []record
	Failed, Left int
}

// outcome is what one pass over an agent found and did; computeStatus turns it into status.
type outcome struct {
	Now                        time.Time
	Generation                 int64
	Spec                       blackadderv1beta1.ChaosAgentSpec // its defaults filled
	InvalidSpec, InvalidReason string                           // why the spec cannot be used (a user's mistake); Ready's reason
	Window                     windowState
	Run                        blackadderv1beta1.ChaosRun // the current run after the pass (zero before the first)
	Guards                     []guardVerdict             // the guards checked in this pass (none: not checked)
	Round                      roundOutcome
	Restore                    restoreOutcome
	Err                        error // why the pass failed (reading the cache, a round, a restore): retried
}

// computeStatus returns old updated with what the pass o did (Finish's derive, which sets
// observedGeneration itself); pure, so that it applies again after a conflict.
func computeStatus(old blackadderv1beta1.ChaosAgentStatus, o outcome) blackadderv1beta1.ChaosAgentStatus {
	s := *old.DeepCopy()
	if o.Round.Ran {
		s.Rounds++
		s.LastRoundTime = timeOrNil(&o.Now)
	}
	s.NextRoundTime = timeOrNil(o.Round.NextRound)
	records := slices.Concat(o.Round.Records, o.Restore.Records)
	for _, r := range records {
		if r.DryRun || r.Outcome.Kind != resultSucceeded {
			continue
		}
		switch r.Kind {
		case blackadderv1beta1.ActionKillPod:
			s.Counts.PodsKilled++
		case blackadderv1beta1.ActionScaleDeployment:
			s.Counts.DeploymentsScaled++
		case blackadderv1beta1.ActionIpsumConfigMap:
			s.Counts.ConfigMapsIpsumed++
		case blackadderv1beta1.ActionRestoreDeployment, blackadderv1beta1.ActionRestoreConfigMap:
			s.Counts.Restored++
		}
	}
	s.LastActions = newestFirst(records, s.LastActions)
	switch { // how many objects still carry the agent's marks, when the pass learned it
	case o.Restore.Attempted:
		s.ChangedObjects = int32(o.Restore.Failed + o.Restore.Left)
	case o.Round.ChangedObjects != nil:
		s.ChangedObjects = *o.Round.ChangedObjects
	}
	s.NextWindowTime = nil
	if o.InvalidSpec == "" {
		if o.Window.Scheduled && !o.Window.Open {
			s.NextWindowTime = timeOrNil(o.Window.Change)
		}
		s.Run = nil
		if !equality.Semantic.DeepEqual(o.Run, blackadderv1beta1.ChaosRun{}) {
			s.Run = o.Run.DeepCopy()
		}
	}
	s.Guards = mergeGuardResults(s.Guards, guardResults(o.Guards, o.Now), o.Spec.Guards)
	setConditions(&s, o, records)
	return s
}

func timeOrNil(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return ptr.To(apiTime(*t))
}

// mergeGuardResults keeps the results of the guards in spec, in its order, the newest of each.
func mergeGuardResults(previous, checked []blackadderv1beta1.GuardResult, guards []blackadderv1beta1.SteadyStateGuard) []blackadderv1beta1.GuardResult {
	byName := map[string]blackadderv1beta1.GuardResult{}
	for _, r := range slices.Concat(previous, checked) {
		byName[r.Name] = r
	}
	var out []blackadderv1beta1.GuardResult
	for _, g := range guards {
		if r, ok := byName[g.Name]; ok {
			out = append(out, r)
		}
	}
	return out
}

// newestFirst puts records (oldest first) before previous (newest first), maxLastActions at most.
func newestFirst(records []record, previous []blackadderv1beta1.ChaosAction) []blackadderv1beta1.ChaosAction {
	out := make([]blackadderv1beta1.ChaosAction, 0, len(records)+len(previous))
	for i := len(records) - 1; i >= 0; i-- {
		out = append(out, records[i].ChaosAction)
	}
	return append(out, previous...)[:min(len(records)+len(previous), maxLastActions)]
}

// setConditions sets Ready, Paused, Degraded, InWindow and GuardTripped.
func setConditions(s *blackadderv1beta1.ChaosAgentStatus, o outcome, records []record) {
	c := status.NewConditions(&s.Conditions, o.Generation, o.Now)
	mode := ""
	if o.Spec.DryRun {
		mode = " (dry run: records what it would do, changes nothing)"
	}
	ended := o.InvalidSpec == "" && o.Run.EndTime != nil
	const resume = " Give spec.runName a new value to start a new run."
	switch {
	case o.InvalidSpec != "":
		c.Set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, cmp.Or(o.InvalidReason, blackadderv1beta1.ReasonInvalidSelector), o.InvalidSpec)
	case o.Spec.Paused:
		c.Set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, blackadderv1beta1.ReasonPausedBySpec, "spec.paused is true: no rounds run")
	case ended:
		c.Set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, runEndConditionReason(o.Run.EndReason), "The run ended: "+o.Run.EndMessage+"."+resume)
	case o.Err != nil:
		c.Set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, blackadderv1beta1.ReasonRoundFailed, o.Err.Error())
	case o.Window.Scheduled && !o.Window.Open:
		c.Set(blackadderv1beta1.ConditionReady, metav1.ConditionTrue, blackadderv1beta1.ReasonWaitingForWindow, "Outside every window of spec.schedule: "+nextWindowPhrase(o.Window)+mode)
	default:
		c.Set(blackadderv1beta1.ConditionReady, metav1.ConditionTrue, blackadderv1beta1.ReasonRoundsRunning,
			fmt.Sprintf("Runs a round every %ds%s", o.Spec.PauseDuration, mode))
	}
	switch {
	case o.Spec.Paused:
		c.Set(blackadderv1beta1.ConditionPaused, metav1.ConditionTrue, blackadderv1beta1.ReasonPausedBySpec, "spec.paused is true")
	case ended:
		c.Set(blackadderv1beta1.ConditionPaused, metav1.ConditionTrue, runEndConditionReason(o.Run.EndReason), "The agent stopped itself: "+o.Run.EndMessage+"."+resume)
	default:
		c.Set(blackadderv1beta1.ConditionPaused, metav1.ConditionFalse, blackadderv1beta1.ReasonNotPaused, "Rounds run every spec.pauseDuration seconds")
	}
	if o.InvalidSpec == "" {
		setWindowCondition(c, o.Window)
		setGuardCondition(c, s, o)
	}
	setDegradedCondition(c, s, o, records)
}

// setDegradedCondition describes the last pass that acted: a pass that neither ran a round nor
// recorded an action keeps it as it was (it is set to False the first time).
func setDegradedCondition(c status.Conditions, s *blackadderv1beta1.ChaosAgentStatus, o outcome, records []record) {
	failures := 0
	for _, r := range records {
		if r.Outcome.Kind == resultFailed {
			failures++
		}
	}
	switch {
	case o.Restore.Failed > 0:
		c.Set(blackadderv1beta1.ConditionDegraded, metav1.ConditionTrue, blackadderv1beta1.ReasonRestoreFailed,
			fmt.Sprintf("%d changed object(s) could not be put back yet; retrying", o.Restore.Failed))
	case o.Restore.Left > 0:
		c.Set(blackadderv1beta1.ConditionDegraded, metav1.ConditionTrue, blackadderv1beta1.ReasonRestoreSkipped,
			fmt.Sprintf("%d object(s) carrying the agent's marks were left as they are (outside the agent's scope, or immutable); see status.lastActions", o.Restore.Left))
	case failures > 0:
		c.Set(blackadderv1beta1.ConditionDegraded, metav1.ConditionTrue, blackadderv1beta1.ReasonActionsFailed,
			fmt.Sprintf("%d of %d action(s) failed in the last pass; see status.lastActions", failures, len(records)))
	case o.Round.Ran || len(records) > 0 || meta.FindStatusCondition(s.Conditions, blackadderv1beta1.ConditionDegraded) == nil:
		c.Set(blackadderv1beta1.ConditionDegraded, metav1.ConditionFalse, blackadderv1beta1.ReasonNoFailures, "No action failed in the last pass")
	}
}

// setWindowCondition sets InWindow from where the agent stands against its schedule.
func setWindowCondition(c status.Conditions, w windowState) {
	switch {
	case !w.Scheduled:
		c.Set(blackadderv1beta1.ConditionInWindow, metav1.ConditionTrue, blackadderv1beta1.ReasonNoSchedule, "No spec.schedule: rounds may run at any time")
	case w.Open && w.Change != nil:
		c.Set(blackadderv1beta1.ConditionInWindow, metav1.ConditionTrue, blackadderv1beta1.ReasonInsideWindow, "Inside a window of spec.schedule until "+w.describe(*w.Change))
	case w.Open:
		c.Set(blackadderv1beta1.ConditionInWindow, metav1.ConditionTrue, blackadderv1beta1.ReasonInsideWindow, "Inside a window of spec.schedule")
	default:
		c.Set(blackadderv1beta1.ConditionInWindow, metav1.ConditionFalse, blackadderv1beta1.ReasonOutsideWindow, "Outside every window of spec.schedule: "+nextWindowPhrase(w))
	}
}

// nextWindowPhrase says when the next window opens.
func nextWindowPhrase(w windowState) string {
	if w.Change == nil {
		return "no window opens in the next " + fmt.Sprint(int(scheduleHorizon.Hours()/24)) + " days"
	}
	return "the next opens at " + w.describe(*w.Change)
}

// setGuardCondition sets GuardTripped: True with the guard's reason from the pass a guard
// failed until a new run starts; False after a check that passed, or without guards;
// Unknown before the first check of a run. It keeps its last check while no guard is checked.
func setGuardCondition(c status.Conditions, s *blackadderv1beta1.ChaosAgentStatus, o outcome) {
	last := meta.FindStatusCondition(s.Conditions, blackadderv1beta1.ConditionGuardTripped)
	switch {
	case o.Run.EndTime != nil && o.Run.EndReason == blackadderv1beta1.RunEndGuardTripped:
		reason := blackadderv1beta1.ReasonGuardTripped
		if f := firstFailure(o.Guards); f != nil {
			reason = f.Reason
		} else if last != nil && last.Status == metav1.ConditionTrue {
			reason = last.Reason // tripped in an earlier pass
		}
		c.Set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionTrue, reason, o.Run.EndMessage)
	case len(o.Spec.Guards) == 0:
		c.Set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionFalse, blackadderv1beta1.ReasonNoGuards, "No spec.guards")
	case len(o.Guards) > 0:
		c.Set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionFalse, blackadderv1beta1.ReasonGuardsPassed,
			fmt.Sprintf("%d guard(s) held at %s", len(o.Guards), o.Now.UTC().Truncate(time.Second).Format(time.RFC3339)))
	case last == nil || last.Status == metav1.ConditionTrue || last.Reason == blackadderv1beta1.ReasonNoGuards:
		// Not checked in this pass, after a trip of an earlier run or no check at all.
		c.Set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionUnknown, blackadderv1beta1.ReasonNotChecked, "The guards are checked before the next round")
	}
}

// runEndConditionReason is the Ready and Paused reason of an ended run.
func runEndConditionReason(r blackadderv1beta1.RunEndReason) string {
	if r == blackadderv1beta1.RunEndDurationElapsed {
		return blackadderv1beta1.ReasonDurationElapsed
	}
	return blackadderv1beta1.ReasonGuardTripped
}

// apiTime returns t as the API stores it, so that an unchanged status compares equal.
func apiTime(t time.Time) metav1.Time {
	return metav1.NewTime(t.Truncate(time.Second))
}
