package exchangerate

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/fakeupstream"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestExchangeRateOnCluster runs the integration tests in parallel, each with its own
// namespace, imitation upstream and manager (so request counts and outages stay apart).
func TestExchangeRateOnCluster(t *testing.T) {
	env.Require(t)
	t.Run("parallel", func(t *testing.T) {
		t.Run("SampleCreatesConfigMap", func(t *testing.T) { t.Parallel(); testSample(t) })
		t.Run("CurrencyChangeUpdatesConfigMap", func(t *testing.T) { t.Parallel(); testCurrencyChange(t) })
		t.Run("OutageKeepsLastValueAndRecovers", func(t *testing.T) { t.Parallel(); testOutage(t) })
		t.Run("UnknownCurrencyWaitsForSpecChange", func(t *testing.T) { t.Parallel(); testUnknownCurrency(t) })
		t.Run("OneUpstreamRequestPerRefresh", func(t *testing.T) { t.Parallel(); testOneRequestPerRefresh(t) })
		t.Run("UnchangedRefreshWritesNothing", func(t *testing.T) { t.Parallel(); testUnchangedRefreshWritesNothing(t) })
		t.Run("FrankfurterCrossRate", func(t *testing.T) { t.Parallel(); testFrankfurter(t) })
		t.Run("ForeignConfigMapNotAdopted", func(t *testing.T) { t.Parallel(); testForeignConfigMap(t) })
		t.Run("OldPublicationIsStale", func(t *testing.T) { t.Parallel(); testStale(t) })
		t.Run("ConfigMapOwnedByExchangeRate", func(t *testing.T) { t.Parallel(); testOwnedConfigMap(t) })
		t.Run("UnwatchedNamespaceIgnored", func(t *testing.T) { t.Parallel(); testUnwatchedNamespace(t) })
		t.Run("FailoverBetweenSources", func(t *testing.T) { t.Parallel(); testFailover(t) })
		t.Run("DivergentSources", func(t *testing.T) { t.Parallel(); testDivergent(t) })
		t.Run("OneRequestPerSourcePerRefresh", func(t *testing.T) { t.Parallel(); testOneRequestPerSource(t) })
		t.Run("SeveralCurrenciesFromFrankfurterV2", func(t *testing.T) { t.Parallel(); testSeveralCurrencies(t) })
		t.Run("SourceLimit", func(t *testing.T) { t.Parallel(); testSourceLimit(t) })
		t.Run("SourcesSample", func(t *testing.T) { t.Parallel(); testSourcesSample(t) })
		t.Run("ObservedGenerationOnFailedPass", func(t *testing.T) { t.Parallel(); testObservedGenerationOnFailure(t) })
		t.Run("RestartNeverStepsBack", func(t *testing.T) { t.Parallel(); testRestartNeverStepsBack(t) })
	})
}

func startFakeToday(t testing.TB) *fakeupstream.Server {
	t.Helper()
	srv, err := fakeupstream.Start("127.0.0.1:0", today(), fakeupstream.DefaultRates())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// testSample applies config/samples/operators_v1_exchangerate.yaml (the original
// operator's exchangerate.yml, unchanged) and checks the ConfigMap, the status, the
// event, and that a hand edit of the ConfigMap is put back.
func testSample(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-sample", nil)
	srv := startFakeToday(t)
	startManager(t, quickOptions(srv, time.Hour), ns)

	b, err := os.ReadFile("../../config/samples/operators_v1_exchangerate.yaml")
	require.NoError(t, err)
	xr := &operatorsv1.ExchangeRate{}
	require.NoError(t, yaml.UnmarshalStrict(b, xr))
	xr.Namespace = ns
	require.NoError(t, env.Client.Create(ctx, xr))

	cm := waitConfigMap(t, ns, "exchange-rate-usd", map[string]string{
		"rate": "1.1625", "base": "EUR", "currency": "USD", "date": today(), "source": "ecb"})
	assert.Len(t, cm.Data, 5)
	assert.Equal(t, "quartet-exchangerate", cm.Labels["app.kubernetes.io/managed-by"])
	ref := metav1.GetControllerOf(cm)
	require.NotNil(t, ref, "controller reference")
	assert.Equal(t, xr.UID, ref.UID)
	assert.Equal(t, "ExchangeRate", ref.Kind)

	got := waitCondition(t, ns, xr.Name, operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	assert.Equal(t, got.Generation, got.Status.ObservedGeneration)
	assert.Equal(t, "1.1625", got.Status.Rate)
	assert.Equal(t, today(), got.Status.PublicationDate)
	assert.Equal(t, "ecb", got.Status.Source)
	assert.Equal(t, "exchange-rate-usd", got.Status.ConfigMapName)
	require.NotNil(t, got.Status.LastSuccessfulFetch)
	assert.WithinDuration(t, time.Now(), got.Status.LastSuccessfulFetch.Time, time.Minute)
	assert.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, operatorsv1.ConditionDegraded))
	assert.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, operatorsv1.ConditionStale))
	assert.Equal(t, operatorsv1.ReasonSingleSource, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDivergent).Reason, "one source: nothing to cross-check")
	require.Equal(t, 1, testenv.Series(staleGauge, map[string]string{"exchangerate_namespace": ns, "exchangerate": xr.Name}),
		"quartet_exchangerate_stale series")
	assert.Equal(t, 0.0, testutil.ToFloat64(staleGauge.WithLabelValues(ns, xr.Name)), "quartet_exchangerate_stale")
	assert.Equal(t, 1.1625, testutil.ToFloat64(rateGauge.WithLabelValues(ns, xr.Name, "USD")), "quartet_exchangerate_rate")
	assert.Equal(t, 1.0, testutil.ToFloat64(sourceInUseGauge.WithLabelValues(ns, xr.Name, "ecb")), "quartet_exchangerate_source_in_use")
	eventuallyEvent(t, ns, xr.Name, EventConfigMapCreated)

	t.Log("a hand edit of the ConfigMap is put back, without asking the upstream again")
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Data["rate"] = "42"
	require.NoError(t, env.Client.Patch(ctx, cm, patch))
	waitConfigMap(t, ns, "exchange-rate-usd", map[string]string{"rate": "1.1625"})
	assert.Equal(t, 1, srv.Requests(fakeupstream.ECBPath))
}

func testCurrencyChange(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-change", nil)
	srv := startFakeToday(t)
	startManager(t, quickOptions(srv, time.Hour), ns)

	xr := newXR(ns, "price", "USD", "")
	require.NoError(t, env.Client.Create(ctx, xr))
	waitConfigMap(t, ns, "price", map[string]string{"rate": "1.1625", "currency": "USD", "base": "EUR"})

	patch := client.MergeFrom(xr.DeepCopy())
	xr.Spec.Currency, xr.Spec.Base = "JPY", "USD"
	require.NoError(t, env.Client.Patch(ctx, xr, patch))
	// 171.58 / 1.1625 = 147.5956…, rounded to six significant digits.
	waitConfigMap(t, ns, "price", map[string]string{"rate": "147.596", "currency": "JPY", "base": "USD"})
	got := waitCondition(t, ns, "price", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	assert.Equal(t, int64(2), got.Status.ObservedGeneration)
	assert.Equal(t, "147.596", got.Status.Rate)
	eventuallyEvent(t, ns, "price", EventConfigMapUpdated)
	assert.Equal(t, 1, srv.Requests(fakeupstream.ECBPath), "the spec change reused the shared table")
}

func testOutage(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-outage", nil)
	srv := startFakeToday(t)
	startManager(t, quickOptions(srv, 2*time.Second), ns)

	require.NoError(t, env.Client.Create(ctx, newXR(ns, "usd", "USD", "")))
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1625"})
	waitCondition(t, ns, "usd", operatorsv1.ConditionDegraded, metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded)

	for _, f := range []struct {
		failure fakeupstream.Failure
		reason  string
	}{
		{fakeupstream.ServerError, operatorsv1.ReasonUpstreamServerError},
		{fakeupstream.Garbage, operatorsv1.ReasonUpstreamMalformed},
		{fakeupstream.Truncated, operatorsv1.ReasonUpstreamUnreachable},
	} {
		srv.Fail(f.failure, 0)
		got := waitCondition(t, ns, "usd", operatorsv1.ConditionDegraded, metav1.ConditionTrue, f.reason)
		assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, operatorsv1.ConditionReady), "the last good rate is still served")
		assert.Equal(t, "1.1625", got.Status.Rate)
		cm := waitConfigMap(t, ns, "usd", nil)
		assert.Equal(t, "1.1625", cm.Data["rate"], "a failure never replaces the good value")
	}

	t.Log("backoff: during 3 s of outage the upstream sees a handful of requests, not a stream")
	before := srv.Requests("")
	time.Sleep(3 * time.Second)
	during := srv.Requests("") - before
	// Backoff 200ms doubling to a 1s cap: at most ~5 attempts in 3 s (+1 for jitter).
	assert.LessOrEqual(t, during, 6)
	assert.GreaterOrEqual(t, during, 1, "it keeps retrying")
	eventuallyEvent(t, ns, "usd", EventFetchFailed)

	t.Log("recovery with a new publication clears Degraded and writes the new rate")
	// The new publication first, then the healing: a fetch between the two would clear
	// Degraded with the old rate, and Degraded=False and Ready=True would then be true
	// before the new rate's status write.
	rates := fakeupstream.DefaultRates()
	rates["USD"] = "1.1702"
	srv.SetRates(today(), rates)
	srv.Heal()
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1702"})
	// The status is written after the ConfigMap: wait for the new rate in it.
	got := waitStatus(t, ns, "usd", func(c *assert.CollectT, xr *operatorsv1.ExchangeRate) {
		assert.Equal(c, "1.1702", xr.Status.Rate)
	})
	assert.Equal(t, operatorsv1.ReasonFetchSucceeded, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDegraded).Reason)
	assert.True(t, meta.IsStatusConditionFalse(got.Status.Conditions, operatorsv1.ConditionDegraded))
	assert.Equal(t, operatorsv1.ReasonRateWritten, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady).Reason)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, operatorsv1.ConditionReady))
}

func testUnknownCurrency(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-unknown", nil)
	srv := startFakeToday(t)
	// A 1 s refresh: if the controller requeued the mistake, the upstream would hear about it.
	startManager(t, quickOptions(srv, time.Second), ns)

	xr := newXR(ns, "bitcoin", "XBT", "")
	require.NoError(t, env.Client.Create(ctx, xr))
	got := waitCondition(t, ns, "bitcoin", operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonUnknownCurrency)
	assert.Contains(t, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady).Message, "ecb does not publish a rate for XBT")
	assert.Equal(t, got.Generation, got.Status.ObservedGeneration)
	assert.Empty(t, got.Status.Rate)
	assert.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bitcoin"}, &corev1.ConfigMap{})))
	eventuallyEvent(t, ns, "bitcoin", EventUnknownCurrency)

	t.Log("no hot loop: for 3 s neither the status nor the upstream hears from the controller")
	requests, rv := srv.Requests(""), got.ResourceVersion
	time.Sleep(3 * time.Second)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), got))
	assert.Equal(t, rv, got.ResourceVersion)
	assert.Equal(t, requests, srv.Requests(""))

	t.Log("the next edit fixes it")
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Currency = "GBP"
	require.NoError(t, env.Client.Patch(ctx, got, patch))
	waitConfigMap(t, ns, "bitcoin", map[string]string{"rate": "0.86485", "currency": "GBP"})
	waitCondition(t, ns, "bitcoin", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
}

// testOneRequestPerRefresh prices 30 currencies (one of them EUR itself, in USD) and
// checks that filling them, and refreshing them all, costs one upstream request each.
func testOneRequestPerRefresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-shared", nil)
	srv := startFakeToday(t)
	const refresh = 3 * time.Second
	startManager(t, quickOptions(srv, refresh), ns)

	rates := fakeupstream.DefaultRates()
	want := map[string]string{}
	start := time.Now()
	for c, r := range rates {
		want[c] = r
		require.NoError(t, env.Client.Create(ctx, newXR(ns, "eur-"+lower(c), c, "")))
	}
	require.NoError(t, env.Client.Create(ctx, newXR(ns, "usd-eur", "EUR", "USD")))
	require.Len(t, want, 29)
	for c, r := range want {
		waitConfigMap(t, ns, "eur-"+lower(c), map[string]string{"rate": exactDecimalString(t, r)})
	}
	waitConfigMap(t, ns, "usd-eur", map[string]string{"rate": "0.860215"})
	requirePerRefresh(t, srv.Requests(""), refresh, time.Since(start), "filling 30 ExchangeRates")

	t.Log("a new publication reaches all 30 at the next refresh with one more request")
	srv.ResetCounts()
	rates["USD"], rates["GBP"] = "1.2000", "0.90000"
	start = time.Now()
	srv.SetRates(today(), rates)
	waitConfigMap(t, ns, "eur-usd", map[string]string{"rate": "1.2"})
	waitConfigMap(t, ns, "eur-gbp", map[string]string{"rate": "0.9"})
	waitConfigMap(t, ns, "usd-eur", map[string]string{"rate": "0.833333"})
	requirePerRefresh(t, srv.Requests(""), refresh, time.Since(start), "the refresh of all 30")
}

// requirePerRefresh checks that requests were made per refresh, not per ExchangeRate:
// exactly one when the work took less than a refresh interval, as it does on a machine with
// time to spare, and one more for each further refresh that came while a loaded machine was
// still at it (a refresh comes every interval however many ExchangeRates there are).
func requirePerRefresh(t *testing.T, requests int, refresh, took time.Duration, what string) {
	t.Helper()
	most := 1 + int(took/refresh)
	t.Logf("%s: %d upstream requests in %s (refresh %s: at most %d)", what, requests, took.Round(time.Millisecond), refresh, most)
	assert.GreaterOrEqual(t, requests, 1, what)
	assert.LessOrEqual(t, requests, most, "%s: one upstream request per refresh, not one per ExchangeRate", what)
}

// testUnchangedRefreshWritesNothing: refreshes that bring no new data (304s, and the 200
// a restarted manager gets for the same publication) write neither the ExchangeRate nor
// its ConfigMap; a new rate writes both.
func testUnchangedRefreshWritesNothing(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-quiet", nil)
	srv := startFakeToday(t)
	opts := quickOptions(srv, time.Second) // one CR: each refresh is its own reconcile's fetch
	stop := testenv.StartManager(t, env.Config, scope.Namespaces{Watched: []string{ns}}, setupQuick(opts))

	require.NoError(t, env.Client.Create(ctx, newXR(ns, "usd", "USD", "")))
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1625"})
	xr := waitCondition(t, ns, "usd", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "usd"}, cm))
	require.NotNil(t, xr.Status.LastSuccessfulFetch)
	fetched := xr.Status.LastSuccessfulFetch.Time

	// unchanged waits until the upstream has seen `more` further requests. With one
	// ExchangeRate every request is made by its own pass, and passes of one object never
	// overlap: when request k+1 arrives, the pass that made request k has finished.
	unchanged := func(more int) {
		t.Helper()
		requests, notModified := srv.Requests(""), srv.NotModified()
		require.Eventually(t, func() bool { return srv.Requests("") >= requests+more }, 60*time.Second, 50*time.Millisecond,
			"%d more refreshes", more)
		assert.GreaterOrEqual(t, srv.NotModified(), notModified+more-1, "the refreshes were answered 304")
		got := &operatorsv1.ExchangeRate{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), got))
		assert.Equal(t, xr.ResourceVersion, got.ResourceVersion, "ExchangeRate written by a refresh without new data: %+v", got.Status)
		gotCM := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cm), gotCM))
		assert.Equal(t, cm.ResourceVersion, gotCM.ResourceVersion, "ConfigMap written by a refresh without new data")
	}

	t.Log("304s: two complete refresh passes (the third request proves the second pass done) write nothing")
	unchanged(3)

	t.Log("a restarted manager fetches the same publication (200, no validators yet) and writes nothing")
	stop()
	requests := srv.Requests("")
	testenv.StartManager(t, env.Config, scope.Namespaces{Watched: []string{ns}}, setupQuick(opts))
	require.Eventually(t, func() bool { return srv.Requests("") > requests }, 60*time.Second, 50*time.Millisecond, "the new manager's first fetch")
	unchanged(2)

	t.Log("a new rate writes both, and lastSuccessfulFetch moves with it")
	rates := fakeupstream.DefaultRates()
	rates["USD"] = "1.1702"
	srv.SetRates(today(), rates)
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1702"})
	got := &operatorsv1.ExchangeRate{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), got))
		assert.Equal(c, "1.1702", got.Status.Rate)
	}, 60*time.Second, 100*time.Millisecond)
	assert.NotEqual(t, xr.ResourceVersion, got.ResourceVersion)
	gotCM := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cm), gotCM))
	assert.NotEqual(t, cm.ResourceVersion, gotCM.ResourceVersion)
	require.NotNil(t, got.Status.LastSuccessfulFetch)
	assert.True(t, got.Status.LastSuccessfulFetch.After(fetched), "lastSuccessfulFetch %s, was %s", got.Status.LastSuccessfulFetch, fetched)
	assert.Contains(t, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady).Message, "1.1702")

	t.Log("the new publication sent no Event; an edit by someone else, undone, sends one")
	edited := gotCM.DeepCopy()
	edited.Data[KeyRate] = "42"
	require.NoError(t, env.Client.Patch(ctx, edited, client.MergeFrom(gotCM)))
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1702"})
	// The repair's Event is the sync point: an Event of the refresh would have been handed to
	// the recorder before the status write waited for above, so before the edit and the
	// repair (with the old behaviour this fails: two ConfigMapUpdated, about 20 ms apart).
	var updates []eventsv1.Event
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		updates = nil
		for _, e := range testenv.Events(c, env.Client, ns, "ExchangeRate", "usd") {
			if e.Reason == EventConfigMapUpdated {
				updates = append(updates, e)
			}
		}
		assert.NotEmpty(c, updates)
	}, 30*time.Second, 200*time.Millisecond)
	require.Len(t, updates, 1, "one ConfigMapUpdated: the repair, not the new publication")
	assert.Contains(t, updates[0].Note, "1.1702")
	assert.Equal(t, []string{EventConfigMapCreated, EventConfigMapUpdated}, testenv.EventReasons(t, env.Client, ns, "ExchangeRate", "usd"))
}

func lower(s string) string {
	b := []byte(s)
	for i := range b {
		b[i] |= 0x20
	}
	return string(b)
}

func exactDecimalString(t testing.TB, s string) string {
	t.Helper()
	r, err := parseRate(s)
	require.NoError(t, err)
	return exactDecimal(r)
}

func testFrankfurter(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-frankfurter", nil)
	srv := startFakeToday(t)
	opts := quickOptions(srv, time.Hour)
	opts.Source = SourceFrankfurter
	startManager(t, opts, ns)

	require.NoError(t, env.Client.Create(ctx, newXR(ns, "yen-per-dollar", "JPY", "USD")))
	waitConfigMap(t, ns, "yen-per-dollar", map[string]string{"rate": "147.596", "base": "USD", "currency": "JPY", "source": "frankfurter"})
	assert.Equal(t, 1, srv.Requests(fakeupstream.FrankfurterPath))
	assert.Equal(t, 0, srv.Requests(fakeupstream.ECBPath))
}

func testForeignConfigMap(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-foreign", nil)
	srv := startFakeToday(t)
	startManager(t, quickOptions(srv, 2*time.Second), ns)

	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "usd"}, Data: map[string]string{"rate": "mine"}}
	require.NoError(t, env.Client.Create(ctx, mine))
	require.NoError(t, env.Client.Create(ctx, newXR(ns, "usd", "USD", "")))
	waitCondition(t, ns, "usd", operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonConfigMapConflict)
	got := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(mine), got))
	assert.Equal(t, map[string]string{"rate": "mine"}, got.Data, "someone else's ConfigMap is left alone")
	assert.Empty(t, got.OwnerReferences)
	eventuallyEvent(t, ns, "usd", EventConfigMapConflict)

	t.Log("once the owner removes it, the ExchangeRate writes its own at the next refresh")
	require.NoError(t, env.Client.Delete(ctx, mine))
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1625"})
	waitCondition(t, ns, "usd", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
}

// testOwnedConfigMap: the ConfigMap carries a controller reference to its ExchangeRate
// (apiVersion, kind, name, UID; blockOwnerDeletion), which is what the garbage collector
// deletes it by when the ExchangeRate goes; deleting the ExchangeRate drops its
// quartet_exchangerate_stale series. As the kubebuilder book advises, this tests the owner
// reference, not the collector: envtest runs none, so the ConfigMap stays here. No other test
// watches a collector delete an ExchangeRate's ConfigMap either: test/process, test/e2e and
// test/olm delete ExchangeRates only to clean up, and wait for the ExchangeRate alone.
func testOwnedConfigMap(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-delete", nil)
	srv := startFakeToday(t)
	startManager(t, quickOptions(srv, time.Hour), ns)

	xr := newXR(ns, "gone", "CHF", "")
	require.NoError(t, env.Client.Create(ctx, xr))
	cm := waitConfigMap(t, ns, "gone", map[string]string{"rate": "0.9343"})
	require.NotEmpty(t, xr.UID)
	assert.Equal(t, []metav1.OwnerReference{{
		APIVersion: operatorsv1.GroupVersion.String(), Kind: "ExchangeRate", Name: xr.Name, UID: xr.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}, cm.OwnerReferences, "the ConfigMap's only owner reference: the garbage collector deletes it with its ExchangeRate")
	// The series is set in the pass's status step, after the ConfigMap write: wait for the status.
	waitCondition(t, ns, "gone", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	series := map[string]string{"exchangerate_namespace": ns, "exchangerate": "gone"}
	assert.Equal(t, 1, testenv.Series(staleGauge, series), "quartet_exchangerate_stale series")
	assert.Equal(t, 1, testenv.Series(rateGauge, series), "quartet_exchangerate_rate series")
	require.NoError(t, env.Client.Delete(ctx, xr))
	require.Eventually(t, func() bool { return testenv.Series(staleGauge, series) == 0 }, 30*time.Second, 200*time.Millisecond,
		"the deleted ExchangeRate's quartet_exchangerate_stale series dropped")
	assert.Zero(t, testenv.Series(rateGauge, series)+testenv.Series(sourceInUseGauge, series)+testenv.Series(publicationGauge, series),
		"and its rate series")
}

// testStale: a publication older than StaleAfterDays (5) turns the ExchangeRate Stale and
// its quartet_exchangerate_stale series to 1, which the QuartetExchangeRateStale alert selects.
func testStale(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-stale", nil)
	srv, err := fakeupstream.Start("127.0.0.1:0", time.Now().UTC().AddDate(0, 0, -10).Format(dateLayout), fakeupstream.DefaultRates())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	startManager(t, quickOptions(srv, time.Hour), ns)

	xr := newXR(ns, "old", "USD", "")
	require.NoError(t, env.Client.Create(ctx, xr))
	got := waitCondition(t, ns, xr.Name, operatorsv1.ConditionStale, metav1.ConditionTrue, operatorsv1.ReasonPublicationOld)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, operatorsv1.ConditionReady), "a stale rate is still written")
	require.Equal(t, 1, testenv.Series(staleGauge, map[string]string{"exchangerate_namespace": ns, "exchangerate": xr.Name}))
	assert.Equal(t, 1.0, testutil.ToFloat64(staleGauge.WithLabelValues(ns, xr.Name)), "quartet_exchangerate_stale")
}

func testUnwatchedNamespace(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	watched := testenv.Namespace(t, env.Client, "xr-watched", nil)
	other := testenv.Namespace(t, env.Client, "xr-other", nil)
	srv := startFakeToday(t)
	// WATCH_NAMESPACE names one: the manager's caches hold only that one (the manager's
	// options, scope.NewCache), so the ExchangeRate of the other never reaches the controller.
	startManager(t, quickOptions(srv, time.Hour), watched)

	require.NoError(t, env.Client.Create(ctx, newXR(other, "usd", "USD", "")))
	require.NoError(t, env.Client.Create(ctx, newXR(watched, "usd", "USD", "")))
	waitConfigMap(t, watched, "usd", map[string]string{"rate": "1.1625"})
	time.Sleep(time.Second)
	assert.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: other, Name: "usd"}, &corev1.ConfigMap{})))
	xr := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: other, Name: "usd"}, xr))
	assert.Empty(t, xr.Status.Conditions, "no status written outside the watched namespaces")
}

// twoSources are the spec.sources of the multi-source tests: the ECB first, Frankfurter v2's
// blend second.
var twoSources = []operatorsv1.ExchangeRateSource{{Type: operatorsv1.SourceTypeECB}, {Type: operatorsv1.SourceTypeFrankfurterV2}}

// twoUpstreams starts an imitation ECB and an imitation Frankfurter and a manager that
// fetches each from its own.
func twoUpstreams(t *testing.T, ns string, refresh time.Duration) (ecb, frankfurter *fakeupstream.Server) {
	t.Helper()
	ecb, frankfurter = startFakeToday(t), startFakeToday(t)
	opts := quickOptions(ecb, refresh)
	opts.FrankfurterURL = frankfurter.URL()
	startManager(t, opts, ns)
	return ecb, frankfurter
}

// testFailover: the rate is the first source's while it answers, the second's while the
// first fails (Degraded says so, the ConfigMap and the status name the source), and the
// first's again once it is back.
func testFailover(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-failover", nil)
	ecb, frankfurter := twoUpstreams(t, ns, 2*time.Second)
	rates := fakeupstream.DefaultRates()
	rates["USD"] = "1.1631" // the blend differs a little from the ECB's fixing
	frankfurter.SetRates(today(), rates)

	xr := newXR(ns, "usd", "USD", "")
	xr.Spec.Sources = twoSources
	require.NoError(t, env.Client.Create(ctx, xr))
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1625", "source": "ecb"})
	got := waitCondition(t, ns, "usd", operatorsv1.ConditionDivergent, metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree)
	assert.Equal(t, "ecb", got.Status.Source)
	assert.Equal(t, "frankfurter-v2 agrees with ecb within 1%", testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDivergent).Message)

	t.Log("the ECB fails: the rate is Frankfurter's at the next refresh")
	ecb.Fail(fakeupstream.ServerError, 0)
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1631", "source": "frankfurter-v2"})
	got = waitCondition(t, ns, "usd", operatorsv1.ConditionDegraded, metav1.ConditionTrue, operatorsv1.ReasonUpstreamServerError)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, operatorsv1.ConditionReady))
	assert.Contains(t, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDegraded).Message, "the rate is frankfurter-v2's")
	assert.Equal(t, operatorsv1.ReasonNotCompared, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDivergent).Reason)
	eventuallyEvent(t, ns, "usd", EventFetchFailed)
	eventuallyEvent(t, ns, "usd", EventConfigMapUpdated)

	t.Log("the ECB is back: its rate again")
	ecb.Heal()
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1625", "source": "ecb"})
	got = waitCondition(t, ns, "usd", operatorsv1.ConditionDegraded, metav1.ConditionFalse, operatorsv1.ReasonFetchSucceeded)
	assert.Equal(t, "ecb", got.Status.Source)
}

// testDivergent: a second source that disagrees beyond the tolerance turns Divergent True
// with an Event, and the rate stays the first source's.
func testDivergent(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-divergent", nil)
	_, frankfurter := twoUpstreams(t, ns, 2*time.Second)
	rates := fakeupstream.DefaultRates()
	rates["GBP"] = "0.90" // 4.1 % above the ECB's 0.86485
	frankfurter.SetRates(today(), rates)

	xr := newXR(ns, "pound", "GBP", "")
	xr.Spec.Sources, xr.Spec.DivergenceTolerance = twoSources, "2%"
	require.NoError(t, env.Client.Create(ctx, xr))
	got := waitCondition(t, ns, "pound", operatorsv1.ConditionDivergent, metav1.ConditionTrue, operatorsv1.ReasonSourcesDisagree)
	assert.Equal(t, "frankfurter-v2 says GBP 0.9 (published "+today()+"), 4.06% from ecb's 0.86485 (published "+today()+"); the tolerance is 2%",
		testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDivergent).Message)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, operatorsv1.ConditionReady), "a divergence is a warning, the rate is written")
	waitConfigMap(t, ns, "pound", map[string]string{"rate": "0.86485", "source": "ecb"})
	eventuallyEvent(t, ns, "pound", EventSourcesDivergent)

	t.Log("a wider tolerance, and they agree")
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.DivergenceTolerance = "5%"
	require.NoError(t, env.Client.Patch(ctx, got, patch))
	waitCondition(t, ns, "pound", operatorsv1.ConditionDivergent, metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree)
}

// testOneRequestPerSource: 30 ExchangeRates on two sources cost one request per source to
// fill, and one per source for a refresh that brings a new publication.
func testOneRequestPerSource(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-persource", nil)
	srv := startFakeToday(t) // both sources from one imitation, counted by path
	const refresh = 3 * time.Second
	startManager(t, quickOptions(srv, refresh), ns)

	rates := fakeupstream.DefaultRates()
	start := time.Now()
	for c := range rates {
		xr := newXR(ns, "eur-"+lower(c), c, "")
		xr.Spec.Sources = twoSources
		require.NoError(t, env.Client.Create(ctx, xr))
	}
	xr := newXR(ns, "usd-eur", "EUR", "USD")
	xr.Spec.Sources = twoSources
	require.NoError(t, env.Client.Create(ctx, xr))
	for c, r := range rates {
		waitConfigMap(t, ns, "eur-"+lower(c), map[string]string{"rate": exactDecimalString(t, r), "source": "ecb"})
	}
	waitConfigMap(t, ns, "usd-eur", map[string]string{"rate": "0.860215"})
	took := time.Since(start)
	requirePerRefresh(t, srv.Requests(fakeupstream.ECBPath), refresh, took, "filling 30 ExchangeRates from the ECB")
	requirePerRefresh(t, srv.Requests(fakeupstream.FrankfurterV2Path), refresh, took, "filling 30 ExchangeRates from Frankfurter")

	t.Log("a new publication reaches all 30 at the next refresh with one more request per source")
	srv.ResetCounts()
	rates["USD"] = "1.2000"
	start = time.Now()
	srv.SetRates(today(), rates)
	waitConfigMap(t, ns, "eur-usd", map[string]string{"rate": "1.2"})
	waitConfigMap(t, ns, "usd-eur", map[string]string{"rate": "0.833333"})
	took = time.Since(start)
	requirePerRefresh(t, srv.Requests(fakeupstream.ECBPath), refresh, took, "the ECB refresh of all 30")
	requirePerRefresh(t, srv.Requests(fakeupstream.FrankfurterV2Path), refresh, took, "the Frankfurter refresh of all 30")
}

// testSeveralCurrencies: spec.currencies from one Frankfurter v2 provider fills one key per
// currency; an unknown provider says so in Degraded.
func testSeveralCurrencies(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-several", nil)
	srv := startFakeToday(t)
	startManager(t, quickOptions(srv, time.Hour), ns)

	xr := &operatorsv1.ExchangeRate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "basket"},
		Spec: operatorsv1.ExchangeRateSpec{Currencies: []string{"USD", "GBP", "EUR"}, Base: "CHF",
			Sources: []operatorsv1.ExchangeRateSource{{Type: operatorsv1.SourceTypeFrankfurterV2, Provider: "ECB"}}},
	}
	require.NoError(t, env.Client.Create(ctx, xr))
	cm := waitConfigMap(t, ns, "basket", map[string]string{"USD": "1.24425", "GBP": "0.925666", "EUR": "1.07032", "base": "CHF",
		"date": today(), "source": "frankfurter-v2:ECB"})
	assert.Len(t, cm.Data, 6, "three currencies, base, date and source")
	got := waitCondition(t, ns, "basket", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	assert.Equal(t, []operatorsv1.CurrencyRate{{Currency: "USD", Rate: "1.24425"}, {Currency: "GBP", Rate: "0.925666"},
		{Currency: "EUR", Rate: "1.07032"}}, got.Status.Rates)
	assert.Empty(t, got.Status.Rate)
	assert.Equal(t, "frankfurter-v2:ECB", got.Status.Source)
	assert.Equal(t, 1, srv.Requests(fakeupstream.FrankfurterV2Path))

	t.Log("a provider Frankfurter does not know: an empty answer, Degraded says which provider")
	bad := newXR(ns, "nowhere", "USD", "")
	bad.Spec.Sources = []operatorsv1.ExchangeRateSource{{Type: operatorsv1.SourceTypeFrankfurterV2, Provider: "XYZ"}}
	require.NoError(t, env.Client.Create(ctx, bad))
	got = waitCondition(t, ns, "nowhere", operatorsv1.ConditionDegraded, metav1.ConditionTrue, operatorsv1.ReasonUpstreamMalformed)
	assert.Contains(t, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDegraded).Message, "is XYZ one of the providers /v2/providers lists?")
	assert.Equal(t, operatorsv1.ReasonRateUnavailable, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady).Reason)
}

// testSourceLimit: a spec naming a source beyond --exchangerate-max-sources is refused in
// Ready, with an Event, and fetches nothing; once the ExchangeRate that named the other
// source is gone, its place goes to the refused one at its next refresh, with no edit.
func testSourceLimit(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-limit", nil)
	srv := startFakeToday(t)
	opts := quickOptions(srv, time.Second)
	opts.MaxSources = 2 // the default ecb, and one more
	startManager(t, opts, ns)

	first := newXR(ns, "gbp", "GBP", "")
	first.Spec.Sources = []operatorsv1.ExchangeRateSource{{Type: operatorsv1.SourceTypeFrankfurter}}
	require.NoError(t, env.Client.Create(ctx, first))
	waitCondition(t, ns, "gbp", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)

	xr := newXR(ns, "usd", "USD", "")
	xr.Spec.Sources = []operatorsv1.ExchangeRateSource{{Type: operatorsv1.SourceTypeFrankfurterV2}}
	require.NoError(t, env.Client.Create(ctx, xr))
	got := waitCondition(t, ns, "usd", operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonTooManySources)
	assert.Contains(t, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady).Message, "frankfurter-v2 would be one more")
	eventuallyEvent(t, ns, "usd", EventTooManySources)
	assert.Zero(t, srv.Requests(fakeupstream.FrankfurterV2Path))

	t.Log("the ExchangeRate naming frankfurter goes: its place goes to frankfurter-v2")
	require.NoError(t, env.Client.Delete(ctx, first))
	waitCondition(t, ns, "usd", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	waitConfigMap(t, ns, "usd", map[string]string{"source": "frankfurter-v2"})
	assert.Positive(t, srv.Requests(fakeupstream.FrankfurterV2Path))
}

// testSourcesSample applies config/samples/operators_v1_exchangerate_sources.yaml: three
// currencies in one ConfigMap from the ECB, cross-checked against Frankfurter v2.
func testSourcesSample(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-sources-sample", nil)
	twoUpstreams(t, ns, time.Hour)

	b, err := os.ReadFile("../../config/samples/operators_v1_exchangerate_sources.yaml")
	require.NoError(t, err)
	xr := &operatorsv1.ExchangeRate{}
	require.NoError(t, yaml.UnmarshalStrict(b, xr))
	xr.Namespace = ns
	require.NoError(t, env.Client.Create(ctx, xr))
	cm := waitConfigMap(t, ns, "exchange-rates-eur", map[string]string{"USD": "1.1625", "GBP": "0.86485", "JPY": "171.58",
		"base": "EUR", "date": today(), "source": "ecb"})
	assert.Len(t, cm.Data, 6)
	got := waitCondition(t, ns, xr.Name, operatorsv1.ConditionDivergent, metav1.ConditionFalse, operatorsv1.ReasonSourcesAgree)
	assert.Equal(t, "ConfigMap exchange-rates-eur holds 3 rates per EUR (USD 1.1625, GBP 0.86485, JPY 171.58), published "+today()+" by ecb",
		testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady).Message)
	assert.Equal(t, "the last fetches from ecb and frankfurter-v2 succeeded", testenv.Condition(got.Status.Conditions, operatorsv1.ConditionDegraded).Message)
}

// testObservedGenerationOnFailure pins the observedGeneration rule (docs/STYLE.md, "Status
// writes and observedGeneration"): it claims a spec only after a pass that acted on it fully
// or found a mistake the user must fix; a pass that failed with an API error (returned, so
// retried) leaves it where it was while Ready reports the failure. A currency no source
// publishes is such a mistake; a ResourceQuota of no ConfigMaps makes the ConfigMap write
// fail with an API error until the quota is deleted.
func testObservedGenerationOnFailure(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-obsgen", nil)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-configmaps"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}}
	require.NoError(t, env.Client.Create(ctx, quota))
	// Quota admission lets creates through until the quota's usage is known. Envtest runs no
	// resourcequota controller: write the status it would (nothing used), then wait until
	// admission, which reads quotas from its cache, refuses a ConfigMap.
	counted := quota.DeepCopy()
	counted.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard,
		Used: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}
	require.NoError(t, env.Client.Status().Patch(ctx, counted, client.MergeFrom(quota)))
	require.Eventually(t, func() bool {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
		err := env.Client.Create(ctx, probe)
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
		}
		return apierrors.IsForbidden(err)
	}, 60*time.Second, 100*time.Millisecond, "the quota refuses ConfigMaps")
	srv := startFakeToday(t)
	startManager(t, quickOptions(srv, time.Hour), ns)

	// A spec mistake: reported, and the spec is observed (no ConfigMap is written).
	xr := newXR(ns, "refused", "XYZ", "")
	require.NoError(t, env.Client.Create(ctx, xr))
	got := waitCondition(t, ns, "refused", operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonUnknownCurrency)
	assert.Equal(t, int64(1), got.Status.ObservedGeneration, "a spec mistake is no error of the pass: observed")

	// An API error: reported for generation 2, which is not observed.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Currency = "USD"
	require.NoError(t, env.Client.Patch(ctx, got, patch))
	require.Equal(t, int64(2), got.Generation)
	got = waitCondition(t, ns, "refused", operatorsv1.ConditionReady, metav1.ConditionFalse, operatorsv1.ReasonConfigMapWriteFailed)
	assert.Contains(t, testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady).Message, "writing ConfigMap refused")
	assert.Equal(t, int64(1), got.Status.ObservedGeneration, "a failed pass does not claim the spec it could not act on")

	// The retried pass succeeds once the quota is gone, and observes generation 2.
	require.NoError(t, env.Client.Delete(ctx, quota))
	got = waitCondition(t, ns, "refused", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	assert.Equal(t, int64(2), got.Status.ObservedGeneration)
}

// testRestartNeverStepsBack: a manager restarted while the source answers with yesterday's
// publication (a mirror behind a load balancer) keeps today's rates in the ConfigMap and
// the status, says so with an Event, and writes the next publication that is not older.
func testRestartNeverStepsBack(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "xr-restart", nil)
	srv := startFakeToday(t)
	shared := scope.Namespaces{Watched: []string{ns}}
	stop := testenv.StartManager(t, env.Config, shared, setupQuick(quickOptions(srv, time.Hour)))
	require.NoError(t, env.Client.Create(ctx, newXR(ns, "usd", "USD", "")))
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1625", "date": today()})
	first := waitCondition(t, ns, "usd", operatorsv1.ConditionReady, metav1.ConditionTrue, operatorsv1.ReasonRateWritten)
	stop()

	t.Log("the restarted manager's first answer is yesterday's publication")
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(dateLayout)
	rates := fakeupstream.DefaultRates()
	rates["USD"] = "1.1500"
	srv.SetRates(yesterday, rates)
	srv.ResetCounts()
	testenv.StartManager(t, env.Config, shared, setupQuick(quickOptions(srv, 2*time.Second)))
	eventuallyEvent(t, ns, "usd", EventOlderPublication)
	require.GreaterOrEqual(t, srv.Requests(fakeupstream.ECBPath), 1, "the restarted manager asked the source")
	// The pass that sent the Event writes its status after it, and a pass that keeps what
	// is there may write nothing: one read cannot tell "kept" from "not written yet".
	// Watch both for three refreshes (2 s each) of yesterday's answer instead: neither may
	// ever step back.
	requests := srv.Requests(fakeupstream.ECBPath)
	got := &operatorsv1.ExchangeRate{}
	cm := &corev1.ConfigMap{}
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "usd"}, cm))
		require.Equal(t, "1.1625", cm.Data["rate"], "the ConfigMap keeps the newer rate")
		require.Equal(t, today(), cm.Data["date"])
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "usd"}, got))
		require.Equal(t, "1.1625", got.Status.Rate, "the status keeps the newer rate")
		require.Equal(t, today(), got.Status.PublicationDate)
		require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, operatorsv1.ConditionReady))
		require.Equal(t, first.Status.LastSuccessfulFetch, got.Status.LastSuccessfulFetch, "no new rate was fetched")
		time.Sleep(100 * time.Millisecond)
	}
	require.Greater(t, srv.Requests(fakeupstream.ECBPath), requests, "yesterday's publication was fetched again while the test watched")

	t.Log("a publication that is not older is written")
	rates["USD"] = "1.1702"
	srv.SetRates(today(), rates)
	waitConfigMap(t, ns, "usd", map[string]string{"rate": "1.1702", "date": today()})
	// The ConfigMap is written before the status, and Ready=True (RateWritten) is already
	// there from the first manager: wait for the status of THIS write, its rate and a
	// LastSuccessfulFetch newer than the first manager's.
	got = waitStatus(t, ns, "usd", func(c *assert.CollectT, xr *operatorsv1.ExchangeRate) {
		assert.Equal(c, "1.1702", xr.Status.Rate)
		if assert.NotNil(c, xr.Status.LastSuccessfulFetch) {
			assert.True(c, xr.Status.LastSuccessfulFetch.After(first.Status.LastSuccessfulFetch.Time), "LastSuccessfulFetch after the first manager's")
		}
	})
	ready := testenv.Condition(got.Status.Conditions, operatorsv1.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, operatorsv1.ReasonRateWritten, ready.Reason)
	assert.Equal(t, got.Generation, got.Status.ObservedGeneration)
}
