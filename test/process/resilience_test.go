package process

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/fakeupstream"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestAPIServerRestart restarts kube-apiserver under a running manager and checks the same
// process reconnects and acts on objects created afterwards.
func TestAPIServerRestart(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	src := namespace(t, "restart-src", nil)
	testenv.GrantCopies(t, env.Client, src, copyratorrule.DefaultServiceAccountName)
	target := namespace(t, "restart-target", map[string]string{"restart-e2e": "true"})
	m := startManager(t, "restart", "--controllers=copyratorrule")
	mkRule := func(name string) {
		require.NoError(t, env.Client.Create(ctx, configMap(src, name, map[string]string{"rule": name}, map[string]string{"k": name})))
		create(t, copyRule(src, name, flantv1.RuleTypeConfigMap, "rule="+name, "restart-e2e"))
	}
	mkRule("before")
	eventually(t, time.Minute, "copy before the restart", func() bool { return configMapData(t, target, "before") != nil })

	start := time.Now()
	require.NoError(t, env.Cluster.RestartAPIServer(ctx, 3*time.Second))
	t.Logf("kube-apiserver down 3s, ready again after %.2fs", time.Since(start).Seconds())
	mkRule("after")
	took := eventually(t, 2*time.Minute, "copy after the restart", func() bool { return configMapData(t, target, "after") != nil })
	t.Logf("new rule converged %.2fs after the API server was ready again", took.Seconds())
	assert.False(t, m.exited(), "the manager kept running through the restart")
	// Drift made while the API server was back is still corrected.
	require.NoError(t, env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: target}}))
	eventually(t, time.Minute, "deleted copy put back", func() bool { return configMapData(t, target, "before") != nil })
	m.stop()
}

// TestLeaderElection runs two managers with leader election: only the leader acts; when it
// is SIGKILLed the other takes over within the lease duration and acts.
func TestLeaderElection(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	require.NoError(t, client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "quartet-system"}})))
	ns := namespace(t, "leader", nil)
	const lease = 4 * time.Second
	args := []string{"--controllers=exchangerate", "--leader-elect", "--leader-election-namespace=quartet-system",
		"--leader-elect-lease-duration=" + lease.String(), "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
		"--exchangerate-url=" + ratesURL(t)}
	a := startManager(t, "a", args...)
	b := startManager(t, "b", args...)

	holder := func() string {
		l := &coordinationv1.Lease{}
		if env.Client.Get(ctx, client.ObjectKey{Namespace: "quartet-system", Name: "quartet.quartet.dev"}, l) != nil {
			return ""
		}
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	eventually(t, time.Minute, "a leader", func() bool { return holder() != "" })
	acquired := func(m *manager) bool { return strings.Contains(m.logs(), "Successfully acquired lease") }
	leader, follower := a, b
	eventually(t, 30*time.Second, "the leader to log its election", func() bool {
		if !acquired(a) && acquired(b) {
			leader, follower = b, a
		}
		return acquired(leader)
	})
	create(t, rate(ns, "first", "USD"))
	eventually(t, time.Minute, "the leader to act", func() bool { return configMapData(t, ns, "first")["rate"] != "" })
	assert.NotContains(t, follower.logs(), "Starting workers", "the follower must not run controllers")

	leader.kill()
	killed := time.Now()
	took := eventually(t, 3*lease, "the follower to take over", func() bool { return acquired(follower) })
	t.Logf("follower acquired the lease %.2fs after the leader was SIGKILLed (lease %s)", took.Seconds(), lease)
	assert.LessOrEqual(t, took, lease+2*time.Second, "takeover within the lease duration (plus retry slack)")
	create(t, rate(ns, "second", "USD"))
	eventually(t, time.Minute, "the new leader to act", func() bool { return configMapData(t, ns, "second")["rate"] != "" })
	t.Logf("new leader acted %.2fs after the kill", time.Since(killed).Seconds())
	follower.stop()
}

// flakyUpstream serves the imitation ECB feed and can fail in every way a real one can.
type flakyUpstream struct {
	mu   sync.Mutex
	mode string
	real *fakeupstream.Server
}

func (f *flakyUpstream) set(mode string) { f.mu.Lock(); f.mode = mode; f.mu.Unlock() }

func (f *flakyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode := f.mode
	f.mu.Unlock()
	switch mode {
	case "5xx":
		http.Error(w, "<html>503 Service Unavailable</html>", http.StatusServiceUnavailable)
	case "slow":
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	case "truncated":
		body := fakeupstream.RenderECB("2026-11-20", fakeupstream.DefaultRates())
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = w.Write(body[:len(body)/2])
	case "wrong-xml":
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(`<?xml version="1.0"?><html><body><p>We have moved!</p></body></html>`))
	default:
		f.real.ServeHTTP(w, r)
	}
}

// TestExchangeRateOutages puts the upstream through every kind of outage (refused, 5xx,
// slow, truncated, wrong XML) and checks the ConfigMap keeps the last good rate with
// Degraded=True, then takes the new rate once the upstream heals.
func TestExchangeRateOutages(t *testing.T) {
	env.Require(t)
	rates := fakeupstream.DefaultRates()
	flaky := &flakyUpstream{real: fakeupstream.New("2026-11-20", rates)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	srv := &http.Server{Handler: flaky}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()

	ns := namespace(t, "outage", nil)
	m := startManager(t, "outage", "--controllers=exchangerate", "--exchangerate-url=http://"+addr,
		"--exchangerate-refresh-interval=1s", "--exchangerate-backoff-base=200ms", "--exchangerate-backoff-max=1s",
		"--exchangerate-fetch-timeout=1s")
	xr := rate(ns, "usd", "USD")
	create(t, xr)
	eventually(t, time.Minute, "the first rate", func() bool { return configMapData(t, ns, "usd")["rate"] == "1.1625" })

	degraded := func() bool { return fetch(xr) && meta.IsStatusConditionTrue(xr.Status.Conditions, "Degraded") }
	good := "1.1625"
	for i, mode := range []string{"refused", "5xx", "slow", "truncated", "wrong-xml"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "refused" {
				require.NoError(t, srv.Close())
			} else {
				flaky.set(mode)
			}
			took := eventually(t, time.Minute, "Degraded=True", degraded)
			assert.Equal(t, good, configMapData(t, ns, "usd")["rate"], "last good rate kept during %s", mode)
			never(t, 3*time.Second, "the rate changing during the outage", func() bool {
				return configMapData(t, ns, "usd")["rate"] != good
			})
			t.Logf("%s: Degraded after %.2fs, rate kept at %s", mode, took.Seconds(), good)

			// Heal with a newer publication and a new rate.
			if mode == "refused" {
				l, err := net.Listen("tcp", addr)
				require.NoError(t, err)
				srv = &http.Server{Handler: flaky}
				go func() { _ = srv.Serve(l) }()
			}
			good = fmt.Sprintf("1.17%d5", i)
			rates["USD"] = good
			flaky.real.SetRates(fmt.Sprintf("2026-11-2%d", i+1), rates)
			flaky.set("")
			took = eventually(t, time.Minute, "recovery", func() bool {
				return configMapData(t, ns, "usd")["rate"] == good && !degraded()
			})
			t.Logf("%s: recovered to %s %.2fs after the upstream healed", mode, good, took.Seconds())
		})
	}
	m.stop()
}
