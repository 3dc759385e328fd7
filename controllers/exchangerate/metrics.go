package exchangerate

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
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
	divergentGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_exchangerate_divergent",
		Help: "1 when the ExchangeRate's Divergent condition is True (another source's rate differs from the one written beyond spec.divergenceTolerance), else 0, by ExchangeRate.",
	}, []string{"exchangerate_namespace", "exchangerate"})

	// The quote the ExchangeRate's ConfigMap holds, as its status shows it (recordStatus).
	rateGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_exchangerate_rate",
		Help: "Rates the ExchangeRate's ConfigMap holds (status.rates; status.rate for spec.currency): units of currency one unit of spec.base buys, by ExchangeRate and currency.",
	}, []string{"exchangerate_namespace", "exchangerate", "currency"})
	publicationGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_exchangerate_publication_timestamp_seconds",
		Help: "Unix time of the publication date of the ExchangeRate's rate (status.publicationDate, 00:00 UTC), by ExchangeRate.",
	}, []string{"exchangerate_namespace", "exchangerate"})
	sourceInUseGauge = status.Registered.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_exchangerate_source_in_use",
		Help: "1 for the source the ExchangeRate's rate came from (status.source; named as in quartet_exchangerate_upstream_requests_total), one series per ExchangeRate with a rate, by ExchangeRate and source.",
	}, []string{"exchangerate_namespace", "exchangerate", "source"})
)

// recordStatus sets the ExchangeRate's series from its status st and from q, the quote the
// pass wrote or kept in the ConfigMap, which st shows. nil: none this pass (a failing source,
// an unknown currency); the quote series stay, as st's rate does. From q, not st: st's rate
// does not name its currency, which a spec.currency edit may have changed since. A currency
// or source that left loses its series; finding those reads every ExchangeRate's series, so
// only when the keys may have changed since was, the status before the pass: a spec edit
// since (was.observedGeneration behind generation), another source, another currency list.
func recordStatus(xr types.NamespacedName, generation int64, was, st operatorsv1.ExchangeRateStatus, q *Quote) {
	status.SetGauge(staleGauge, meta.IsStatusConditionTrue(st.Conditions, operatorsv1.ConditionStale), xr.Namespace, xr.Name)
	status.SetGauge(divergentGauge, meta.IsStatusConditionTrue(st.Conditions, operatorsv1.ConditionDivergent), xr.Namespace, xr.Name)
	if q == nil {
		return
	}
	object := prometheus.Labels{"exchangerate_namespace": xr.Namespace, "exchangerate": xr.Name}
	rates := map[string]float64{}
	for _, r := range q.list() {
		if v, err := strconv.ParseFloat(r.Rate, 64); err == nil {
			rates[r.Currency] = v
		}
	}
	prune := was.ObservedGeneration != generation || was.Source != q.Source ||
		!slices.EqualFunc(was.Rates, q.Rates, func(a, b operatorsv1.CurrencyRate) bool { return a.Currency == b.Currency })
	status.SetSeries(rateGauge, object, "currency", rates, prune)
	status.SetSeries(sourceInUseGauge, object, "source", map[string]float64{q.Source: 1}, prune)
	if d, err := time.Parse(dateLayout, q.Date); err == nil {
		publicationGauge.With(object).Set(float64(d.Unix()))
	}
}

// forgetMetrics drops the series of an ExchangeRate that is gone.
func forgetMetrics(xr types.NamespacedName) {
	object := prometheus.Labels{"exchangerate_namespace": xr.Namespace, "exchangerate": xr.Name}
	for _, vec := range []*prometheus.GaugeVec{staleGauge, divergentGauge, rateGauge, publicationGauge, sourceInUseGauge} {
		vec.DeletePartialMatch(object)
	}
}

// recordFetch counts one upstream request and its latency, and notes when the source last
// gave a usable answer (succeeded; zero after a failure).
func recordFetch(source, result string, elapsed time.Duration, succeeded time.Time) {
	upstreamRequests.WithLabelValues(source, result).Inc()
	fetchDuration.WithLabelValues(source).Observe(elapsed.Seconds())
	if !succeeded.IsZero() {
		lastSuccess.WithLabelValues(source).Set(float64(succeeded.Unix()))
	}
}
