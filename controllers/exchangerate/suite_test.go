package exchangerate

import (
	"context"
	"flag"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/fakeupstream"
	"github.com/quartet-operator/quartet/test/testenv"
)

// env is an envtest API server (etcd and kube-apiserver) for the tests: the controller
// needs no pods, and deletion is the garbage collector's work on the ConfigMap's owner
// reference, which testOwnedConfigMap checks without running a collector. The benchmarks
// get the full local cluster (suiteMode).
var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse() // for suiteMode; RunSuite starts no API server while fuzzing
	os.Exit(testenv.RunSuite(m, suiteMode(), &env))
}

// suiteMode is the full local cluster when benchmarks run (-test.bench set, as make bench
// does): between benchmarks they delete their 100 namespaces and wait until they are gone,
// which takes the controller-manager's namespace controller, and docs/PERFORMANCE.md's
// figures were measured there. Envtest otherwise.
func suiteMode() testenv.Mode {
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		return testenv.Full
	}
	return testenv.Envtest
}

// today is the publication date the imitation upstream serves in integration tests, so
// nothing is Stale.
func today() string { return time.Now().UTC().Format(dateLayout) }

// startManager starts a manager running only this controller, configured like main.go
// with WATCH_NAMESPACE set to the given namespaces (so parallel tests do not see each
// other), and stops it when the test ends.
func startManager(t testing.TB, opts *Options, namespaces ...string) {
	t.Helper()
	testenv.StartManager(t, env.Config, scope.Namespaces{Watched: namespaces}, setupQuick(opts))
}

// setupQuick is Setup with every source periodic only: no publication times, since on the
// real clock a test running across 16:10 CET would see one more request.
func setupQuick(opts *Options) func(ctrl.Manager, scope.Namespaces) error {
	return func(mgr ctrl.Manager, shared scope.Namespaces) error {
		if err := opts.complete(); err != nil {
			return err
		}
		sources, err := opts.newSources(clock.RealClock{}, &http.Client{Transport: http.DefaultTransport})
		if err != nil {
			return err
		}
		build := sources.newCache
		sources.newCache = func(ref SourceRef) (*RateCache, error) {
			c, err := build(ref)
			if c != nil {
				c.schedule = Schedule{}
			}
			return c, err
		}
		for _, c := range sources.Defaults() {
			c.schedule = Schedule{}
		}
		return opts.register(mgr, opts.newReconciler(sources, shared))
	}
}

// quickOptions are the integration tests' settings (started by setupQuick): the imitation
// upstream for every source, and short refresh and backoff so outages and recoveries happen
// within seconds.
func quickOptions(srv *fakeupstream.Server, refresh time.Duration) *Options {
	return &Options{
		MaxConcurrentReconciles: 4,
		Source:                  SourceECB,
		URL:                     srv.URL(),
		FrankfurterURL:          srv.URL(),
		RefreshInterval:         refresh,
		StaleAfterDays:          5,
		FetchTimeout:            time.Second,
		BackoffBase:             200 * time.Millisecond,
		BackoffMax:              time.Second,
	}
}

func newXR(ns, name, currency, base string) *operatorsv1.ExchangeRate {
	return &operatorsv1.ExchangeRate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       operatorsv1.ExchangeRateSpec{Currency: currency, Base: base},
	}
}

// waitConfigMap polls the ConfigMap until its data matches want (a subset) and returns it.
func waitConfigMap(t testing.TB, ns, name string, want map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm))
		for k, v := range want {
			assert.Equal(c, v, cm.Data[k], "ConfigMap %s/%s key %s", ns, name, k)
		}
	}, 60*time.Second, 100*time.Millisecond)
	return cm
}

// waitCondition polls the ExchangeRate until condition typ has status and reason for the
// object's current generation, and returns the ExchangeRate.
func waitCondition(t testing.TB, ns, name, typ string, status metav1.ConditionStatus, reason string) *operatorsv1.ExchangeRate {
	t.Helper()
	xr := &operatorsv1.ExchangeRate{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, xr))
		got := testenv.Condition(xr.Status.Conditions, typ)
		assert.Equal(c, status, got.Status, "%s: %s", typ, got.Message)
		assert.Equal(c, reason, got.Reason, "%s: %s", typ, got.Message)
		// A condition about an older spec does not count: after a spec change the
		// previous pass's Ready=True is still there until the new pass writes.
		assert.Equal(c, xr.Generation, got.ObservedGeneration, "%s: observedGeneration", typ)
	}, 60*time.Second, 100*time.Millisecond)
	return xr
}

// waitStatus polls the ExchangeRate until check passes and returns it. Wait with it for what
// only the awaited write can set (a new rate, a later fetch time): a condition that an
// earlier pass had already set says nothing about the pass awaited.
func waitStatus(t testing.TB, ns, name string, check func(c *assert.CollectT, xr *operatorsv1.ExchangeRate)) *operatorsv1.ExchangeRate {
	t.Helper()
	var xr *operatorsv1.ExchangeRate
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		xr = &operatorsv1.ExchangeRate{}
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, xr))
		check(c, xr)
	}, 60*time.Second, 100*time.Millisecond)
	return xr
}

// eventuallyEvent waits for an Event with reason about the ExchangeRate ns/name.
func eventuallyEvent(t testing.TB, ns, name, reason string) {
	t.Helper()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "ExchangeRate", name), reason)
	}, 30*time.Second, 200*time.Millisecond)
}
