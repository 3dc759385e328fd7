package exchangerate

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/controllers/exchangerate/fakeupstream"
	"github.com/quartet-operator/quartet/internal/operator"
	"github.com/quartet-operator/quartet/internal/testenv"
)

// env is the full local cluster: deleting an ExchangeRate must garbage-collect its
// ConfigMap, which only the controller-manager does. Everything else would run on envtest.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunSuite(m, testenv.Full, &env))
}

// today is the publication date the imitation upstream serves in integration tests, so
// nothing is Stale.
func today() string { return time.Now().UTC().Format(dateLayout) }

// testNamespace creates a namespace for one test and deletes it at the end.
func testNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s", prefix, rand.String(5))}}
	require.NoError(t, env.Client.Create(context.Background(), ns))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// startManager starts a manager running only this controller, configured like main.go but
// watching only the given namespaces (so parallel tests do not see each other), and stops
// it when the test ends.
func startManager(t testing.TB, cfg *rest.Config, opts *Options, namespaces ...string) {
	t.Helper()
	runManager(t, cfg, opts, namespaces, namespaces)
}

// startManagerShared starts a manager whose cache holds cacheNS while the controller is
// told (operator.Shared) to act only in watchNS.
func startManagerShared(t testing.TB, opts *Options, cacheNS, watchNS []string) {
	t.Helper()
	runManager(t, env.Config, opts, cacheNS, watchNS)
}

func runManager(t testing.TB, cfg *rest.Config, opts *Options, cacheNS, watchNS []string) {
	t.Helper()
	testenv.StartManager(t, cfg, operator.Shared{WatchNamespaces: watchNS}, opts.Setup, func(o *ctrl.Options) {
		*o = operator.ManagerOptions(o.Scheme, operator.Shared{WatchNamespaces: cacheNS})
		o.Metrics.BindAddress, o.HealthProbeBindAddress = "0", "0"
		o.Controller.SkipNameValidation = ptr.To(true)
	})
}

// quickOptions are the integration tests' settings: the imitation upstream, short
// refresh and backoff so outages and recoveries happen within seconds.
func quickOptions(srv *fakeupstream.Server, refresh time.Duration) *Options {
	return &Options{
		MaxConcurrentReconciles: 4,
		Source:                  SourceECB,
		URL:                     srv.URL(),
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

// waitCondition polls the ExchangeRate until condition typ has status and reason, and returns it.
func waitCondition(t testing.TB, ns, name, typ string, status metav1.ConditionStatus, reason string) *operatorsv1.ExchangeRate {
	t.Helper()
	xr := &operatorsv1.ExchangeRate{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, xr))
		got := meta.FindStatusCondition(xr.Status.Conditions, typ)
		require.NotNil(c, got, "condition %s", typ)
		assert.Equal(c, status, got.Status, "%s: %s", typ, got.Message)
		assert.Equal(c, reason, got.Reason, "%s: %s", typ, got.Message)
		// A condition about an older spec does not count: after a spec change the
		// previous pass's Ready=True is still there until the new pass writes.
		assert.Equal(c, xr.Generation, got.ObservedGeneration, "%s: observedGeneration", typ)
	}, 60*time.Second, 100*time.Millisecond)
	return xr
}

// eventReasons returns the reasons of the events.k8s.io Events about an ExchangeRate.
func eventReasons(t testing.TB, ns, name string) []string {
	t.Helper()
	events := &eventsv1.EventList{}
	require.NoError(t, env.Client.List(context.Background(), events, client.InNamespace(ns)))
	var out []string
	for _, e := range events.Items {
		if e.Regarding.Kind == "ExchangeRate" && e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}
