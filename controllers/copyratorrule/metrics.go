package copyratorrule

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
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
)

func init() {
	metrics.Registry.MustRegister(copiesTotal, conflictsGauge, copiesInSyncGauge, lookalikesTotal, sweptTotal)
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
	conflictsGauge.Delete(l)
	copiesInSyncGauge.Delete(l)
}
