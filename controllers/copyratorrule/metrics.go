package copyratorrule

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/status"
)

// The actions of quartet_copyrator_copies_total: writeActions and actionFailed.
const actionCreated, actionFailed = "created", "failed"

var (
	copiesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_copyrator_copies_total",
		Help: "Copies written by Copyrator, by rule and action (created, updated, recreated, deleted, released, failed).",
	}, []string{"rule_namespace", "rule", "action"})
	conflictsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_copyrator_conflicts",
		Help: "Target objects a rule leaves alone because it does not own them.",
	}, []string{"rule_namespace", "rule"})
	copiesInSyncGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_copyrator_copies_in_sync",
		Help: "Copies of a rule that equal their source.",
	}, []string{"rule_namespace", "rule"})
	// lookalikesTotal has no rule labels: look-alikes name rules at will.
	lookalikesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_copyrator_lookalikes_total",
		Help: "Events on objects labelled as Copyrator's copies that no existing rule wrote, by namespace of the object; ignored.",
	}, []string{"namespace"})
	sweptTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "quartet_copyrator_orphans_swept_total",
		Help: "Copies deleted because the rule that wrote them is gone (deleted without its finalizer).",
	})
	copiesDesiredGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_copyrator_copies_desired",
		Help: "Copies a rule should hold, which quartet_copyrator_copies_in_sync counts toward: sources matched × target namespaces that consent, less conflicts.",
	}, []string{"rule_namespace", "rule"})
	refusedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_copyrator_refused_namespaces",
		Help: "Namespaces a rule selects that do not consent to its copies (status.refusedCount).",
	}, []string{"rule_namespace", "rule"})
	limitReachedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_copyrator_limit_reached",
		Help: "1 while a limit on copies holds a rule's writes back (Ready's reason LimitReached), else 0.",
	}, []string{"rule_namespace", "rule"})
	// propagationSeconds has no rule labels: one histogram for the whole controller.
	propagationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "quartet_copyrator_propagation_seconds",
		Help: "Time from a source's last change (its newest managedFields time, else its creation) to the end of the write of a copy a rule created, updated or re-created; " +
			"a copy for a new namespace or a new rule measures the source's age.",
		Buckets: []float64{0.5, 1, 2, 5, 10, 30, 60, 300, 1800},
	})
)

func init() {
	metrics.Registry.MustRegister(copiesTotal, conflictsGauge, copiesInSyncGauge, lookalikesTotal, sweptTotal,
		copiesDesiredGauge, refusedGauge, limitReachedGauge, propagationSeconds)
}

// writeActions name the kinds of copy write in quartet_copyrator_copies_total.
var writeActions = map[op]string{opCreate: actionCreated, opUpdate: "updated", opRecreate: "recreated", opDelete: "deleted", opRelease: "released"}

// recordPass counts a pass's writes and sets the rule's gauges from its status st (nil
// after a fresh-only pass, whose counts cover the fresh namespaces alone).
func recordPass(rule types.NamespacedName, o outcome, st *flantv1.CopyratorRuleStatus) {
	for w, keys := range o.Written {
		countCopies(rule, writeActions[w], len(keys))
	}
	countCopies(rule, actionFailed, len(o.WriteErrs))
	if st != nil {
		conflictsGauge.WithLabelValues(rule.Namespace, rule.Name).Set(float64(st.ConflictCount))
		copiesInSyncGauge.WithLabelValues(rule.Namespace, rule.Name).Set(float64(st.CopiesInSync))
		// What Ready's "N of M copies in sync" counts toward (computeStatus: expected).
		copiesDesiredGauge.WithLabelValues(rule.Namespace, rule.Name).Set(float64(st.SourcesMatched*st.TargetNamespaces - st.ConflictCount))
		refusedGauge.WithLabelValues(rule.Namespace, rule.Name).Set(float64(st.RefusedCount))
		ready := meta.FindStatusCondition(st.Conditions, flantv1.ConditionReady)
		status.SetGauge(limitReachedGauge, ready != nil && ready.Reason == flantv1.ReasonLimitReached, rule.Namespace, rule.Name)
	}
}

// observePropagation notes how long after its source's last change the copy of a create,
// update or re-create that res made was written (now, on clk).
func observePropagation(res writeResult, clk clock.PassiveClock) {
	if res.Done && !paced(res.Action.Op) && !res.Action.Source.Changed.IsZero() {
		propagationSeconds.Observe(clk.Since(res.Action.Source.Changed).Seconds())
	}
}

// countCopies adds n to the rule's series of action; n = 0 makes no series.
func countCopies(rule types.NamespacedName, action string, n int) {
	if n > 0 {
		copiesTotal.WithLabelValues(rule.Namespace, rule.Name, action).Add(float64(n))
	}
}

func forgetMetrics(rule types.NamespacedName) {
	l := prometheus.Labels{"rule_namespace": rule.Namespace, "rule": rule.Name}
	copiesTotal.DeletePartialMatch(l)
	for _, g := range []*prometheus.GaugeVec{conflictsGauge, copiesInSyncGauge, copiesDesiredGauge, refusedGauge, limitReachedGauge} {
		g.Delete(l)
	}
}
