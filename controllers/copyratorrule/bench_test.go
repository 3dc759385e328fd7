package copyratorrule

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/operator"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The benchmarks run on the package's envtest API server (etcd + kube-apiserver on this
// machine); each measures its own raw-create baseline on the same server in the same run.

const (
	benchTargets     = 1000
	benchPayloadSize = 4 << 10 // bytes of Secret data
)

// benchEnv is one benchmark's manager, clientset and target namespaces.
type benchEnv struct {
	id      string
	cs      kubernetes.Interface
	meta    metadata.Interface
	src     string
	targets []string
	calls   *benchutil.CallCounter
}

// newBenchEnv starts a manager configured for throughput (client rate limits out of the
// way, as --kube-api-qps/--kube-api-burst allow) and creates n target namespaces.
func newBenchEnv(b *testing.B, n int) *benchEnv {
	b.Helper()
	env.Require(b)
	be := &benchEnv{id: suffix(), calls: &benchutil.CallCounter{}}
	var err error
	be.cs, err = kubernetes.NewForConfig(benchutil.TunedConfig(env.Config))
	if err != nil {
		b.Fatal(err)
	}
	be.meta, err = metadata.NewForConfig(benchutil.TunedConfig(env.Config))
	if err != nil {
		b.Fatal(err)
	}
	be.src = testenv.Namespace(b, env.Client, "bsrc", nil)
	be.targets = be.namespaces(b, "bdst", n)
	cfg := benchutil.TunedConfig(env.Config)
	be.calls.Wrap(cfg)
	testenv.StartManager(b, cfg, operator.Shared{}, new(Options).Setup)
	return be
}

// namespaces creates n namespaces labelled copytest=<id>.
func (be *benchEnv) namespaces(b *testing.B, prefix string, n int) []string {
	b.Helper()
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%s-%d", prefix, be.id, i)
	}
	err := benchutil.Parallel(ctx, n, func(i int) error {
		_, err := be.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: names[i], Labels: map[string]string{"copytest": be.id}}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return names
}

// plainNamespaces creates n namespaces no rule targets (for the raw baseline).
func (be *benchEnv) plainNamespaces(b *testing.B, prefix string, n int) []string {
	b.Helper()
	names, err := benchutil.CreateNamespaces(context.Background(), be.cs, fmt.Sprintf("%s-%s", prefix, be.id), n)
	if err != nil {
		b.Fatal(err)
	}
	return names
}

func (be *benchEnv) source(name string) *corev1.Secret {
	data := map[string][]byte{}
	for k, v := range benchutil.Payload(benchPayloadSize) {
		data[k] = []byte(v)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: be.src, Name: name, Labels: map[string]string{"bench-source": name}},
		Type: corev1.SecretTypeOpaque, Data: data}
}

// copyWatch records, per namespace, when a copy of the rule first satisfied match. It is a
// metadata-only informer (the measurement should not cost the machine a decode of every
// copy's body), so a watch the API server closes under load is resumed.
type copyWatch struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	match func(metav1.Object) bool
}

// watchCopies starts watching the rule's copies; start it before the measured action.
func (be *benchEnv) watchCopies(b *testing.B, rule string, match func(metav1.Object) bool) *copyWatch {
	b.Helper()
	cw := &copyWatch{seen: map[string]time.Time{}, match: match}
	inf := metadatainformer.NewFilteredMetadataInformer(be.meta, corev1.SchemeGroupVersion.WithResource("secrets"), metav1.NamespaceAll, 0,
		toolscache.Indexers{}, func(o *metav1.ListOptions) {
			o.LabelSelector = LabelRule + "=" + rule + "," + LabelRuleNamespace + "=" + be.src
		}).Informer()
	record := func(obj any) {
		if s, ok := obj.(metav1.Object); ok && cw.match(s) {
			now := time.Now()
			cw.mu.Lock()
			if _, dup := cw.seen[s.GetNamespace()]; !dup {
				cw.seen[s.GetNamespace()] = now
			}
			cw.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("copy watch did not sync")
	}
	return cw
}

// until waits until every namespace in nss has a matching copy and returns the time the
// last one was seen.
func (cw *copyWatch) until(b *testing.B, nss []string, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		cw.mu.Lock()
		var last time.Time
		missing := 0
		for _, ns := range nss {
			t, ok := cw.seen[ns]
			if !ok {
				missing++
			} else if t.After(last) {
				last = t
			}
		}
		cw.mu.Unlock()
		if missing == 0 {
			return last
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d copies missing after %s", missing, len(nss), timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rounds is how often each figure is measured; benchmarks report medians, because the
// machine they run on is shared and single runs vary by tens of percent.
const rounds = 3

// rawCreate is benchutil's raw-create baseline of Secrets named name into namespaces nss,
// with client-go's default wire format (JSON) or with protobuf (what controller-runtime's
// client, and so the manager, uses for built-in kinds).
func rawCreate(b *testing.B, nss []string, name string, protobuf bool) time.Duration {
	b.Helper()
	cfg := benchutil.TunedConfig(env.Config)
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	d, err := benchutil.RawCreateSecrets(context.Background(), cs, nss, name, benchPayloadSize)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// rawPatch JSON-patches the data of one Secret named name in every namespace with a
// tuned client (32 workers): the physical limit of updating copies.
func rawPatch(b *testing.B, be *benchEnv, nss []string, name string, round int) time.Duration {
	b.Helper()
	ctx := context.Background()
	value := []byte(strings.Repeat(strconv.Itoa(round%10), benchPayloadSize))
	patch := mustJSON([]jsonPatchOp{{Op: "add", Path: "/data", Value: map[string][]byte{"payload": value}}})
	start := time.Now()
	err := benchutil.Parallel(ctx, len(nss), func(i int) error {
		_, err := be.cs.CoreV1().Secrets(nss[i]).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func (be *benchEnv) rule(name string) *flantv1.CopyratorRule {
	r := ruleFor(be.src, be.id, flantv1.RuleTypeSecret)
	r.Name = name
	r.Spec.Selector = map[string]flantv1.LabelValue{"bench-source": flantv1.LabelValue(name)}
	return r
}

// BenchmarkFanOut1000 creates a rule whose one Secret goes to 1,000 namespaces and compares
// the time until the last copy exists with a tuned client creating 1,000 Secrets of the
// same size (32 workers) into 1,000 other namespaces, in JSON and in protobuf. Each round
// measures all three back to back (a new Secret name each round, same namespaces); the
// figures are medians over the rounds, the ratios medians of the rounds' ratios.
func BenchmarkFanOut1000(b *testing.B) {
	be := newBenchEnv(b, benchTargets)
	ctx := context.Background()
	rawNS := be.plainNamespaces(b, "raw", benchTargets)
	for i := 0; i < b.N; i++ {
		var fanout, raw, proto, ratio, ratioProto, writes []float64
		for r := range rounds {
			rawJSON := rawCreate(b, rawNS, fmt.Sprintf("raw-json-%d-%d", i, r), false).Seconds()
			rawProto := rawCreate(b, rawNS, fmt.Sprintf("raw-proto-%d-%d", i, r), true).Seconds()

			name := fmt.Sprintf("fanout-%d-%d", i, r)
			if _, err := be.cs.CoreV1().Secrets(be.src).Create(ctx, be.source(name), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			rule := be.rule(name)
			cw := be.watchCopies(b, rule.Name, func(metav1.Object) bool { return true })
			be.calls.Reset()
			start := time.Now()
			createRule(b, rule)
			d := cw.until(b, be.targets, 5*time.Minute).Sub(start).Seconds()
			writes = append(writes, float64(be.calls.Total("POST", "PATCH", "PUT", "DELETE"))/benchTargets)

			fanout, raw, proto = append(fanout, d), append(raw, rawJSON), append(proto, rawProto)
			ratio, ratioProto = append(ratio, d/rawJSON), append(ratioProto, d/rawProto)
		}
		b.ReportMetric(median(ratio), "x-raw-create")
		b.ReportMetric(median(ratioProto), "x-raw-create-protobuf")
		b.ReportMetric(median(fanout), "s-fanout-1000-copies")
		b.ReportMetric(median(raw), "s-raw-create-1000-secrets")
		b.ReportMetric(median(proto), "s-raw-create-1000-secrets-protobuf")
		b.ReportMetric(median(writes), "api-writes/copy")
	}
}

// BenchmarkUpdatePropagation1000 changes a Secret that has 1,000 copies and measures the time
// until every copy holds the new content, next to a tuned client JSON-patching the data of
// 1,000 Secrets of the same size right before; medians over the rounds.
func BenchmarkUpdatePropagation1000(b *testing.B) {
	be := newBenchEnv(b, benchTargets)
	ctx := context.Background()
	name := "update"
	if _, err := be.cs.CoreV1().Secrets(be.src).Create(ctx, be.source(name), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rule := be.rule(name)
	cw := be.watchCopies(b, rule.Name, func(metav1.Object) bool { return true })
	createRule(b, rule)
	cw.until(b, be.targets, 5*time.Minute)
	rawNS := be.plainNamespaces(b, "raw-u", benchTargets)
	rawCreate(b, rawNS, "raw", false)
	for i := 0; i < b.N; i++ {
		var update, raw, ratio, writes []float64
		for r := range rounds {
			round := i*rounds + r
			rawD := rawPatch(b, be, rawNS, "raw", round).Seconds()
			live, err := be.cs.CoreV1().Secrets(be.src).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			live.Data["payload"] = []byte(strings.Repeat(strconv.Itoa(round%10), benchPayloadSize))
			want := contentHash(live)
			uw := be.watchCopies(b, rule.Name, func(s metav1.Object) bool { return s.GetAnnotations()[AnnotationContentHash] == want })
			be.calls.Reset()
			start := time.Now()
			if _, err := be.cs.CoreV1().Secrets(be.src).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			d := uw.until(b, be.targets, 5*time.Minute).Sub(start).Seconds()
			writes = append(writes, float64(be.calls.Total("POST", "PATCH", "PUT", "DELETE"))/benchTargets)
			update, raw, ratio = append(update, d), append(raw, rawD), append(ratio, d/rawD)
		}
		b.ReportMetric(median(update), "s-update-1000-copies")
		b.ReportMetric(median(raw), "s-raw-patch-1000-secrets")
		b.ReportMetric(median(ratio), "x-raw-patch")
		b.ReportMetric(median(writes), "api-writes/copy")
	}
}

// BenchmarkNewNamespaceLatency creates 50 namespaces one after another while a rule already
// copies a Secret into 1,000, and measures from each namespace's creation to its copy.
func BenchmarkNewNamespaceLatency(b *testing.B) {
	be := newBenchEnv(b, benchTargets)
	ctx := context.Background()
	name := "latency"
	if _, err := be.cs.CoreV1().Secrets(be.src).Create(ctx, be.source(name), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rule := be.rule(name)
	cw := be.watchCopies(b, rule.Name, func(metav1.Object) bool { return true })
	createRule(b, rule)
	cw.until(b, be.targets, 5*time.Minute)
	const samples = 50
	for i := 0; i < b.N; i++ {
		var lat []time.Duration
		for j := range samples {
			ns := fmt.Sprintf("late-%s-%d-%d", be.id, i, j)
			start := time.Now()
			if _, err := be.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: ns, Labels: map[string]string{"copytest": be.id}}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, cw.until(b, []string{ns}, time.Minute).Sub(start))
			time.Sleep(20 * time.Millisecond)
		}
		sort.Slice(lat, func(x, y int) bool { return lat[x] < lat[y] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	}
}

// BenchmarkRSSUnrelatedSecrets measures how much the running manager's resident memory
// grows when 10,000 Secrets of 10 KB that no rule matches are created: 1,000 in the namespace
// of a rule (with labels that do not match it) and 9,000 in nine other namespaces. The
// manager runs in this process; the figure is VmRSS after garbage collection.
func BenchmarkRSSUnrelatedSecrets(b *testing.B) {
	be := newBenchEnv(b, 10)
	ctx := context.Background()
	name := "rss"
	if _, err := be.cs.CoreV1().Secrets(be.src).Create(ctx, be.source(name), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rule := be.rule(name)
	cw := be.watchCopies(b, rule.Name, func(metav1.Object) bool { return true })
	createRule(b, rule)
	cw.until(b, be.targets, time.Minute)
	const (
		unrelated = 10000
		size      = 10 << 10
		perNS     = 1000
	)
	for i := 0; i < b.N; i++ {
		nss := []string{be.src}
		nss = append(nss, be.plainNamespaces(b, fmt.Sprintf("noise%d", i), unrelated/perNS-1)...)
		time.Sleep(2 * time.Second)
		before, heapBefore := settledMemory(b)
		err := benchutil.Parallel(ctx, unrelated, func(j int) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nss[j/perNS], Name: fmt.Sprintf("noise-%d-%d", i, j),
				Labels: map[string]string{"copytest": "unrelated"}}, StringData: benchutil.Payload(size)}
			_, err := be.cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(5 * time.Second) // let any watch deliver what it would
		after, heapAfter := settledMemory(b)
		b.ReportMetric((float64(after)-float64(before))/(1<<20), "MB-rss-growth")
		b.ReportMetric((float64(heapAfter)-float64(heapBefore))/(1<<20), "MB-heap-growth")
		b.ReportMetric(float64(after)/(1<<20), "MB-rss")

		// References that show the measurement sees a cache when there is one: what a
		// metadata-only watch of all Secrets, then a full Secret cache, would add.
		metaInf := metadatainformer.NewFilteredMetadataInformer(be.meta, corev1.SchemeGroupVersion.WithResource("secrets"),
			metav1.NamespaceAll, 0, toolscache.Indexers{}, nil).Informer()
		b.ReportMetric(float64(informerGrowth(b, metaInf))/(1<<20), "MB-rss-growth-of-a-metadata-watch-of-all-Secrets")
		fullInf := toolscache.NewSharedIndexInformerWithOptions(
			toolscache.NewFilteredListWatchFromClient(be.cs.CoreV1().RESTClient(), "secrets", metav1.NamespaceAll, func(*metav1.ListOptions) {}),
			&corev1.Secret{}, toolscache.SharedIndexInformerOptions{})
		b.ReportMetric(float64(informerGrowth(b, fullInf))/(1<<20), "MB-rss-growth-of-a-cache-of-all-Secrets")
	}
}

// informerGrowth runs an informer until it has synced and returns the RSS it added (the
// informer keeps running until the benchmark ends, so its store stays alive).
func informerGrowth(b *testing.B, inf toolscache.SharedIndexInformer) int64 {
	b.Helper()
	before, _ := settledMemory(b)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("reference informer did not sync")
	}
	after, _ := settledMemory(b)
	return int64(after) - int64(before)
}

// settledMemory returns VmRSS and the Go heap in use after garbage collection.
func settledMemory(b *testing.B) (rss, heap uint64) {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10, ms.HeapInuse
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0, 0
}
