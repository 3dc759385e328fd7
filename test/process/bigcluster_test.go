package process

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The cluster of BenchmarkBigCluster at full size (issue 23), none of it Quartet's.
const (
	bigConfigMaps  = 100_000
	bigSecrets     = 20_000
	bigDeployments = 5_000
	bigReplicas    = 2 // kwok pods per Deployment: 10,000 pods
	bigNamespaces  = 2_000
	// bigBody is the bytes of data in every ConfigMap and Secret (and in each rule's
	// source): small, so that etcd on a development machine holds the whole cluster.
	bigBody = 1024

	bigRules       = 1_000 // CopyratorRules in one namespace, each with a source of its own
	bigRuleTargets = 10    // namespaces each rule copies into

	// bigConverge bounds the wait for a step's objects to be in place (its pods Running,
	// the rules' copies written), and for the cluster to be quiet before the benchmark.
	bigConverge = 20 * time.Minute
)

// bigSteps are the sizes the cluster grows through, in percent of the full size.
var bigSteps = []int{1, 10, 100}

// BenchmarkBigCluster measures what the manager binary costs in a big cluster that is not
// Quartet's, and with many objects that are. The binary is started as in
// BenchmarkManagerIdle (all four controllers, the harness's flags, behind the counting
// proxy), and measured in one run:
//
// Idle: no Quartet object in the cluster; s-start-to-ready-idle is the time from the start
// of the process to all four controllers' workers started (controller-runtime starts a
// controller's workers once every source it watches has synced its cache). After 20
// seconds MB-idle-rss is the median of five VmRSS readings, as in BenchmarkManagerIdle.
//
// The cluster then grows in three steps, to 1%, 10% and 100% of 100,000 ConfigMaps,
// 20,000 Secrets, 5,000 Deployments of 2 kwok pods each (10,000 pods) and 2,000
// namespaces; objects-<step> counts these five kinds (not the ReplicaSets, Events,
// ServiceAccounts and root CA ConfigMaps the cluster's own controllers add). Every
// namespace holds 50 ConfigMaps and 10 Secrets with 1 KiB of data each and two or three
// Deployments: small bodies, so that etcd on one machine holds it all. Once a step's pods
// run, the manager rests 20 seconds and MB-rss-<step> is measured the same way;
// watches-held-<step> is the number of watches the manager holds on the API server (the
// watch requests it opened through the proxy that are still open). MB-growth-unrelated is
// MB-rss-100pct minus MB-idle-rss.
//
// At full size the manager is stopped and started again: s-start-to-ready-100pct is its
// start to ready at that size, MB-rss-restarted-100pct its RSS 20 seconds later.
//
// Then 1,000 CopyratorRules in one namespace, each selecting a source ConfigMap of its
// own (1 KiB of data), copy into 10 namespaces their ServiceAccount was granted: 10,000
// copies. Once every copy exists and the restarted manager rested 20 seconds,
// MB-rss-rules is its RSS and watches-held-rules its watches; MB-owned-data is the data
// the copies carry (their keys and values, what Copyrator's byte limits count), in MB of
// 2^20 bytes, and x-growth-per-owned-MB is (MB-rss-rules − MB-idle-rss) ÷ MB-owned-data.
// MB-idle-heap and MB-heap-rules are the live heap that the manager's next garbage
// collection after the idle and the rules' RSS readings leaves (the runtime's gctrace, in
// whole MB), and x-heap-growth-per-owned-MB is (MB-heap-rules − MB-idle-heap) ÷
// MB-owned-data: what the manager keeps, without the memory the Go runtime holds between
// collections (it lets the heap grow to twice the live heap, GOGC=100, before it collects).
//
// The benchmark first waits until no namespace is terminating (BenchmarkManagerIdle's
// are deleted when it ends). When it ends it deletes its namespaces and leaves their
// contents to kube-controller-manager, which takes many minutes: it runs last in its
// package.
func BenchmarkBigCluster(b *testing.B) {
	env.Require(b)
	ctx := context.Background()
	waitQuietCluster(ctx, b)
	cfg := benchutil.TunedConfig(env.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	md, err := metadata.NewForConfig(benchutil.TunedConfig(env.Config))
	require.NoError(b, err)
	proxy := benchutil.StartCountingProxy(b, env.Config)
	kubeconfig := "--kubeconfig=" + proxy.Kubeconfig(b)
	held := func() float64 { return float64(benchutil.Sum(proxy.OpenWatches())) }

	// The Go runtime prints each collection's live heap (gctrace): what the manager keeps,
	// apart from what the collector has yet to free or return.
	b.Setenv("GODEBUG", "gctrace=1")
	m, ready := startUntilReady(b, "big", kubeconfig)
	b.ReportMetric(ready.Seconds(), "s-start-to-ready-idle")
	time.Sleep(idleSettle)
	idleRSS, samples := medianRSS(b, m.cmd.Process.Pid)
	b.ReportMetric(idleRSS, "MB-idle-rss")
	idleHeap := liveHeapMB(b, m)
	b.ReportMetric(idleHeap, "MB-idle-heap")
	b.ReportMetric(held(), "watches-held-idle")
	b.Logf("idle: ready %s after the start; RSS samples %.1f MB; watches %v", ready.Round(time.Millisecond), samples,
		slices.Sorted(maps.Keys(proxy.OpenWatches())))

	var rss float64
	previous := 0
	for _, pct := range bigSteps {
		start := time.Now()
		objects := growCluster(ctx, b, cs, previous, pct)
		created := time.Since(start)
		waitForBigPods(ctx, b, md, m, bigDeployments*pct/100*bigReplicas)
		converged := time.Since(start)
		time.Sleep(idleSettle)
		require.False(b, m.exited(), "the manager exited:\n%s", m.logs())
		rss, samples = medianRSS(b, m.cmd.Process.Pid)
		step := fmt.Sprintf("%dpct", pct)
		b.ReportMetric(float64(objects), "objects-"+step)
		b.ReportMetric(rss, "MB-rss-"+step)
		b.ReportMetric(held(), "watches-held-"+step)
		b.Logf("%d%%: %d objects, created in %s, pods running after %s; RSS samples %.1f MB", pct, objects,
			created.Round(time.Second), converged.Round(time.Second), samples)
		previous = pct
	}
	b.ReportMetric(rss-idleRSS, "MB-growth-unrelated")

	m.stop()
	waitFor(b, time.Minute, "the stopped manager's watches to close", func() bool { return len(proxy.OpenWatches()) == 0 })
	m, ready = startUntilReady(b, "big-restarted", kubeconfig)
	time.Sleep(idleSettle)
	restartedRSS, samples := medianRSS(b, m.cmd.Process.Pid)
	b.ReportMetric(ready.Seconds(), "s-start-to-ready-100pct")
	b.ReportMetric(restartedRSS, "MB-rss-restarted-100pct")
	b.Logf("restarted at full size: ready %s after the start; RSS samples %.1f MB", ready.Round(time.Millisecond), samples)

	copies, contentBytes := copyWithRules(ctx, b, cs, md, m)
	time.Sleep(idleSettle)
	require.False(b, m.exited(), "the manager exited:\n%s", m.logs())
	rulesRSS, samples := medianRSS(b, m.cmd.Process.Pid)
	rulesHeap := liveHeapMB(b, m)
	owned := float64(contentBytes) / (1 << 20)
	b.ReportMetric(rulesHeap, "MB-heap-rules")
	b.ReportMetric((rulesHeap-idleHeap)/owned, "x-heap-growth-per-owned-MB")
	b.ReportMetric(float64(copies), "copies")
	b.ReportMetric(owned, "MB-owned-data")
	b.ReportMetric(rulesRSS, "MB-rss-rules")
	b.ReportMetric(held(), "watches-held-rules")
	b.ReportMetric((rulesRSS-idleRSS)/owned, "x-growth-per-owned-MB")
	b.Logf("rules: RSS samples %.1f MB; watches %v", samples, slices.Sorted(maps.Keys(proxy.OpenWatches())))
}

// gcLine matches the live heap of a gctrace line: "gc 42 @167.750s 0%: …, 70->70->36 MB, …".
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @.* \d+->\d+->(\d+) MB`)

// liveHeapMB waits for the manager's next garbage collection (GODEBUG=gctrace=1; the
// runtime collects at least every two minutes) and returns the live heap it left, in MB.
func liveHeapMB(b *testing.B, m *manager) float64 {
	b.Helper()
	before := len(gcLine.FindAllStringSubmatch(m.logs(), -1))
	var all [][]string
	waitFor(b, 3*time.Minute, "the manager's next garbage collection", func() bool {
		if all = gcLine.FindAllStringSubmatch(m.logs(), -1); len(all) > before {
			return true
		}
		time.Sleep(time.Second)
		return false
	})
	v, err := strconv.ParseFloat(all[len(all)-1][1], 64)
	require.NoError(b, err)
	return v
}

// startUntilReady starts the manager binary behind the proxy's kubeconfig and returns it
// with the time from its start to all four controllers' workers started.
func startUntilReady(b *testing.B, name, kubeconfig string) (*manager, time.Duration) {
	b.Helper()
	managerBinary(b) // built before the clock starts
	start := time.Now()
	m := startManager(b, name, kubeconfig)
	waitFor(b, 5*time.Minute, "the four controllers to start their workers", func() bool {
		if m.exited() {
			b.Fatalf("the manager exited:\n%s", m.logs())
		}
		return strings.Count(m.logs(), `"Starting workers"`) >= 4
	})
	return m, time.Since(start)
}

// waitQuietCluster waits until no namespace is being deleted: a benchmark run before this
// one (BenchmarkManagerIdle) leaves its namespaces to kube-controller-manager, whose
// deletions would otherwise run through this benchmark's measurements.
func waitQuietCluster(ctx context.Context, b *testing.B) {
	b.Helper()
	var terminating []string
	quiet := benchutil.WaitFor(ctx, bigConverge, func() bool {
		var list corev1.NamespaceList
		require.NoError(b, env.Client.List(ctx, &list))
		terminating = terminating[:0]
		for _, ns := range list.Items {
			if ns.Status.Phase == corev1.NamespaceTerminating {
				terminating = append(terminating, ns.Name)
			}
		}
		if len(terminating) == 0 {
			return true
		}
		time.Sleep(2 * time.Second)
		return false
	})
	if !quiet {
		b.Fatalf("%d namespaces still terminating after %s, among them %v", len(terminating), bigConverge,
			terminating[:min(len(terminating), 5)])
	}
}

// growCluster grows the cluster from previous to pct percent of its full size: the new
// namespaces, then the ConfigMaps, Secrets and Deployments that go into them (deleted with
// the namespaces when the benchmark ends; kube-controller-manager removes their contents).
// It returns how many objects of the five kinds the cluster holds now.
func growCluster(ctx context.Context, b *testing.B, cs kubernetes.Interface, previous, pct int) int {
	b.Helper()
	part := func(full int) int { return full*pct/100 - full*previous/100 }
	namespaces := namespaceList(b, fmt.Sprintf("big-%dpct", pct), part(bigNamespaces), nil)
	// spread creates n objects, the same number in each new namespace (give or take one).
	spread := func(n int, create func(ns, name string) error) {
		require.NoError(b, benchutil.Parallel(ctx, n, func(i int) error {
			return create(namespaces[i*len(namespaces)/n], fmt.Sprintf("big-%d", i))
		}))
	}
	spread(part(bigConfigMaps), func(ns, name string) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: benchutil.Payload(bigBody)}, metav1.CreateOptions{})
		return err
	})
	spread(part(bigSecrets), func(ns, name string) error {
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: benchutil.Payload(bigBody)}, metav1.CreateOptions{})
		return err
	})
	spread(part(bigDeployments), func(ns, name string) error {
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, testenv.Deployment(ns, name, bigReplicas), metav1.CreateOptions{})
		return err
	})
	return (bigConfigMaps + bigSecrets + bigDeployments*(1+bigReplicas) + bigNamespaces) * pct / 100
}

// waitForBigPods waits until want pods run in the benchmark's namespaces, and fails when
// the manager exits meanwhile.
func waitForBigPods(ctx context.Context, b *testing.B, md metadata.Interface, m *manager, want int) {
	b.Helper()
	running := 0
	done := benchutil.WaitFor(ctx, bigConverge, func() bool {
		require.False(b, m.exited(), "the manager exited:\n%s", m.logs())
		running = 0
		opts := metav1.ListOptions{FieldSelector: "status.phase=Running", Limit: 5000}
		for {
			list, err := md.Resource(corev1.SchemeGroupVersion.WithResource("pods")).List(ctx, opts)
			require.NoError(b, err)
			for _, p := range list.Items {
				if strings.HasPrefix(p.Namespace, "big-") {
					running++
				}
			}
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
		if running >= want {
			return true
		}
		time.Sleep(5 * time.Second)
		return false
	})
	if !done {
		b.Fatalf("%d of %d pods running after %s", running, want, bigConverge)
	}
}

// copyWithRules creates bigRules CopyratorRules in a namespace of their own, each copying
// its own source ConfigMap into bigRuleTargets namespaces granted to the rules'
// ServiceAccount, waits until every copy exists and returns the copies and the bytes of
// data they carry.
func copyWithRules(ctx context.Context, b *testing.B, cs kubernetes.Interface, md metadata.Interface, m *manager) (int, int64) {
	b.Helper()
	start := time.Now()
	ns := namespaceList(b, "big-rules", 1, nil)[0]
	targets := namespaceList(b, "big-copy", bigRuleTargets, nil)
	testenv.GrantCopies(b, env.Client, ns, copyratorrule.DefaultServiceAccountName, targets...)
	require.NoError(b, benchutil.Parallel(ctx, bigRules, func(i int) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("source-%d", i), Labels: map[string]string{"source": fmt.Sprint(i)}},
			Data: benchutil.Payload(bigBody)}, metav1.CreateOptions{})
		return err
	}))
	rule := func(i int) *flantv1.CopyratorRule {
		return &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rule-%d", i), Namespace: ns},
			Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeConfigMap,
				Selector: map[string]flantv1.LabelValue{"source": flantv1.LabelValue(fmt.Sprint(i))}, Namespaces: targets}}
	}
	// Registered after the manager started, so it runs before the manager is killed: the
	// rules' finalizers must not hold their namespace.
	b.Cleanup(func() {
		_ = benchutil.Parallel(context.Background(), bigRules, func(i int) error { forceDelete(rule(i)); return nil })
	})
	require.NoError(b, benchutil.Parallel(ctx, bigRules, func(i int) error { return env.Client.Create(ctx, rule(i)) }))

	copies := metav1.ListOptions{LabelSelector: copyratorrule.LabelManagedBy + "=" + copyratorrule.ManagedByValue}
	want, have := bigRules*bigRuleTargets, 0
	done := benchutil.WaitFor(ctx, bigConverge, func() bool {
		require.False(b, m.exited(), "the manager exited:\n%s", m.logs())
		have = 0
		for _, t := range targets {
			list, err := md.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(t).List(ctx, copies)
			require.NoError(b, err)
			have += len(list.Items)
		}
		if have >= want {
			return true
		}
		time.Sleep(2 * time.Second)
		return false
	})
	if !done {
		b.Fatalf("%d of %d copies after %s", have, want, bigConverge)
	}
	written := time.Since(start)

	var n int
	var content, whole int64
	for _, t := range targets {
		list, err := cs.CoreV1().ConfigMaps(t).List(ctx, copies)
		require.NoError(b, err)
		for i := range list.Items {
			cm := &list.Items[i]
			n++
			for k, v := range cm.Data {
				content += int64(len(k) + len(v))
			}
			for k, v := range cm.BinaryData {
				content += int64(len(k) + len(v))
			}
			j, err := json.Marshal(cm)
			require.NoError(b, err)
			whole += int64(len(j))
		}
	}
	b.Logf("rules: %d copies written %s after the rules' namespace was created; their data %.1f MB, %.1f MB as JSON objects",
		n, written.Round(time.Second), float64(content)/(1<<20), float64(whole)/(1<<20))
	return n, content
}
