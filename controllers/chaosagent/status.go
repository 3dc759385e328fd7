package chaosagent

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// Results of an action (ChaosAction.result) without a reason; a skip or a failure reads
// "Skipped: <reason>" or "Failed: <reason>" (result.String).
const (
	ResultSucceeded = "Succeeded"
	ResultDryRun    = "DryRun"
)

// maxLastActions bounds status.lastActions (the CRD refuses more).
const maxLastActions = 20

// resultKind is how an action ended.
type resultKind int

const (
	resultSucceeded resultKind = iota
	resultDryRun
	resultSkipped
	resultFailed
)

// result is how an action ended and, for a skip or a failure, why. Events, metrics and
// conditions decide on it; status.lastActions shows its String, which is never parsed back.
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

// String is the result as ChaosAction.result shows it.
func (r result) String() string {
	switch r.Kind {
	case resultDryRun:
		return ResultDryRun
	case resultSkipped:
		return "Skipped: " + r.Reason
	case resultFailed:
		return "Failed: " + r.Reason
	default:
		return ResultSucceeded
	}
}

// record is one action or restore of a pass: its status.lastActions entry, whose Result is
// Outcome's String, and Outcome itself.
type record struct {
	blackadderv1beta1.ChaosAction
	Outcome result
}

// set fills the record's detail and result.
func (rec *record) set(detail string, res result) {
	rec.Detail, rec.Outcome, rec.Result = detail, res, res.String()
}

// roundOutcome is what the round phase returns.
type roundOutcome struct {
	// Ran is true when this pass ran a round.
	Ran bool
	// NextRound is when the next round is due (nil when the round could not run).
	NextRound *time.Time
	// Records are the round's actions (taken, or only recorded in dry-run), in order.
	Records []record
	// ChangedObjects, when known, is the number of objects still carrying this agent's marks.
	ChangedObjects *int32
}

// restoreOutcome is what the restore phase (a paused or deleted agent) returns.
type restoreOutcome struct {
	// Attempted is true when the agent's changed objects were listed and each was tried.
	Attempted bool
	// Records are the restores done, in order.
	Records []record
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
	Spec blackadderv1beta1.ChaosAgentSpec
	// InvalidSpec says why the spec cannot be used (a user's mistake: wait for the next edit).
	InvalidSpec string
	// InvalidReason is the Ready reason of InvalidSpec.
	InvalidReason string
	// Window is where the agent stands against spec.schedule.
	Window windowState
	// Run is the current run after this pass (zero before the first pass of an agent
	// without a recorded run).
	Run blackadderv1beta1.ChaosRun
	// Guards are the verdicts of the guards checked in this pass (none: not checked).
	Guards  []guardVerdict
	Round   roundOutcome
	Restore restoreOutcome
	// Err is why a phase failed (reading the cache, restoring); the pass is retried.
	Err error
}

// records returns the actions and restores of the pass, in order.
func (o outcome) records() []record {
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
func computeStatus(old blackadderv1beta1.ChaosAgentStatus, o outcome) blackadderv1beta1.ChaosAgentStatus {
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
	if n, known := o.changedObjects(); known {
		s.ChangedObjects = n
	}
	s.NextWindowTime = nil
	if o.InvalidSpec == "" && o.Window.Scheduled && !o.Window.Open && o.Window.Change != nil {
		t := apiTime(*o.Window.Change)
		s.NextWindowTime = &t
	}
	if o.InvalidSpec == "" {
		s.Run = nil
		if !equality.Semantic.DeepEqual(o.Run, blackadderv1beta1.ChaosRun{}) {
			s.Run = o.Run.DeepCopy()
		}
	}
	s.Guards = mergeGuardResults(s.Guards, guardResults(o.Guards, o.Now), o.Spec.Guards)
	setConditions(&s, o, records)
	// observedGeneration claims only a spec the pass acted on fully: one that returned no
	// error (docs/STYLE.md, "Status writes and observedGeneration"). An invalid spec, a
	// tripped guard or a failed action is no error of the pass (the conditions and
	// status.lastActions say so); a failed list, round or restore is, and is retried.
	if o.Err == nil {
		s.ObservedGeneration = o.Generation
	}
	return s
}

// mergeGuardResults replaces the results of the guards checked now and drops those of
// guards no longer in spec, in the order of spec.
func mergeGuardResults(previous, checked []blackadderv1beta1.GuardResult, guards []blackadderv1beta1.SteadyStateGuard) []blackadderv1beta1.GuardResult {
	byName := map[string]blackadderv1beta1.GuardResult{}
	for _, r := range previous {
		byName[r.Name] = r
	}
	for _, r := range checked {
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

// newestFirst puts records (oldest first) in front of previous (newest first), at most
// maxLastActions in all.
func newestFirst(records []record, previous []blackadderv1beta1.ChaosAction) []blackadderv1beta1.ChaosAction {
	if len(records) == 0 {
		return previous
	}
	out := make([]blackadderv1beta1.ChaosAction, 0, min(len(records)+len(previous), maxLastActions))
	for i := len(records) - 1; i >= 0 && len(out) < maxLastActions; i-- {
		out = append(out, records[i].ChaosAction)
	}
	for i := 0; i < len(previous) && len(out) < maxLastActions; i++ {
		out = append(out, previous[i])
	}
	return out
}

// setConditions sets Ready, Paused, Degraded, InWindow and GuardTripped. Degraded describes
// the last pass that acted: a pass that neither ran a round nor recorded an action keeps it
// as it was (it is set to False the first time). GuardTripped likewise keeps its last
// check while no guard is checked.
func setConditions(s *blackadderv1beta1.ChaosAgentStatus, o outcome, records []record) {
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: o.Generation, LastTransitionTime: apiTime(o.Now)})
	}
	mode := ""
	if o.Spec.DryRun {
		mode = " (dry run: records what it would do, changes nothing)"
	}
	ended := o.InvalidSpec == "" && o.Run.EndTime != nil
	resume := " Give spec.runName a new value to start a new run."
	switch {
	case o.InvalidSpec != "":
		reason := o.InvalidReason
		if reason == "" {
			reason = blackadderv1beta1.ReasonInvalidSelector
		}
		set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, reason, o.InvalidSpec)
	case o.Spec.Paused:
		set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, blackadderv1beta1.ReasonPausedBySpec, "spec.paused is true: no rounds run")
	case ended:
		set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, runEndConditionReason(o.Run.EndReason), "The run ended: "+o.Run.EndMessage+"."+resume)
	case o.Err != nil:
		set(blackadderv1beta1.ConditionReady, metav1.ConditionFalse, blackadderv1beta1.ReasonRoundFailed, o.Err.Error())
	case o.Window.Scheduled && !o.Window.Open:
		set(blackadderv1beta1.ConditionReady, metav1.ConditionTrue, blackadderv1beta1.ReasonWaitingForWindow, "Outside every window of spec.schedule: "+nextWindowPhrase(o.Window)+mode)
	default:
		set(blackadderv1beta1.ConditionReady, metav1.ConditionTrue, blackadderv1beta1.ReasonRoundsRunning,
			fmt.Sprintf("Runs a round every %ds%s", o.Spec.PauseDuration, mode))
	}
	switch {
	case o.Spec.Paused:
		set(blackadderv1beta1.ConditionPaused, metav1.ConditionTrue, blackadderv1beta1.ReasonPausedBySpec, "spec.paused is true")
	case ended:
		set(blackadderv1beta1.ConditionPaused, metav1.ConditionTrue, runEndConditionReason(o.Run.EndReason), "The agent stopped itself: "+o.Run.EndMessage+"."+resume)
	default:
		set(blackadderv1beta1.ConditionPaused, metav1.ConditionFalse, blackadderv1beta1.ReasonNotPaused, "Rounds run every spec.pauseDuration seconds")
	}
	if o.InvalidSpec == "" {
		setWindowCondition(set, o.Window)
		setGuardCondition(set, s, o)
	}

	failures := 0
	for _, r := range records {
		if r.Outcome.Kind == resultFailed {
			failures++
		}
	}
	switch {
	case o.Restore.Failed > 0:
		set(blackadderv1beta1.ConditionDegraded, metav1.ConditionTrue, blackadderv1beta1.ReasonRestoreFailed,
			fmt.Sprintf("%d changed object(s) could not be put back yet; retrying", o.Restore.Failed))
	case o.Restore.Left > 0:
		set(blackadderv1beta1.ConditionDegraded, metav1.ConditionTrue, blackadderv1beta1.ReasonRestoreSkipped,
			fmt.Sprintf("%d object(s) carrying the agent's marks were left as they are (outside the agent's scope, or immutable); see status.lastActions", o.Restore.Left))
	case failures > 0:
		set(blackadderv1beta1.ConditionDegraded, metav1.ConditionTrue, blackadderv1beta1.ReasonActionsFailed,
			fmt.Sprintf("%d of %d action(s) failed in the last pass; see status.lastActions", failures, len(records)))
	case o.Round.Ran || len(records) > 0 || meta.FindStatusCondition(s.Conditions, blackadderv1beta1.ConditionDegraded) == nil:
		set(blackadderv1beta1.ConditionDegraded, metav1.ConditionFalse, blackadderv1beta1.ReasonNoFailures, "No action failed in the last pass")
	}
}

// setWindowCondition sets InWindow from where the agent stands against its schedule.
func setWindowCondition(set func(string, metav1.ConditionStatus, string, string), w windowState) {
	switch {
	case !w.Scheduled:
		set(blackadderv1beta1.ConditionInWindow, metav1.ConditionTrue, blackadderv1beta1.ReasonNoSchedule, "No spec.schedule: rounds may run at any time")
	case w.Open && w.Change != nil:
		set(blackadderv1beta1.ConditionInWindow, metav1.ConditionTrue, blackadderv1beta1.ReasonInsideWindow, "Inside a window of spec.schedule until "+w.describe(*w.Change))
	case w.Open:
		set(blackadderv1beta1.ConditionInWindow, metav1.ConditionTrue, blackadderv1beta1.ReasonInsideWindow, "Inside a window of spec.schedule")
	default:
		set(blackadderv1beta1.ConditionInWindow, metav1.ConditionFalse, blackadderv1beta1.ReasonOutsideWindow, "Outside every window of spec.schedule: "+nextWindowPhrase(w))
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
// Unknown before the first check of a run.
func setGuardCondition(set func(string, metav1.ConditionStatus, string, string), s *blackadderv1beta1.ChaosAgentStatus, o outcome) {
	if o.Run.EndTime != nil && o.Run.EndReason == blackadderv1beta1.RunEndGuardTripped {
		reason := blackadderv1beta1.ReasonGuardTripped
		if f := firstFailure(o.Guards); f != nil {
			reason = f.Reason
		} else if c := meta.FindStatusCondition(s.Conditions, blackadderv1beta1.ConditionGuardTripped); c != nil && c.Status == metav1.ConditionTrue {
			reason = c.Reason // tripped in an earlier pass
		}
		set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionTrue, reason, o.Run.EndMessage)
		return
	}
	switch {
	case len(o.Spec.Guards) == 0:
		set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionFalse, blackadderv1beta1.ReasonNoGuards, "No spec.guards")
	case len(o.Guards) > 0:
		set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionFalse, blackadderv1beta1.ReasonGuardsPassed,
			fmt.Sprintf("%d guard(s) held at %s", len(o.Guards), o.Now.UTC().Truncate(time.Second).Format(time.RFC3339)))
	default:
		// Not checked in this pass: keep the last check, unless it is a trip of an earlier
		// run or there was none.
		c := meta.FindStatusCondition(s.Conditions, blackadderv1beta1.ConditionGuardTripped)
		if c == nil || c.Status == metav1.ConditionTrue || c.Reason == blackadderv1beta1.ReasonNoGuards {
			set(blackadderv1beta1.ConditionGuardTripped, metav1.ConditionUnknown, blackadderv1beta1.ReasonNotChecked, "The guards are checked before the next round")
		}
	}
}

// runEndConditionReason is the Ready and Paused reason of an ended run.
func runEndConditionReason(r blackadderv1beta1.RunEndReason) string {
	if r == blackadderv1beta1.RunEndDurationElapsed {
		return blackadderv1beta1.ReasonDurationElapsed
	}
	return blackadderv1beta1.ReasonGuardTripped
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
