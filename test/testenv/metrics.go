package testenv

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
