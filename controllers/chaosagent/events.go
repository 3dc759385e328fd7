package chaosagent

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// Event actions (events.k8s.io/v1 action) of an agent's Events. The reasons are built from an
// action's kind and result by eventReason.
const (
	eventActionKill      = "Kill"
	eventActionScale     = "Scale"
	eventActionOverwrite = "Overwrite"
	eventActionRestore   = "Restore"
)

// recordEvents writes an Event on the victim of a round's action and one on the agent.
func (r *Reconciler) recordEvents(agent *blackadderv1beta1.ChaosAgent, t Candidate, rec record) {
	meta := metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name, UID: t.UID}
	var victim client.Object
	switch rec.Kind {
	case blackadderv1beta1.ActionKillPod:
		victim = &corev1.Pod{ObjectMeta: meta}
	case blackadderv1beta1.ActionScaleDeployment:
		victim = &appsv1.Deployment{ObjectMeta: meta}
	default:
		victim = &corev1.ConfigMap{ObjectMeta: meta}
	}
	r.recordEventsFor(agent, victim, rec)
}

// recordEventsFor writes an Event on victim (related: the agent) and one on the agent
// (related: victim). A victim outside the agent's scope gets none: the operator writes nothing
// in a protected, excluded or unwatched namespace.
func (r *Reconciler) recordEventsFor(agent *blackadderv1beta1.ChaosAgent, victim client.Object, rec record) {
	typ, reason, action := eventType(rec), eventReason(rec), eventAction(rec.Kind)
	if rec.Outcome != skipped(SkipOutOfScope) {
		r.Recorder.Eventf(victim, agent, typ, reason, action, "ChaosAgent %s: %s (%s)", agent.Name, rec.Detail, rec.Result)
	}
	r.Recorder.Eventf(agent, victim, typ, reason, action, "%s %s: %s (%s)", victimKind(rec.Kind), rec.Target, rec.Detail, rec.Result)
}

// eventType is Warning when an action failed or a restore left an object changed (a person
// has to look at it), else Normal.
func eventType(rec record) string {
	restore := rec.Kind == blackadderv1beta1.ActionRestoreDeployment || rec.Kind == blackadderv1beta1.ActionRestoreConfigMap
	if rec.Outcome.Kind == resultFailed || (restore && rec.Outcome.Kind == resultSkipped) {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// eventReason is KilledPod, WouldKillPod, SkippedKillPod, FailedKillPod, and so on.
func eventReason(rec record) string {
	verb, done := eventVerb(rec.Kind)
	switch rec.Outcome.Kind {
	case resultDryRun:
		return "Would" + verb
	case resultSkipped:
		return "Skipped" + verb
	case resultFailed:
		return "Failed" + verb
	default:
		return done
	}
}

// eventVerb returns the present and past forms of an action for Event reasons.
func eventVerb(k blackadderv1beta1.ActionKind) (verb, done string) {
	switch k {
	case blackadderv1beta1.ActionKillPod:
		return "KillPod", "KilledPod"
	case blackadderv1beta1.ActionScaleDeployment:
		return "ScaleDeployment", "ScaledDeployment"
	case blackadderv1beta1.ActionIpsumConfigMap:
		return "OverwriteConfigMap", "OverwroteConfigMap"
	case blackadderv1beta1.ActionRestoreDeployment:
		return "RestoreDeployment", "RestoredDeployment"
	default:
		return "RestoreConfigMap", "RestoredConfigMap"
	}
}

func eventAction(k blackadderv1beta1.ActionKind) string {
	switch k {
	case blackadderv1beta1.ActionKillPod:
		return eventActionKill
	case blackadderv1beta1.ActionScaleDeployment:
		return eventActionScale
	case blackadderv1beta1.ActionIpsumConfigMap:
		return eventActionOverwrite
	default:
		return eventActionRestore
	}
}

func victimKind(k blackadderv1beta1.ActionKind) string {
	switch k {
	case blackadderv1beta1.ActionKillPod:
		return "Pod"
	case blackadderv1beta1.ActionScaleDeployment, blackadderv1beta1.ActionRestoreDeployment:
		return "Deployment"
	default:
		return "ConfigMap"
	}
}

// eventActionStop is the action of the Event that says a run ended.
const eventActionStop = "Stop"

// maxEventNote is the longest note events.k8s.io/v1 accepts.
const maxEventNote = 1024

// recordRunEnded writes the Event of an ended run on the agent: GuardTripped (Warning) or
// DurationElapsed (Normal), with what restore put back in the same pass.
func (r *Reconciler) recordRunEnded(agent *blackadderv1beta1.ChaosAgent, run blackadderv1beta1.ChaosRun, restore bool, restored restoreOutcome) {
	typ, reason := corev1.EventTypeNormal, blackadderv1beta1.ReasonDurationElapsed
	if run.EndReason == blackadderv1beta1.RunEndGuardTripped {
		typ, reason = corev1.EventTypeWarning, blackadderv1beta1.ReasonGuardTripped
	}
	// events.k8s.io refuses a note above 1 KiB, and a guard's URL alone may be longer.
	note := truncate(fmt.Sprintf("Stopped: %s; %s", run.EndMessage, restorePhrase(restore, restored)), maxEventNote)
	r.Recorder.Eventf(agent, nil, typ, reason, eventActionStop, "%s", note)
}

// restorePhrase says what the restore of a stop did.
func restorePhrase(restore bool, o restoreOutcome) string {
	if !restore {
		return "spec.restoreOnDelete is false: changes left in place"
	}
	back := 0
	for _, rec := range o.Records {
		if rec.Outcome.Kind == resultSucceeded {
			back++
		}
	}
	phrase := fmt.Sprintf("put back %d changed object(s)", back)
	if o.Failed > 0 || o.Left > 0 {
		phrase += fmt.Sprintf(", %d not yet, %d left as they are (see status.lastActions)", o.Failed, o.Left)
	}
	return phrase
}
