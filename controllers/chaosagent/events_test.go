package chaosagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

func TestEventReasonsAndMetricResults(t *testing.T) {
	for _, tc := range []struct {
		rec       v1beta1.ChaosAction
		reason    string
		metric    string
		eventType string
	}{
		{rec(v1beta1.ActionKillPod, "", ResultSucceeded, false), "KilledPod", "succeeded", corev1.EventTypeNormal},
		{rec(v1beta1.ActionKillPod, "", ResultDryRun, true), "WouldKillPod", "dry_run", corev1.EventTypeNormal},
		{rec(v1beta1.ActionKillPod, "", skipped(SkipDisruptionBudget), false), "SkippedKillPod", "skipped", corev1.EventTypeNormal},
		{rec(v1beta1.ActionScaleDeployment, "", ResultSucceeded, false), "ScaledDeployment", "succeeded", corev1.EventTypeNormal},
		{rec(v1beta1.ActionScaleDeployment, "", failed("Conflict"), false), "FailedScaleDeployment", "failed", corev1.EventTypeWarning},
		{rec(v1beta1.ActionIpsumConfigMap, "", ResultSucceeded, false), "OverwroteConfigMap", "succeeded", corev1.EventTypeNormal},
		{rec(v1beta1.ActionIpsumConfigMap, "", ResultDryRun, true), "WouldOverwriteConfigMap", "dry_run", corev1.EventTypeNormal},
		{rec(v1beta1.ActionRestoreDeployment, "", ResultSucceeded, false), "RestoredDeployment", "succeeded", corev1.EventTypeNormal},
		{rec(v1beta1.ActionRestoreConfigMap, "", ResultSucceeded, false), "RestoredConfigMap", "succeeded", corev1.EventTypeNormal},
		{rec(v1beta1.ActionRestoreConfigMap, "", skipped(SkipImmutable), false), "SkippedRestoreConfigMap", "skipped", corev1.EventTypeWarning},
		{rec(v1beta1.ActionRestoreDeployment, "", skipped(SkipOutOfScope), false), "SkippedRestoreDeployment", "skipped", corev1.EventTypeWarning},
		{rec(v1beta1.ActionRestoreDeployment, "", failed("Invalid"), false), "FailedRestoreDeployment", "failed", corev1.EventTypeWarning},
	} {
		assert.Equal(t, tc.reason, eventReason(tc.rec), "%+v", tc.rec)
		assert.Equal(t, tc.metric, metricResult(tc.rec), "%+v", tc.rec)
		assert.Equal(t, tc.eventType, eventType(tc.rec), "%+v", tc.rec)
	}
}
