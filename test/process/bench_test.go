package process

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/fakeupstream"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The steady-state fleet of BenchmarkManagerIdle, sized so arranging it and letting it
// settle takes a few minutes on a two-core machine.
const (
	idleCopies      = 1000 // namespaces that each get one copy of one CopyratorRule's ConfigMap
	idleRates       = 1000 // ExchangeRates, one in each of those namespaces
	idleDeployments = 10   // Deployments of idleReplicas kwok pods each, under one dry-run ChaosAgent
	idleReplicas    = 100
	idleMirrors     = 100 // RegistryMirrors, each with a PersistentVolume to bind

	// idleSettle is how long the manager rests after its caches synced (or after the
	// fleet is in place) before it is measured.
	idleSettle = 20 * time.Second
	// idleWindow is how long the steady state is measured.
	idleWindow = 2 * time.Minute
	// idleArrange bounds the time for the fleet to be created and reach its steady state.
	idleArrange = 10 * time.Minute
)

// BenchmarkManagerIdle measures what the manager binary costs when it has nothing to do
// and when it looks after a fleet that does not change.
//
// The binary is built as the Dockerfile builds it and started with its default flags and
// all four controllers, except what the test harness must pass: the kubeconfig (of a
// counting proxy in front of the API server, which sees every request), no health probe
// port (the default :8081 may be taken) and --registrymirror-probes=false (kwok's pods
// serve nothing). Leader election and the metrics endpoint are off, their defaults in the
// binary; the Deployment turns both on.
//
// Idle: 20 seconds after all four controllers started their workers, the resident memory
// (VmRSS) is read five times, two seconds apart; MB-idle-rss is the median, in MB of 2^20
// bytes. MB-steady-rss is read the same way at the end of the steady-state window, and
// MB-steady-heap is the live heap the manager's next garbage collection after it leaves
// (the runtime's gctrace, in whole MB, as in BenchmarkBigCluster): RSS also counts what the
// collector has yet to free or return, which moves by several MB from run to run.
//
// Steady state: one CopyratorRule copies a ConfigMap into 1,000 namespaces; 1,000
// ExchangeRates (one per namespace) read a fake upstream at the default refresh interval
// (1 hour); one ChaosAgent in dry-run with its default pause (30 seconds), eagerness and
// action cap looks at 1,000 kwok pods of 10 Deployments; 100 RegistryMirrors have their
// workloads made ready by kwok. Once every copy exists, every ExchangeRate and mirror is
// Ready, every pod runs and the agent finished a round, the manager rests 20 seconds and
// is then measured over 2 minutes in which nothing changes: its CPU time (from
// /proc/<pid>/stat), the requests it sent, the writes among them (POST, PUT, PATCH,
// DELETE), and the reads that did not come from a cache (GETs and LISTs, not watches). The
// agent's rounds write Events and the agent's status by design; those writes are reported
// apart from all others, which nothing asked for. SubjectAccessReviews and TokenReviews are
// POSTs that change nothing: they are not counted as writes but as api-reviews/min.
// Copyrator asks in a SubjectAccessReview whether a rule's ServiceAccount may still create
// copies where it copies: each rule passes again every --copyratorrule-consent-refresh (10
// minutes) and asks what it no longer remembers, so the window sees the fleet rule's
// reviews when its refresh falls in it.
func BenchmarkManagerIdle(b *testing.B) {
	env.Require(b)
	ctx := context.Background()
	proxy := benchutil.StartCountingProxy(b, env.Config)
	b.Setenv("GODEBUG", "gctrace=1")
	rates, err := fakeupstream.Start("127.0.0.1:0", time.Now().UTC().Format(time.DateOnly), fakeupstream.DefaultRates())
	require.NoError(b, err)
	b.Cleanup(func() { _ = rates.Close() })

	m := startManager(b, "idle", "--kubeconfig="+proxy.Kubeconfig(b), "--exchangerate-url="+rates.URL())
	pid := m.cmd.Process.Pid
	start := time.Now()
	waitFor(b, 2*time.Minute, "the four controllers to start their workers", func() bool {
		return strings.Count(m.logs(), `"Starting workers"`) >= 4
	})
	synced := time.Since(start)
	time.Sleep(idleSettle)
	idleCalls := proxy.Calls.Snapshot()
	idleRSS, samples := medianRSS(b, pid)
	// The benchmark's log keeps 10 lines: one line per finding.
	idleFile, err := benchutil.ProcStatus(pid, "RssFile")
	require.NoError(b, err)
	b.Logf("idle: workers started %s after the start; %d requests until measured; RSS samples %.1f MB (%.1f MB of files)",
		synced.Round(time.Millisecond), benchutil.Sum(idleCalls), samples, float64(idleFile)/(1<<20))

	arrangeFleet(ctx, b)
	time.Sleep(idleSettle)

	before, cpuBefore, t0 := proxy.Calls.Snapshot(), procCPU(b, pid), time.Now()
	time.Sleep(idleWindow)
	after, cpuAfter, t1 := proxy.Calls.Snapshot(), procCPU(b, pid), time.Now()
	steadyRSS, samples := medianRSS(b, pid)
	anon, err := benchutil.ProcStatus(pid, "RssAnon")
	require.NoError(b, err)
	file, err := benchutil.ProcStatus(pid, "RssFile")
	require.NoError(b, err)
	steadyHeap := liveHeapMB(b, m)
	b.Logf("steady state: RSS samples %.1f MB (then %.1f MB anonymous, %.1f MB of files: the binary); live heap %.0f MB",
		samples, float64(anon)/(1<<20), float64(file)/(1<<20), steadyHeap)
	require.False(b, m.exited(), "the manager exited:\n%s", m.logs())
	m.stop()

	perMin := time.Minute.Seconds() / t1.Sub(t0).Seconds()
	window := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			window[k] = d
		}
	}
	var requests, writes, roundWrites, reviews, reads int
	byResource := map[string]int{}
	for k, n := range window {
		verb, path, _ := strings.Cut(k, " ")
		requests += n
		switch {
		case verb == "POST" && benchutil.IsReview(benchutil.ResourceOf(path)):
			reviews += n
			byResource[verb+" "+benchutil.ResourceOf(path)] += n
		case verb == "POST", verb == "PUT", verb == "PATCH", verb == "DELETE":
			writes += n
			res := benchutil.ResourceOf(path)
			byResource[verb+" "+res] += n
			if res == "events" || res == "chaosagents/status" {
				roundWrites += n
			}
		case verb == "GET":
			reads += n
			byResource["GET "+benchutil.ResourceOf(path)] += n
		default:
			byResource[verb+" "+benchutil.ResourceOf(path)] += n
		}
	}
	b.Logf("requests in the %s window by verb and resource: %v", t1.Sub(t0).Round(time.Second), byResource)
	b.Logf("requests in the window: %v", window)

	b.ReportMetric(idleRSS, "MB-idle-rss")
	b.ReportMetric(steadyRSS, "MB-steady-rss")
	b.ReportMetric(steadyHeap, "MB-steady-heap")
	b.ReportMetric(float64(cpuAfter-cpuBefore)/float64(time.Millisecond)*perMin, "cpu-ms/min")
	b.ReportMetric(float64(requests)*perMin, "api-requests/min")
	b.ReportMetric(float64(writes)*perMin, "api-writes/min")
	b.ReportMetric(float64(roundWrites)*perMin, "api-writes-chaosagent-rounds/min")
	b.ReportMetric(float64(writes-roundWrites)*perMin, "api-writes-other/min")
	b.ReportMetric(float64(reviews)*perMin, "api-reviews/min")
	b.ReportMetric(float64(reads)*perMin, "api-reads-not-from-cache/min")
}

// arrangeFleet creates the steady-state fleet and waits until it has settled.
func arrangeFleet(ctx context.Context, b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithTimeout(ctx, idleArrange)
	defer cancel()
	start := time.Now()
	c := env.Client

	// CopyratorRule: one ConfigMap into idleCopies namespaces.
	src := namespaceList(b, "idle-src", 1, nil)[0]
	testenv.GrantCopies(b, c, src, copyratorrule.DefaultServiceAccountName)
	targets := namespaceList(b, "idle-copy", idleCopies, map[string]string{"idle-bench-copy": "true"})
	require.NoError(b, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: src,
		Labels: map[string]string{"copy": "idle"}}, Data: map[string]string{"greeting": "hello"}}))
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: src},
		Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeConfigMap, Selector: map[string]flantv1.LabelValue{"copy": "idle"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"idle-bench-copy": "true"}}}}
	require.NoError(b, c.Create(ctx, rule))
	b.Cleanup(func() { forceDelete(rule) })

	// ExchangeRates: one per copy namespace, over the fake upstream's currencies.
	currencies := slices.Sorted(maps.Keys(fakeupstream.DefaultRates()))
	require.NoError(b, benchutil.Parallel(ctx, idleRates, func(i int) error {
		return c.Create(ctx, &operatorsv1.ExchangeRate{ObjectMeta: metav1.ObjectMeta{Name: "rate", Namespace: targets[i%len(targets)]},
			Spec: operatorsv1.ExchangeRateSpec{Currency: currencies[i%len(currencies)], Base: "EUR"}})
	}))

	// ChaosAgent: dry-run tantrums over kwok pods, every other setting its default.
	chaosNS := namespaceList(b, "idle-chaos", 1, map[string]string{"idle-bench-chaos": "true"})[0]
	for i := 0; i < idleDeployments; i++ {
		require.NoError(b, c.Create(ctx, testenv.Deployment(chaosNS, fmt.Sprintf("web-%d", i), idleReplicas)))
	}
	agent := &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: "idle"}, Spec: blackadderv1beta1.ChaosAgentSpec{
		TantrumMode: true, DryRun: true,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"idle-bench-chaos": "true"}}}}
	require.NoError(b, c.Create(ctx, agent))
	b.Cleanup(func() { forceDelete(agent) })

	// RegistryMirrors, each with a PersistentVolume of its own storage class to bind.
	mirrorNS := namespaceList(b, "idle-mirrors", 1, nil)[0]
	require.NoError(b, benchutil.Parallel(ctx, idleMirrors, func(i int) error {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("idle-pv-%d", i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              "idle-bench",
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/tmp/idle-pv-%d", i)}},
			}}
		b.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
		if err := c.Create(ctx, pv); err != nil {
			return err
		}
		return c.Create(ctx, &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%d", i), Namespace: mirrorNS},
			Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: fmt.Sprintf("https://registry-%d.example", i),
				Storage: resource.MustParse("10Gi"), StorageClassName: ptr.To("idle-bench")}})
	}))
	created := time.Since(start)

	settled := map[string]func() (int, int){
		"copies": func() (int, int) {
			var cms corev1.ConfigMapList
			require.NoError(b, c.List(ctx, &cms, client.MatchingLabels{copyratorrule.LabelManagedBy: copyratorrule.ManagedByValue}))
			return len(cms.Items), idleCopies
		},
		"ExchangeRates Ready": func() (int, int) {
			var list operatorsv1.ExchangeRateList
			require.NoError(b, c.List(ctx, &list))
			n := 0
			for i := range list.Items {
				if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, "Ready") {
					n++
				}
			}
			return n, idleRates
		},
		"pods Running": func() (int, int) {
			var pods corev1.PodList
			require.NoError(b, c.List(ctx, &pods, client.InNamespace(chaosNS)))
			n := 0
			for i := range pods.Items {
				if pods.Items[i].Status.Phase == corev1.PodRunning {
					n++
				}
			}
			return n, idleDeployments * idleReplicas
		},
		"chaos rounds": func() (int, int) {
			cur := &blackadderv1beta1.ChaosAgent{}
			require.NoError(b, c.Get(ctx, client.ObjectKeyFromObject(agent), cur))
			return min(int(cur.Status.Rounds), 1), 1
		},
		"mirrors Ready": func() (int, int) {
			var list mirrorsv1alpha1.RegistryMirrorList
			require.NoError(b, c.List(ctx, &list, client.InNamespace(mirrorNS)))
			n := 0
			for i := range list.Items {
				if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, "Ready") {
					n++
				}
			}
			return n, idleMirrors
		},
	}
	names := slices.Sorted(maps.Keys(settled))
	for {
		var waiting []string
		for _, name := range names {
			if have, want := settled[name](); have < want {
				waiting = append(waiting, fmt.Sprintf("%s %d/%d", name, have, want))
			}
		}
		if len(waiting) == 0 {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("the fleet did not settle in %s: %s", idleArrange, strings.Join(waiting, ", "))
		}
		time.Sleep(2 * time.Second)
	}
	b.Logf("fleet: created in %s, settled %s after its creation began", created.Round(time.Millisecond), time.Since(start).Round(time.Second))
}

// namespaceList creates n labelled namespaces prefix-0 … prefix-(n-1), deleted when the
// benchmark ends.
func namespaceList(b *testing.B, prefix string, n int, labels map[string]string) []string {
	b.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	require.NoError(b, benchutil.Parallel(context.Background(), n, func(i int) error {
		return env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: labels}})
	}))
	b.Cleanup(func() {
		_ = benchutil.Parallel(context.Background(), n, func(i int) error {
			_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}})
			return nil
		})
	})
	return names
}

// medianRSS reads the process's VmRSS five times, two seconds apart, and returns the
// median and the samples, in MB (2^20 bytes).
func medianRSS(b *testing.B, pid int) (float64, []float64) {
	b.Helper()
	var samples []float64
	for i := 0; i < 5; i++ {
		if i > 0 {
			time.Sleep(2 * time.Second)
		}
		rss, err := benchutil.ProcRSS(pid)
		require.NoError(b, err)
		samples = append(samples, float64(rss)/(1<<20))
	}
	sorted := slices.Sorted(slices.Values(samples))
	return sorted[len(sorted)/2], samples
}

func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	d, err := benchutil.ProcCPU(pid)
	require.NoError(b, err)
	return d
}

// waitFor polls cond every 50 ms and fails the benchmark after timeout.
func waitFor(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	if !benchutil.WaitFor(context.Background(), timeout, cond) {
		b.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}
