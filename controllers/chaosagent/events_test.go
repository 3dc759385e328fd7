package chaosagent

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

func TestEventReasonsAndMetricResults(t *testing.T) {
	for _, tc := range []struct {
		rec    v1beta1.ChaosAction
		reason string
		metric string
	}{
		{rec(v1beta1.ActionKillPod, "", ResultSucceeded, false), "KilledPod", "succeeded"},
		{rec(v1beta1.ActionKillPod, "", ResultDryRun, true), "WouldKillPod", "dry_run"},
		{rec(v1beta1.ActionKillPod, "", skipped(SkipDisruptionBudget), false), "SkippedKillPod", "skipped"},
		{rec(v1beta1.ActionScaleDeployment, "", ResultSucceeded, false), "ScaledDeployment", "succeeded"},
		{rec(v1beta1.ActionScaleDeployment, "", failed("Conflict"), false), "FailedScaleDeployment", "failed"},
		{rec(v1beta1.ActionIpsumConfigMap, "", ResultSucceeded, false), "OverwroteConfigMap", "succeeded"},
		{rec(v1beta1.ActionIpsumConfigMap, "", ResultDryRun, true), "WouldOverwriteConfigMap", "dry_run"},
		{rec(v1beta1.ActionRestoreDeployment, "", ResultSucceeded, false), "RestoredDeployment", "succeeded"},
		{rec(v1beta1.ActionRestoreConfigMap, "", ResultSucceeded, false), "RestoredConfigMap", "succeeded"},
	} {
		assert.Equal(t, tc.reason, eventReason(tc.rec), "%+v", tc.rec)
		assert.Equal(t, tc.metric, metricResult(tc.rec), "%+v", tc.rec)
	}
}
