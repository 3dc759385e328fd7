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

// pass is what one reconcile of an agent found and did; computeStatus turns it into status.
type pass struct {
	Now        time.Time
	Generation int64
	// Spec is the agent's spec with defaults filled.
	Spec v1beta1.ChaosAgentSpec
	// RoundRan is true when this pass ran a round.
	RoundRan bool
	// NextRound is when the next round is due (nil when paused or stuck on a spec error).
	NextRound *time.Time
	// Records are the actions taken (or recorded in dry-run) and restores, in order.
	Records []v1beta1.ChaosAction
	// ChangedObjects, when known, is the number of objects still carrying this agent's marks.
	ChangedObjects *int32
	// InvalidSpec says why the spec cannot be used (a user's mistake: wait for the next edit).
	InvalidSpec string
	// Err is why a phase failed (reading the cache, restoring); the pass is retried.
	Err error
	// RestoreFailed counts objects a restore could not put back in this pass.
	RestoreFailed int
}

// computeStatus returns old updated with what pass p did. It is pure, so that a status write
// that lost a conflict can apply the same pass again to the newest status.
func computeStatus(old v1beta1.ChaosAgentStatus, p pass) v1beta1.ChaosAgentStatus {
	s := *old.DeepCopy()
	now := apiTime(p.Now)
	if p.RoundRan {
		s.Rounds++
		s.LastRoundTime = &now
	}
	s.NextRoundTime = nil
	if p.NextRound != nil {
		t := apiTime(*p.NextRound)
		s.NextRoundTime = &t
	}
	for _, r := range p.Records {
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
	s.LastActions = newestFirst(p.Records, s.LastActions)
	if p.ChangedObjects != nil {
		s.ChangedObjects = *p.ChangedObjects
	}
	setConditions(&s, p)
	if p.Err == nil {
		s.ObservedGeneration = p.Generation
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

func setConditions(s *v1beta1.ChaosAgentStatus, p pass) {
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: p.Generation, LastTransitionTime: apiTime(p.Now)})
	}
	mode := ""
	if p.Spec.DryRun {
		mode = " (dry run: records what it would do, changes nothing)"
	}
	switch {
	case p.InvalidSpec != "":
		set(ConditionReady, metav1.ConditionFalse, ReasonInvalidSelector, p.InvalidSpec)
	case p.Spec.Paused:
		set(ConditionReady, metav1.ConditionFalse, ReasonPaused, "spec.paused is true: no rounds run")
	case p.Err != nil:
		set(ConditionReady, metav1.ConditionFalse, ReasonRoundFailed, p.Err.Error())
	default:
		set(ConditionReady, metav1.ConditionTrue, ReasonRoundsRunning,
			fmt.Sprintf("Runs a round every %ds%s", p.Spec.PauseDuration, mode))
	}
	if p.Spec.Paused {
		set(ConditionPaused, metav1.ConditionTrue, ReasonPaused, "spec.paused is true")
	} else {
		set(ConditionPaused, metav1.ConditionFalse, ReasonNotPaused, "Rounds run every spec.pauseDuration seconds")
	}

	failedActions := slices.IndexFunc(p.Records, func(r v1beta1.ChaosAction) bool { return isFailed(r.Result) }) >= 0
	switch {
	case p.RestoreFailed > 0:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonRestoreFailed,
			fmt.Sprintf("%d changed object(s) could not be put back yet; retrying", p.RestoreFailed))
	case failedActions:
		n := 0
		for _, r := range p.Records {
			if isFailed(r.Result) {
				n++
			}
		}
		set(ConditionDegraded, metav1.ConditionTrue, ReasonActionsFailed,
			fmt.Sprintf("%d of %d action(s) failed in the last pass; see status.lastActions", n, len(p.Records)))
	case p.RoundRan || len(p.Records) > 0 || meta.FindStatusCondition(s.Conditions, ConditionDegraded) == nil:
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
