package exchangerate

import (
	"context"
	"fmt"
	"maps"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/manager"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/fakeupstream"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The benchmarks run on the package's full local cluster and measure their own raw-create
// baseline on the same API server in the same run.

const (
	benchNamespaces = 100
	// benchRefresh is the refresh interval of the benchmark's manager (the one flag it sets
	// besides the upstream's URL): short enough to wait for several refreshes.
	benchRefresh = 30 * time.Second
	// benchUnchangedRefreshes is how many refreshes without new data are counted.
	benchUnchangedRefreshes = 3
	// benchWorkersEnv overrides --exchangerate-workers for a sweep (unset: the shipped
	// default): QUARTET_BENCH_EXCHANGERATE_WORKERS=8 go test -bench ….
	benchWorkersEnv = "QUARTET_BENCH_EXCHANGERATE_WORKERS"
)

// benchPair is one of the 30 currencies the ExchangeRates price: the 29 the ECB
// publishes, against EUR, and EUR itself, against USD.
type benchPair struct{ currency, base string }

func benchPairs() []benchPair {
	var pairs []benchPair
	for c := range fakeupstream.DefaultRates() {
		pairs = append(pairs, benchPair{c, "EUR"})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].currency < pairs[j].currency })
	return append(pairs, benchPair{"EUR", "USD"})
}

// BenchmarkExchangeRates1000 creates 1,000 ExchangeRates over 30 currencies and measures
// how long until every ConfigMap holds the right rate, against raw-creating 1,000
// ConfigMaps; it counts upstream requests and API writes for the initial fill, for
// refreshes that bring no new data and for one refresh that changes every rate.
func BenchmarkExchangeRates1000(b *testing.B) { benchExchangeRates(b, 1000) }

// BenchmarkExchangeRates10000 is BenchmarkExchangeRates1000 with 10,000 ExchangeRates.
func BenchmarkExchangeRates10000(b *testing.B) { benchExchangeRates(b, 10000) }

// BenchmarkExchangeRatesTwoSources10000 is BenchmarkExchangeRates10000 with every
// ExchangeRate naming two sources (spec.sources: ecb, then frankfurter-v2, which
// cross-checks it): the upstream requests are counted per source and must stay one per
// source per refresh, whatever the number of ExchangeRates (issue 25).
func BenchmarkExchangeRatesTwoSources10000(b *testing.B) {
	benchExchangeRates(b, 10000, benchTwoSources...)
}

// benchTwoSources are the spec.sources of the two-source benchmarks.
var benchTwoSources = []operatorsv1.ExchangeRateSource{{Type: operatorsv1.SourceTypeECB}, {Type: operatorsv1.SourceTypeFrankfurterV2}}

// benchPaths are the upstream documents the benchmark's ExchangeRates fetch: the ECB's
// without spec.sources (the manager's default), one per source with them.
func benchPaths(sources []operatorsv1.ExchangeRateSource) []string {
	if len(sources) == 0 {
		return []string{fakeupstream.ECBPath}
	}
	paths := map[operatorsv1.SourceType]string{operatorsv1.SourceTypeECB: fakeupstream.ECBPath,
		operatorsv1.SourceTypeFrankfurter: fakeupstream.FrankfurterPath, operatorsv1.SourceTypeFrankfurterV2: fakeupstream.FrankfurterV2Path}
	var out []string
	for _, s := range sources {
		out = append(out, paths[s.Type])
	}
	return out
}

// perSource returns the requests each path saw: the most and the fewest of them, and all.
func perSource(srv *fakeupstream.Server, paths []string) (most, fewest int, all map[string]int) {
	all = map[string]int{}
	for i, p := range paths {
		n := srv.Requests(p)
		all[p] = n
		if i == 0 || n > most {
			most = n
		}
		if i == 0 || n < fewest {
			fewest = n
		}
	}
	return most, fewest, all
}

// benchExchangeRates runs the manager as shipped: this controller's default Options
// (workers included) with only the upstreams' URLs and a short refresh interval set, and
// the manager's default client limits (no client-side rate limit). With sources, every
// ExchangeRate names them; the imitation upstream serves all of them and counts each
// document's requests.
func benchExchangeRates(b *testing.B, n int, sources ...operatorsv1.ExchangeRateSource) {
	b.Helper()
	env.Require(b)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(benchutil.TunedConfig(env.Config))
	if err != nil {
		b.Fatal(err)
	}
	// ExchangeRates are created as fast as the baseline creates ConfigMaps.
	creator, err := client.New(benchutil.TunedConfig(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	// The benchmark's own informers follow the ConfigMaps and ExchangeRates.
	observer, err := cache.New(benchutil.TunedConfig(env.Config), cache.Options{Scheme: env.Scheme,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue})},
		}})
	if err != nil {
		b.Fatal(err)
	}
	observeCtx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	go func() { _ = observer.Start(observeCtx) }()
	id := rand.String(4)
	namespaces, err := benchutil.CreateNamespaces(ctx, cs, "xrbench-"+id, benchNamespaces)
	if err != nil {
		b.Fatal(err)
	}
	// The next benchmark's manager watches all namespaces: it must not find these
	// ExchangeRates. Cleanups run last in first out, so this runs after the manager stopped.
	b.Cleanup(func() { deleteNamespaces(b, cs, namespaces) })
	pairs := benchPairs()
	if len(pairs) != 30 {
		b.Fatalf("want 30 currencies, have %d", len(pairs))
	}

	for i := 0; i < b.N; i++ {
		// Baseline: n ConfigMaps, n/100 per namespace, created by a tuned client-go loop
		// (32 workers, no client-side limit).
		var raw time.Duration
		cpuRaw := cpuSeconds()
		for j := 0; j < n/benchNamespaces; j++ {
			d, err := benchutil.RawCreateConfigMaps(ctx, cs, namespaces, fmt.Sprintf("raw-%d-%d", i, j), 64)
			if err != nil {
				b.Fatal(err)
			}
			raw += d
		}
		rawCPU := benchutil.Sum(cpuDiffs(cpuRaw, cpuSeconds()))

		srv, err := fakeupstream.Start("127.0.0.1:0", today(), fakeupstream.DefaultRates())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Close() })
		calls := &benchutil.CallCounter{}
		cfg := managerConfig(env.Config)
		calls.Wrap(cfg)
		opts := &Options{URL: srv.URL(), FrankfurterURL: srv.URL(), RefreshInterval: benchRefresh}
		paths := benchPaths(sources)
		if w := os.Getenv(benchWorkersEnv); w != "" {
			if opts.MaxConcurrentReconciles, err = strconv.Atoi(w); err != nil {
				b.Fatalf("%s: %v", benchWorkersEnv, err)
			}
		}
		stopManager := testenv.StartManager(b, cfg, scope.Namespaces{}, opts.Setup) // all namespaces, as without WATCH_NAMESPACE

		name := func(k int) (ns, name string) { return namespaces[k%benchNamespaces], fmt.Sprintf("xr-%d-%d", i, k) }
		expect := func(rates map[string]string) (cms, statuses map[string]map[string]string) {
			tab := mustTable(b, "ecb", today(), rates)
			cms, statuses = map[string]map[string]string{}, map[string]map[string]string{}
			for k := 0; k < n; k++ {
				p := pairs[k%len(pairs)]
				r, err := tab.Rate(p.base, p.currency)
				if err != nil {
					b.Fatal(err)
				}
				ns, nm := name(k)
				cms[ns+"/"+nm] = map[string]string{KeyRate: r, KeyCurrency: p.currency, KeyBase: p.base}
				statuses[ns+"/"+nm] = map[string]string{"rate": r, "ready": string(metav1.ConditionTrue)}
			}
			return cms, statuses
		}

		// Fill: create the ExchangeRates, wait until every ConfigMap is right, then until
		// every status is.
		wantCMs, wantStatuses := expect(fakeupstream.DefaultRates())
		cmw := watchObjects(b, observer, &corev1.ConfigMap{})
		calls.Reset()
		reconciled := testenv.Reconciles(b, "exchangerate")
		cpuBefore := cpuSeconds()
		start := time.Now()
		err = benchutil.Parallel(ctx, n, func(k int) error {
			p := pairs[k%len(pairs)]
			ns, nm := name(k)
			xr := newXR(ns, nm, p.currency, p.base)
			xr.Spec.Sources = sources
			return creator.Create(ctx, xr)
		})
		if err != nil {
			b.Fatal(err)
		}
		created := time.Since(start)
		_, last := cmw.until(b, wantCMs, 10*time.Minute)
		fill := last.Sub(start)
		fillCPU := cpuDiffs(cpuBefore, cpuSeconds())
		fillRequests, _, _ := perSource(srv, paths)
		// Statuses trail the ConfigMaps; the benchmark's ExchangeRate informer starts only now,
		// so that it does not compete with the fill for CPU.
		xrw := watchObjects(b, observer, &operatorsv1.ExchangeRate{})
		xrw.until(b, wantStatuses, 5*time.Minute)
		// Events (one ConfigMapCreated per ExchangeRate) are sent asynchronously: let them land.
		waitQuiet(b, calls)
		fillPasses := testenv.Reconciles(b, "exchangerate") - reconciled
		fillWrites := writes(calls, "")
		fillCMWrites, fillStatusWrites, fillEvents := writes(calls, "/configmaps"), writes(calls, "/status"), writes(calls, "/events")

		// Unchanged refreshes: the upstream answers 304. Every ExchangeRate is reconciled
		// once per refresh and nothing may be written.
		calls.Reset()
		srv.ResetCounts()
		reconciled = testenv.Reconciles(b, "exchangerate")
		unchangedStart := time.Now()
		waitFor(b, time.Duration(benchUnchangedRefreshes+1)*2*benchRefresh, func() bool {
			_, fewest, _ := perSource(srv, paths)
			return fewest >= benchUnchangedRefreshes && testenv.Reconciles(b, "exchangerate")-reconciled >= float64(benchUnchangedRefreshes*n)
		}, func() string {
			_, _, all := perSource(srv, paths)
			return fmt.Sprintf("upstream requests %v and %.0f reconciles of %d ExchangeRates, want %d refreshes",
				all, testenv.Reconciles(b, "exchangerate")-reconciled, n, benchUnchangedRefreshes)
		})
		unchangedWrites := writes(calls, "")
		unchangedPasses := testenv.Reconciles(b, "exchangerate") - reconciled
		unchanged := time.Since(unchangedStart)
		notModified := srv.NotModified()
		unchangedRequests, _, unchangedBySource := perSource(srv, paths)

		// Changed refresh: a new publication changes every rate; the next refresh must carry
		// it to all ConfigMaps and statuses with one upstream request.
		newRates := map[string]string{}
		for c, r := range fakeupstream.DefaultRates() {
			newRates[c] = r + "7" // one more digit: every rate changes
		}
		wantCMs, wantStatuses = expect(newRates)
		waitQuiet(b, calls)
		calls.Reset()
		srv.ResetCounts()
		srv.SetRates(today(), newRates)
		first, lastRefresh := cmw.until(b, wantCMs, benchRefresh+10*time.Minute)
		refreshRequests, _, refreshBySource := perSource(srv, paths)
		xrw.until(b, wantStatuses, 5*time.Minute)
		waitQuiet(b, calls)
		stopManager() // before the counts are read: nothing may be in flight
		changedCMWrites, changedStatusWrites, changedWrites := writes(calls, "/configmaps"), writes(calls, "/status"), writes(calls, "")

		workers := opts.MaxConcurrentReconciles // Setup applied the defaults
		b.Logf("%d ExchangeRates, %d workers, %d source(s): created in %s, ConfigMaps right after %s (CPU seconds: %s); "+
			"fill writes %d (ConfigMaps %d, status %d, Events %d); %s of unchanged refreshes: upstream requests %v (%d not modified), "+
			"%.0f reconciles, %d writes; changed refresh: upstream requests %v, %d writes", n, workers, len(paths), created.Round(time.Millisecond),
			fill.Round(time.Millisecond), formatCPU(fillCPU), fillWrites, fillCMWrites, fillStatusWrites,
			fillEvents, unchanged.Round(time.Second), unchangedBySource, notModified, unchangedPasses, unchangedWrites, refreshBySource, changedWrites)
		b.ReportMetric(float64(workers), "workers")
		b.ReportMetric(fill.Seconds(), fmt.Sprintf("s-fill-%d-exchangerates", n))
		b.ReportMetric(created.Seconds(), fmt.Sprintf("s-create-%d-exchangerates", n))
		b.ReportMetric(raw.Seconds(), fmt.Sprintf("s-raw-create-%d-configmaps", n))
		b.ReportMetric(fill.Seconds()/raw.Seconds(), "x-raw-create")
		// CPU time is what the fill costs whatever else the machine runs: all of the local
		// cluster's processes and the benchmark's, against the same for the raw baseline.
		b.ReportMetric(benchutil.Sum(fillCPU)/rawCPU, "x-raw-create-cpu")
		b.ReportMetric(fillCPU["kube-apiserver"]/float64(n)*1000, "apiserver-cpu-ms/exchangerate/fill")
		// The upstream requests are the busiest source's: per source (the others' are in the log).
		b.ReportMetric(float64(fillRequests), fmt.Sprintf("upstream-requests/fill-of-%d", n))
		b.ReportMetric(float64(fillWrites)/float64(n), "controller-api-writes/exchangerate")
		b.ReportMetric(float64(fillEvents)/float64(n), "event-writes/exchangerate/fill")
		b.ReportMetric(float64(unchangedWrites)/float64(benchUnchangedRefreshes*n), "api-writes/exchangerate/unchanged-refresh")
		b.ReportMetric(unchangedPasses/float64(benchUnchangedRefreshes*n), "reconciles/exchangerate/unchanged-refresh")
		b.ReportMetric(float64(unchangedRequests)/benchUnchangedRefreshes, "upstream-requests/unchanged-refresh")
		b.ReportMetric(float64(refreshRequests), "upstream-requests/refresh")
		b.ReportMetric(float64(len(paths)), "sources")
		b.ReportMetric(lastRefresh.Sub(first).Seconds(), fmt.Sprintf("s-refresh-spread-%d-configmaps", n))
		b.ReportMetric(float64(changedCMWrites)/float64(n), "configmap-writes/exchangerate/changed-refresh")
		b.ReportMetric(float64(changedStatusWrites)/float64(n), "status-writes/exchangerate/changed-refresh")
		b.ReportMetric(float64(changedWrites)/float64(n), "api-writes/exchangerate/changed-refresh")
		b.ReportMetric(fillPasses/float64(n), "reconciles/exchangerate/fill")
	}
}

// cpuSeconds returns the CPU time used so far by this process (the manager, the
// ExchangeRate creator, the informers) and by each of its child processes (the local
// cluster: kube-apiserver, etcd, kube-controller-manager, …), by command name.
func cpuSeconds() map[string]float64 {
	out := map[string]float64{}
	add := func(pid, name string) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return
		}
		// Fields after the command name (which may hold spaces) start at state; utime and
		// stime are fields 14 and 15 of the whole line, in clock ticks (100 per second).
		_, rest, _ := strings.Cut(string(stat), ") ")
		f := strings.Fields(rest)
		if len(f) < 13 {
			return
		}
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		out[name] += (utime + stime) / 100
	}
	add("self", "benchmark process")
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		children, _ := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		for _, pid := range strings.Fields(string(children)) {
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			add(pid, strings.TrimSpace(string(comm)))
		}
	}
	return out
}

// cpuDiffs is the CPU seconds each process used between before and after.
func cpuDiffs(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, s := range after {
		out[name] = s - before[name]
	}
	return out
}

// formatCPU lists CPU seconds by process, largest first.
func formatCPU(used map[string]float64) string {
	type use struct {
		name string
		s    float64
	}
	var uses []use
	for name, s := range used {
		uses = append(uses, use{name, s})
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].s > uses[j].s })
	var parts []string
	for _, u := range uses {
		if u.s >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %.1f", u.name, u.s))
		}
	}
	return strings.Join(parts, ", ")
}

// managerConfig is the manager's rest.Config as main.go builds it by default: no
// client-side rate limit (a negative QPS), the API server's flow control governs.
func managerConfig(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	manager.SetClientLimits(cfg, manager.DefaultKubeAPIQPS, manager.DefaultKubeAPIBurst)
	if cfg.QPS >= 0 {
		panic("the manager ships without a client-side rate limit (negative QPS)")
	}
	return cfg
}

// writes counts the write requests (POST, PATCH, PUT, DELETE) whose path contains part
// ("": all of them).
func writes(c *benchutil.CallCounter, part string) int {
	n := 0
	for k, v := range c.Snapshot() {
		verb, path, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PATCH", "PUT", "DELETE":
			if strings.Contains(path, part) {
				n += v
			}
		}
	}
	return n
}

// deleteNamespaces deletes namespaces and waits until they and everything in them are gone.
func deleteNamespaces(b testing.TB, cs kubernetes.Interface, namespaces []string) {
	b.Helper()
	ctx := context.Background()
	for _, ns := range namespaces {
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.Error(err)
			return
		}
	}
	ours := map[string]bool{}
	for _, ns := range namespaces {
		ours[ns] = true
	}
	left := 0
	waitFor(b, 10*time.Minute, func() bool {
		l, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		left = 0
		for _, ns := range l.Items {
			if ours[ns.Name] {
				left++
			}
		}
		return left == 0
	}, func() string { return fmt.Sprintf("%d of %d namespaces still there", left, len(namespaces)) })
}

// quiet is how long no write must be counted before a phase is over: Events are sent
// asynchronously and trail the writes of the reconciles.
const quiet = 3 * time.Second

// waitQuiet waits until no write was counted for quiet, so a phase's trailing writes are
// not counted in the next.
func waitQuiet(b testing.TB, c *benchutil.CallCounter) {
	b.Helper()
	last, since := writes(c, ""), time.Now()
	waitFor(b, 5*time.Minute, func() bool {
		if w := writes(c, ""); w != last {
			last, since = w, time.Now()
		}
		return time.Since(since) >= quiet
	}, func() string { return fmt.Sprintf("writes went on (%d)", last) })
}

// waitFor polls cond until it holds; after timeout it fails with what it saw.
func waitFor(b testing.TB, timeout time.Duration, cond func() bool, saw func() string) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("after %s: %s", timeout, saw())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// objWatch records, from an informer (it lists again when the API server ends a watch
// that fell behind), what each object last showed (a ConfigMap's data, an ExchangeRate's
// status rate and Ready) and when that last changed.
type objWatch struct {
	mu   sync.Mutex
	data map[string]map[string]string // ns/name → last seen data
	at   map[string]time.Time
}

// watchObjects starts recording the objects of obj's kind in c's informer.
func watchObjects(b testing.TB, c cache.Cache, obj client.Object) *objWatch {
	b.Helper()
	ow := &objWatch{data: map[string]map[string]string{}, at: map[string]time.Time{}}
	inf, err := c.GetInformer(context.Background(), obj)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    ow.record,
		UpdateFunc: func(_, obj any) { ow.record(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	return ow
}

func (ow *objWatch) record(obj any) {
	key, data, ok := observed(obj)
	if !ok {
		return
	}
	now := time.Now()
	ow.mu.Lock()
	defer ow.mu.Unlock()
	if !maps.Equal(ow.data[key], data) {
		ow.data[key], ow.at[key] = data, now
	}
}

// observed is what until compares of obj.
func observed(obj any) (key string, data map[string]string, ok bool) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return o.Namespace + "/" + o.Name, o.Data, true
	case *operatorsv1.ExchangeRate:
		ready := ""
		if c := meta.FindStatusCondition(o.Status.Conditions, operatorsv1.ConditionReady); c != nil {
			ready = string(c.Status)
		}
		return o.Namespace + "/" + o.Name, map[string]string{"rate": o.Status.Rate, "ready": ready}, true
	}
	return "", nil, false
}

// until waits until every object in want holds its wanted keys; it returns when the first
// and the last of them got there.
func (ow *objWatch) until(b testing.TB, want map[string]map[string]string, timeout time.Duration) (first, last time.Time) {
	b.Helper()
	right := 0
	waitFor(b, timeout, func() bool {
		ow.mu.Lock()
		defer ow.mu.Unlock()
		right = 0
		for key, kv := range want {
			ok := true
			for k, v := range kv {
				ok = ok && ow.data[key][k] == v
			}
			if ok {
				right++
			}
		}
		return right == len(want)
	}, func() string { return fmt.Sprintf("%d of %d objects right", right, len(want)) })
	ow.mu.Lock()
	defer ow.mu.Unlock()
	for key := range want {
		t := ow.at[key]
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}
