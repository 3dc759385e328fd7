package exchangerate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quartet-operator/quartet/internal/status"
)

var (
	upstreamRequests = status.Registered.NewCounterVec(prometheus.CounterOpts{
		Name: "quartet_exchangerate_upstream_requests_total",
		Help: "Requests to the exchange rate upstream, by source and result (ok, not_modified, server_error, rejected, timeout, unreachable, malformed).",
	}, []string{"source", "result"})
	fetchDuration = status.Registered.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "quartet_exchangerate_upstream_fetch_duration_seconds",
		Help:    "Time an upstream fetch took, from request to parsed table or failure, by source.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"source"})
	lastSuccess = status.Registered.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_exchangerate_last_successful_fetch_timestamp_seconds",
		Help: "Unix time the source last answered with a usable table (200 or 304), by source.",
	}, []string{"source"})

	// staleGauge mirrors each ExchangeRate's Stale condition: alerts follow the manager's limit.
	staleGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_exchangerate_stale",
		Help: "1 when the ExchangeRate's Stale condition is True (its rate's publication is older than the manager's limit), else 0, by ExchangeRate.",
	}, []string{"exchangerate_namespace", "exchangerate"})
)

// recordFetch counts one upstream request and its latency, and notes when the source last
// gave a usable answer (succeeded; zero after a failure).
func recordFetch(source, result string, elapsed time.Duration, succeeded time.Time) {
	upstreamRequests.WithLabelValues(source, result).Inc()
	fetchDuration.WithLabelValues(source).Observe(elapsed.Seconds())
	if !succeeded.IsZero() {
		lastSuccess.WithLabelValues(source).Set(float64(succeeded.Unix()))
	}
}
