package chaosagent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

func TestEventReasonsAndMetricResults(t *testing.T) {
	for _, tc := range []struct {
		rec       record
		reason    string
		metric    string
		eventType string
	}{
		{rec(blackadderv1beta1.ActionKillPod, "", succeeded, false), "KilledPod", "succeeded", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionKillPod, "", dryRun, true), "WouldKillPod", "dry_run", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionKillPod, "", skipped(SkipDisruptionBudget), false), "SkippedKillPod", "skipped", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionScaleDeployment, "", succeeded, false), "ScaledDeployment", "succeeded", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionScaleDeployment, "", failed("Conflict"), false), "FailedScaleDeployment", "failed", corev1.EventTypeWarning},
		{rec(blackadderv1beta1.ActionIpsumConfigMap, "", succeeded, false), "OverwroteConfigMap", "succeeded", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionIpsumConfigMap, "", dryRun, true), "WouldOverwriteConfigMap", "dry_run", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionRestoreDeployment, "", succeeded, false), "RestoredDeployment", "succeeded", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionRestoreConfigMap, "", succeeded, false), "RestoredConfigMap", "succeeded", corev1.EventTypeNormal},
		{rec(blackadderv1beta1.ActionRestoreConfigMap, "", skipped(SkipImmutable), false), "SkippedRestoreConfigMap", "skipped", corev1.EventTypeWarning},
		{rec(blackadderv1beta1.ActionRestoreDeployment, "", skipped(SkipOutOfScope), false), "SkippedRestoreDeployment", "skipped", corev1.EventTypeWarning},
		{rec(blackadderv1beta1.ActionRestoreDeployment, "", failed("Invalid"), false), "FailedRestoreDeployment", "failed", corev1.EventTypeWarning},
	} {
		assert.Equal(t, tc.reason, eventReason(tc.rec), "%+v", tc.rec)
		assert.Equal(t, tc.metric, metricResult(tc.rec), "%+v", tc.rec)
		assert.Equal(t, tc.eventType, eventType(tc.rec), "%+v", tc.rec)
	}
}

func TestRunEndedEvents(t *testing.T) {
	agent := &blackadderv1beta1.ChaosAgent{}
	agent.Name = "edmund"
	restored := restoreOutcome{Attempted: true, Records: []record{
		rec(blackadderv1beta1.ActionRestoreDeployment, "shop/web", succeeded, false),
		rec(blackadderv1beta1.ActionRestoreConfigMap, "shop/settings", succeeded, false),
		rec(blackadderv1beta1.ActionRestoreConfigMap, "shop/frozen", skipped(SkipImmutable), false),
	}, Left: 1}
	for _, tc := range []struct {
		name    string
		run     blackadderv1beta1.ChaosRun
		restore bool
		out     restoreOutcome
		want    string
	}{
		{"a guard tripped", blackadderv1beta1.ChaosRun{EndReason: blackadderv1beta1.RunEndGuardTripped, EndMessage: `guard "web" tripped: 1 ready`}, true, restored,
			`Warning GuardTripped Stopped: guard "web" tripped: 1 ready; put back 2 changed object(s), 0 not yet, 1 left as they are (see status.lastActions)`},
		{"the duration elapsed", blackadderv1beta1.ChaosRun{EndReason: blackadderv1beta1.RunEndDurationElapsed, EndMessage: "spec.durationSeconds (60s) elapsed"}, true,
			restoreOutcome{Attempted: true}, "Normal DurationElapsed Stopped: spec.durationSeconds (60s) elapsed; put back 0 changed object(s)"},
		{"restore turned off", blackadderv1beta1.ChaosRun{EndReason: blackadderv1beta1.RunEndGuardTripped, EndMessage: "x"}, false, restoreOutcome{},
			"Warning GuardTripped Stopped: x; spec.restoreOnDelete is false: changes left in place"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(1)
			(&Reconciler{Recorder: rec}).recordRunEnded(agent, tc.run, tc.restore, tc.out)
			assert.Equal(t, tc.want, <-rec.Events)
		})
	}
}

func TestRunEndedEventFitsANote(t *testing.T) {
	rec := events.NewFakeRecorder(1)
	run := blackadderv1beta1.ChaosRun{EndReason: blackadderv1beta1.RunEndGuardTripped, EndMessage: truncate("GET http://web/"+strings.Repeat("x", 2000), 1024)}
	(&Reconciler{Recorder: rec}).recordRunEnded(&blackadderv1beta1.ChaosAgent{}, run, true, restoreOutcome{})
	note := strings.TrimPrefix(<-rec.Events, "Warning GuardTripped ")
	assert.LessOrEqual(t, len(note), maxEventNote)
	assert.True(t, strings.HasSuffix(note, "…"))
}
