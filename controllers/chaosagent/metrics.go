package chaosagent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quartet-operator/quartet/internal/status"
)

var (
	actionsTotal = status.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_chaosagent_actions_total",
		Help: "Actions of ChaosAgents by agent, action (KillPod, ScaleDeployment, IpsumConfigMap, RestoreDeployment, RestoreConfigMap) and result (succeeded, skipped, failed, dry_run).",
	}, []string{"agent", "action", "result"})
	roundsTotal = status.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_chaosagent_rounds_total",
		Help: "Rounds run by ChaosAgents.",
	}, []string{"agent"})
	runsEnded = status.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_chaosagent_runs_ended_total",
		Help: "Runs of ChaosAgents that ended on their own, by agent and reason (GuardTripped, DurationElapsed).",
	}, []string{"agent", "reason"})
	roundsSkipped = status.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_chaosagent_rounds_skipped_total",
		Help: "Passes of ChaosAgents in which a round came due but did no action, by agent and reason: OutsideWindow (the schedule's window is closed and the next round comes due before it opens; " +
			"counted once per pass, not per pause: outside windows an agent wakes only as the window closes, on a spec edit or a restart), GuardTripped (a guard failed: the run ended instead), " +
			"NoCandidates (nothing the agent's modes may act on: no candidate, fewer candidate pods than podTolerance, no Deployment it can double), NoneChosen (candidates, but chance picked none).",
	}, []string{"agent", "reason"})
	changedObjects = status.Registered.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_chaosagent_changed_objects",
		Help: "Deployments and ConfigMaps a ChaosAgent changed and has not put back yet.",
	}, []string{"agent"})
)

func metricResult(rec record) string {
	if rec.DryRun {
		return "dry_run"
	}
	return [...]string{"succeeded", "dry_run", "skipped", "failed"}[rec.Outcome.Kind]
}

func recordActionMetric(agent string, rec record) {
	actionsTotal.WithLabelValues(agent, string(rec.Kind), metricResult(rec)).Inc()
}

// recordSkip counts a round of agent that came due and did no action, unless reason is "".
func recordSkip(agent, reason string) {
	if reason != "" {
		roundsSkipped.WithLabelValues(agent, reason).Inc()
	}
}

// forgetAgentMetrics drops the series of a deleted agent.
func forgetAgentMetrics(agent string) {
	actionsTotal.DeletePartialMatch(prometheus.Labels{"agent": agent})
	roundsTotal.DeletePartialMatch(prometheus.Labels{"agent": agent})
	runsEnded.DeletePartialMatch(prometheus.Labels{"agent": agent})
	roundsSkipped.DeletePartialMatch(prometheus.Labels{"agent": agent})
	changedObjects.DeletePartialMatch(prometheus.Labels{"agent": agent})
}
