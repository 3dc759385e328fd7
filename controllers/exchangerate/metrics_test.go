package exchangerate

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/status"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestStatusSeries: each pass's quote sets the rates by currency (parsed; one that does not
// parse has none), the publication date and the one source in use; a currency or a source
// that left loses its series; a pass without a quote keeps them; Divergent follows its
// condition; everything goes with the ExchangeRate. Series are pruned only when the keys may
// have changed since the status before the pass (was): a spec edit, a source, a currency list.
func TestStatusSeries(t *testing.T) {
	const generation = 2
	key := types.NamespacedName{Namespace: "metrics-test", Name: "eur"}
	object := map[string]string{"exchangerate_namespace": key.Namespace, "exchangerate": key.Name}
	divergent := func(s metav1.ConditionStatus) operatorsv1.ExchangeRateStatus {
		return operatorsv1.ExchangeRateStatus{Conditions: []metav1.Condition{{Type: operatorsv1.ConditionDivergent, Status: s, Reason: "Test"}}}
	}
	acted := func(source string, rates ...operatorsv1.CurrencyRate) operatorsv1.ExchangeRateStatus {
		return operatorsv1.ExchangeRateStatus{ObservedGeneration: generation, Source: source, Rates: rates}
	}
	usd, jpy := operatorsv1.CurrencyRate{Currency: "USD", Rate: "1.17"}, operatorsv1.CurrencyRate{Currency: "JPY", Rate: "160.5"}
	for _, tc := range []struct {
		name      string
		was, st   operatorsv1.ExchangeRateStatus
		q         *Quote
		rates     map[string]float64
		source    string
		published time.Time
		divergent float64
	}{
		{"spec.currency", operatorsv1.ExchangeRateStatus{}, divergent(metav1.ConditionFalse),
			&Quote{Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"},
			map[string]float64{"USD": 1.1625}, "ecb", time.Date(2026, 5, 15, 0, 0, 0, 0, time.UTC), 0},
		{"spec.currencies, failed over, divergent", acted("ecb"), divergent(metav1.ConditionTrue),
			&Quote{Rates: []operatorsv1.CurrencyRate{usd, jpy}, Date: "2026-05-16", Source: "frankfurter-v2:BOC"},
			map[string]float64{"USD": 1.17, "JPY": 160.5}, "frankfurter-v2:BOC", time.Date(2026, 5, 16, 0, 0, 0, 0, time.UTC), 1},
		{"no quote this pass: kept", acted("frankfurter-v2:BOC", usd, jpy), divergent(metav1.ConditionUnknown), nil,
			map[string]float64{"USD": 1.17, "JPY": 160.5}, "frankfurter-v2:BOC", time.Date(2026, 5, 16, 0, 0, 0, 0, time.UTC), 0},
		{"a currency left, one does not parse", acted("frankfurter-v2:BOC", usd, jpy), operatorsv1.ExchangeRateStatus{},
			&Quote{Rates: []operatorsv1.CurrencyRate{{Currency: "GBP", Rate: "0.85"}, {Currency: "CHF", Rate: "n/a"}}, Date: "2026-05-17", Source: "ecb"},
			map[string]float64{"GBP": 0.85}, "ecb", time.Date(2026, 5, 17, 0, 0, 0, 0, time.UTC), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recordStatus(key, generation, tc.was, tc.st, tc.q)
			assert.ElementsMatch(t, slices.Collect(maps.Keys(tc.rates)), status.LabelValues(rateGauge, object, "currency"))
			for currency, v := range tc.rates {
				assert.Equal(t, v, testutil.ToFloat64(rateGauge.WithLabelValues(key.Namespace, key.Name, currency)), currency)
			}
			assert.Equal(t, []string{tc.source}, status.LabelValues(sourceInUseGauge, object, "source"), "one source in use")
			assert.Equal(t, 1.0, testutil.ToFloat64(sourceInUseGauge.WithLabelValues(key.Namespace, key.Name, tc.source)))
			assert.Equal(t, float64(tc.published.Unix()), testutil.ToFloat64(publicationGauge.WithLabelValues(key.Namespace, key.Name)))
			assert.Equal(t, tc.divergent, testutil.ToFloat64(divergentGauge.WithLabelValues(key.Namespace, key.Name)))
		})
	}

	// A steady pass (same generation, source and currencies) sets the values and reads no
	// other series: a series it would have pruned stays; a spec edit prunes it.
	rateGauge.WithLabelValues(key.Namespace, key.Name, "OLD").Set(1)
	single := &Quote{Currency: "GBP", Rate: "0.86", Date: "2026-05-18", Source: "ecb"}
	recordStatus(key, generation, acted("ecb"), acted("ecb"), single)
	assert.ElementsMatch(t, []string{"GBP", "OLD"}, status.LabelValues(rateGauge, object, "currency"), "steady: not pruned")
	assert.Equal(t, 0.86, testutil.ToFloat64(rateGauge.WithLabelValues(key.Namespace, key.Name, "GBP")))
	edited := acted("ecb")
	edited.ObservedGeneration = generation - 1
	recordStatus(key, generation, edited, acted("ecb"), single)
	assert.Equal(t, []string{"GBP"}, status.LabelValues(rateGauge, object, "currency"), "a spec edit: pruned")

	forgetMetrics(key)
	assert.Zero(t, testenv.Series(rateGauge, object)+testenv.Series(sourceInUseGauge, object)+testenv.Series(publicationGauge, object)+
		testenv.Series(divergentGauge, object)+testenv.Series(staleGauge, object), "forgotten with the ExchangeRate")
}
