package testenv

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Series counts the series a collector holds whose labels include every pair in want
// (tests run in parallel, so whole-collector counts would mix their objects).
func Series(c prometheus.Collector, want map[string]string) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for m := range ch {
		var out dto.Metric
		if m.Write(&out) != nil {
			continue
		}
		got := map[string]string{}
		for _, l := range out.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if match {
			n++
		}
	}
	return n
}

// Reconciles is how many passes the named controller has finished in this process
// (controller-runtime's controller_runtime_reconcile_total, all results).
func Reconciles(t require.TestingT, controller string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
