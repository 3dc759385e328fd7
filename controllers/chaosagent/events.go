package chaosagent

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// actionNames are the words of an action's Events: the reason's verb, present and past
// (KillPod: WouldKillPod, SkippedKillPod, FailedKillPod, KilledPod), the events.k8s.io/v1
// action, and the victim's kind.
var actionNames = map[blackadderv1beta1.ActionKind]struct {
	verb, done, action string
	victim             schema.GroupVersionKind
}{
	blackadderv1beta1.ActionKillPod:           {"KillPod", "KilledPod", "Kill", corev1.SchemeGroupVersion.WithKind("Pod")},
	blackadderv1beta1.ActionScaleDeployment:   {"ScaleDeployment", "ScaledDeployment", "Scale", appsv1.SchemeGroupVersion.WithKind("Deployment")},
	blackadderv1beta1.ActionIpsumConfigMap:    {"OverwriteConfigMap", "OverwroteConfigMap", "Overwrite", corev1.SchemeGroupVersion.WithKind("ConfigMap")},
	blackadderv1beta1.ActionRestoreDeployment: {"RestoreDeployment", "RestoredDeployment", "Restore", appsv1.SchemeGroupVersion.WithKind("Deployment")},
	blackadderv1beta1.ActionRestoreConfigMap:  {"RestoreConfigMap", "RestoredConfigMap", "Restore", corev1.SchemeGroupVersion.WithKind("ConfigMap")},
}

func victimKind(k blackadderv1beta1.ActionKind) string { return actionNames[k].victim.Kind }

// recordEvents writes an Event on the victim of a round's action and one on the agent.
func (r *Reconciler) recordEvents(agent *blackadderv1beta1.ChaosAgent, t Candidate, rec record) {
	victim := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name, UID: t.UID}}
	victim.SetGroupVersionKind(actionNames[rec.Kind].victim)
	r.recordEventsFor(agent, victim, rec)
}

// recordEventsFor writes an Event on victim and one on the agent; a victim outside the agent's
// scope gets none: nothing is written in a namespace the agent may not touch.
func (r *Reconciler) recordEventsFor(agent *blackadderv1beta1.ChaosAgent, victim client.Object, rec record) {
	typ, reason, action := eventType(rec), eventReason(rec), actionNames[rec.Kind].action
	if rec.Outcome != skipped(SkipOutOfScope) {
		r.Recorder.Eventf(victim, agent, typ, reason, action, "ChaosAgent %s: %s (%s)", agent.Name, rec.Detail, rec.Result)
	}
	r.Recorder.Eventf(agent, victim, typ, reason, action, "%s %s: %s (%s)", victimKind(rec.Kind), rec.Target, rec.Detail, rec.Result)
}

// eventType is Warning when an action failed or a restore left an object changed, else Normal.
func eventType(rec record) string {
	restore := rec.Kind == blackadderv1beta1.ActionRestoreDeployment || rec.Kind == blackadderv1beta1.ActionRestoreConfigMap
	if rec.Outcome.Kind == resultFailed || (restore && rec.Outcome.Kind == resultSkipped) {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}

// eventReason is KilledPod, WouldKillPod, SkippedKillPod, FailedKillPod, and so on.
func eventReason(rec record) string {
	n := actionNames[rec.Kind]
	return [...]string{n.done, "Would" + n.verb, "Skipped" + n.verb, "Failed" + n.verb}[rec.Outcome.Kind]
}

// maxEventNote is the longest note events.k8s.io/v1 accepts; a guard's URL alone may be longer.
const maxEventNote = 1024

// recordRunEnded writes GuardTripped (Warning) or DurationElapsed on the agent, with the restore.
func (r *Reconciler) recordRunEnded(agent *blackadderv1beta1.ChaosAgent, run blackadderv1beta1.ChaosRun, restore bool, restored restoreOutcome) {
	typ, reason := corev1.EventTypeNormal, blackadderv1beta1.ReasonDurationElapsed
	if run.EndReason == blackadderv1beta1.RunEndGuardTripped {
		typ, reason = corev1.EventTypeWarning, blackadderv1beta1.ReasonGuardTripped
	}
	note := truncate(fmt.Sprintf("Stopped: %s; %s", run.EndMessage, restorePhrase(restore, restored)), maxEventNote)
	r.Recorder.Eventf(agent, nil, typ, reason, "Stop", "%s", note)
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
