package copyratorrule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/manager"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The benchmarks run on the package's envtest API server (etcd + kube-apiserver on this
// machine); each measures its own raw-create baseline on the same server in the same run.

const (
	benchTargets     = 1000
	benchPayloadSize = 4 << 10 // bytes of Secret data
)

// clientLimits are a manager's client-side rate limits, --kube-api-qps and --kube-api-burst.
type clientLimits struct {
	qps   float64
	burst int
}

var (
	// shippedLimits are main.go's defaults: no client-side limit (a negative QPS), the API
	// server's Priority and Fairness governs.
	shippedLimits = clientLimits{manager.DefaultKubeAPIQPS, manager.DefaultKubeAPIBurst}
	// qps200Limits are the defaults the manager shipped with before issue 15.
	qps200Limits = clientLimits{200, 400}
)

// benchEnv is one benchmark's clientset, source namespace and target namespaces.
type benchEnv struct {
	id      string
	cs      kubernetes.Interface
	meta    metadata.Interface
	src     string
	targets []string
	calls   *benchutil.CallCounter // the manager's requests
}

// newBenchEnv creates a source namespace and n target namespaces labelled copytest=<id>
// (Quartet's rules select them) and peertest=<id> (a peer's selector does). It starts no
// manager: see startManager.
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
	be.src = sourceNamespace(b, "bsrc")
	be.targets = be.namespaces(b, "bdst", n, map[string]string{"copytest": be.id, peerTargetLabel: be.id})
	return be
}

// startManager starts a manager with main.go's options (this controller only, no leader
// election) at the given client limits, counts its requests in be.calls and waits until the
// controller reconciles. One option differs: the copies are removed at
// benchRemovalsPerSecond, not the shipped 20 a second, because no benchmark here times a
// removal and 10,000 copies would take 500 s to release between rounds. The manager stops
// when stop is called or the benchmark ends; the rules it should clean up must be released
// before.
func (be *benchEnv) startManager(b *testing.B, limits clientLimits) (stop func()) {
	b.Helper()
	cfg := rest.CopyConfig(env.Config)
	manager.SetClientLimits(cfg, limits.qps, limits.burst)
	be.calls.Wrap(cfg)
	stop = testenv.StartManager(b, cfg, scope.Namespaces{}, (&Options{RemovalsPerSecond: benchRemovalsPerSecond}).Setup)
	be.awaitController(b)
	return stop
}

// awaitController creates a rule that targets nothing and waits until the controller has
// written its status, then releases it: the controller's caches have synced and its workers
// run, so a measurement that follows does not time the manager's start.
func (be *benchEnv) awaitController(b *testing.B) {
	b.Helper()
	ctx := context.Background()
	probe := ruleFor(be.src, "probe-"+suffix(), flantv1.RuleTypeSecret)
	createRule(b, probe)
	ok := benchutil.WaitFor(ctx, time.Minute, func() bool {
		got := &flantv1.CopyratorRule{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(probe), got)
		return err == nil && got.Status.ObservedGeneration == got.Generation
	})
	if !ok {
		b.Fatal("the controller did not reconcile a rule within a minute")
	}
	be.release(b, probe, time.Minute)
}

// benchRemovalsPerSecond paces the removal of copies in the benchmarks' managers.
const benchRemovalsPerSecond = 1000

// release deletes a rule and waits until the controller has removed its copies and its
// finalizer.
func (be *benchEnv) release(b *testing.B, rule *flantv1.CopyratorRule, timeout time.Duration) {
	b.Helper()
	ctx := context.Background()
	if err := env.Client.Delete(ctx, rule); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	gone := benchutil.WaitFor(ctx, timeout, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(rule), &flantv1.CopyratorRule{}))
	})
	if !gone {
		b.Fatalf("rule %s not released within %s", rule.Name, timeout)
	}
}

// namespaces creates n namespaces with the given labels.
func (be *benchEnv) namespaces(b *testing.B, prefix string, n int, labels map[string]string) []string {
	b.Helper()
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%s-%d", prefix, be.id, i)
	}
	err := benchutil.Parallel(ctx, n, func(i int) error {
		_, err := be.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: names[i], Labels: labels}}, metav1.CreateOptions{})
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

// copyWatch records, per namespace, when a copy first satisfied match. It is a
// metadata-only informer (the measurement should not cost the machine a decode of every
// copy's body), so a watch the API server closes under load is resumed.
type copyWatch struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	match func(metav1.Object) bool
	stop  context.CancelFunc // ends the watch (it also ends with the benchmark)
	// waiting is what until still waits for: each namespace is checked once when it is
	// first seen, so waiting costs the benchmark O(1) per event, not O(targets) per poll
	// (at 10,000 targets a poll loop took a tenth of a core from the manager it measures).
	waiting *copyWait
}

// copyWait is one until call's namespaces not seen yet and the time of the last one seen.
type copyWait struct {
	missing map[string]struct{}
	last    time.Time
	done    chan struct{}
}

// seenLocked records ns's first match at t; cw.mu is held.
func (cw *copyWatch) seenLocked(ns string, t time.Time) {
	if _, dup := cw.seen[ns]; dup {
		return
	}
	cw.seen[ns] = t
	w := cw.waiting
	if w == nil {
		return
	}
	if _, ok := w.missing[ns]; !ok {
		return
	}
	delete(w.missing, ns)
	if t.After(w.last) {
		w.last = t
	}
	if len(w.missing) == 0 {
		close(w.done)
		cw.waiting = nil
	}
}

// watchCopies starts watching the rule's copies; start it before the measured action.
func (be *benchEnv) watchCopies(b *testing.B, rule string, match func(metav1.Object) bool) *copyWatch {
	b.Helper()
	return be.watchSecrets(b, LabelRule+"="+rule+","+LabelRuleNamespace+"="+be.src, match)
}

// watchSecrets watches the Secrets selector selects, in every namespace.
func (be *benchEnv) watchSecrets(b *testing.B, selector string, match func(metav1.Object) bool) *copyWatch {
	b.Helper()
	cw := &copyWatch{seen: map[string]time.Time{}, match: match}
	inf := metadatainformer.NewFilteredMetadataInformer(be.meta, corev1.SchemeGroupVersion.WithResource("secrets"), metav1.NamespaceAll, 0,
		toolscache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = selector }).Informer()
	record := func(obj any) {
		if s, ok := obj.(metav1.Object); ok && cw.match(s) {
			now := time.Now()
			cw.mu.Lock()
			cw.seenLocked(s.GetNamespace(), now)
			cw.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cw.stop = cancel
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
	w := &copyWait{missing: make(map[string]struct{}, len(nss)), done: make(chan struct{})}
	cw.mu.Lock()
	for _, ns := range nss {
		if t, ok := cw.seen[ns]; !ok {
			w.missing[ns] = struct{}{}
		} else if t.After(w.last) {
			w.last = t
		}
	}
	if len(w.missing) == 0 {
		cw.mu.Unlock()
		return w.last
	}
	cw.waiting = w
	cw.mu.Unlock()
	select {
	case <-w.done:
		return w.last // written before done was closed
	case <-time.After(timeout):
		cw.mu.Lock()
		defer cw.mu.Unlock()
		b.Fatalf("%d of %d copies missing after %s", len(w.missing), len(nss), timeout)
		return time.Time{}
	}
}

// rounds is how often each figure is measured; benchmarks report medians, because the
// machine they run on is shared and single runs vary by tens of percent. Nine rounds keep
// one slow round from moving a median (issue 23: three rounds let the update ratio read
// anywhere from 1.12 to 1.45 between runs).
const rounds = 9

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

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// rawPatch JSON-patches the data of one Secret named name in every namespace with a
// tuned client (32 workers): the physical limit of updating copies.
func rawPatch(b *testing.B, be *benchEnv, nss []string, name string, round int) time.Duration {
	b.Helper()
	value := []byte(strings.Repeat(strconv.Itoa(round%10), benchPayloadSize))
	return patchAll(b, be, nss, name, mustJSON([]jsonPatchOp{{Op: "add", Path: "/data", Value: map[string][]byte{"payload": value}}}))
}

// deleteAll deletes the Secret name from every namespace of nss (32 workers).
func deleteAll(b *testing.B, nss []string, name string) {
	b.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(benchutil.TunedConfig(env.Config))
	if err != nil {
		b.Fatal(err)
	}
	if err := benchutil.Parallel(ctx, len(nss), func(i int) error {
		return cs.CoreV1().Secrets(nss[i]).Delete(ctx, name, metav1.DeleteOptions{})
	}); err != nil {
		b.Fatal(err)
	}
}

// patchAll sends one JSON patch to the Secret named name in every namespace with a tuned
// client (32 workers) and returns how long that took.
func patchAll(b *testing.B, be *benchEnv, nss []string, name string, patch []byte) time.Duration {
	b.Helper()
	ctx := context.Background()
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

// disguise renames Copyrator's label and annotation keys and its managed-by value in a
// JSON document to strings of the same length that no cache of the manager selects, so
// the same-patch baseline writes objects and patches of the copies' size and shape that
// the manager never sees.
func disguise(doc []byte) []byte {
	doc = bytes.ReplaceAll(doc, []byte("copyrator.flant.com"), []byte("copyrator.bench.xyz"))
	return bytes.ReplaceAll(doc, []byte(`"`+ManagedByValue+`"`), []byte(`"copyratoX"`))
}

// disguised returns obj, a copy as the manager writes it, as a Secret without its server
// fields, disguised.
func disguised(b *testing.B, obj client.Object) *corev1.Secret {
	b.Helper()
	var out corev1.Secret
	if err := json.Unmarshal(disguise(mustJSON(obj)), &out); err != nil {
		b.Fatal(err)
	}
	out.ObjectMeta = metav1.ObjectMeta{Name: out.Name, Labels: out.Labels, Annotations: out.Annotations}
	if out.Labels[LabelManagedBy] == ManagedByValue {
		b.Fatal("the disguised Secret is still labelled as a copy")
	}
	return &out
}

// createAll creates obj in every namespace with a tuned client (32 workers), in
// protobuf like the manager's, and returns how long that took.
func createAll(b *testing.B, nss []string, obj *corev1.Secret) time.Duration {
	b.Helper()
	cfg := benchutil.TunedConfig(env.Config)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if err := benchutil.Parallel(ctx, len(nss), func(i int) error {
		o := obj.DeepCopy()
		o.Namespace = nss[i]
		_, err := cs.CoreV1().Secrets(nss[i]).Create(ctx, o, metav1.CreateOptions{})
		return err
	}); err != nil {
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

// copyInto creates a source Secret named name and a rule copying it into the namespaces
// labelled copytest=nsLabel, and waits until every namespace in targets has its copy. It
// returns the rule, the seconds from the rule's creation to the last copy, and the manager's
// writes per copy meanwhile. A manager must be running.
func (be *benchEnv) copyInto(b *testing.B, name, nsLabel string, targets []string, timeout time.Duration) (
	rule *flantv1.CopyratorRule, seconds, writesPerCopy float64) {
	b.Helper()
	if _, err := be.cs.CoreV1().Secrets(be.src).Create(context.Background(), be.source(name), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rule = be.rule(name)
	rule.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"copytest": nsLabel}}
	cw := be.watchCopies(b, rule.Name, func(metav1.Object) bool { return true })
	defer cw.stop()
	be.calls.Reset()
	start := time.Now()
	createRule(b, rule)
	seen := cw.until(b, targets, timeout)
	seconds = seen.Sub(start).Seconds()
	writesPerCopy = float64(be.calls.Total("POST", "PATCH", "PUT", "DELETE")) / float64(len(targets))
	first, last := be.calls.WriteWindow("secrets")
	b.Logf("%s: rule created, first copy write after %.1f ms, copy writes for %.1f ms, last copy seen %.1f ms after the last write",
		name, ms(first.Sub(start)), ms(last.Sub(first)), ms(seen.Sub(last)))
	return rule, seconds, writesPerCopy
}

// fanOut starts a manager at limits, measures copyInto be.targets, releases the rule (the
// manager deletes the copies) and stops the manager: each configuration runs alone, and
// none finds an earlier configuration's rules to resync when it starts.
func (be *benchEnv) fanOut(b *testing.B, limits clientLimits, name string) (seconds, writesPerCopy float64) {
	b.Helper()
	stop := be.startManager(b, limits)
	defer stop()
	rule, seconds, writesPerCopy := be.copyInto(b, name, be.id, be.targets, 5*time.Minute)
	be.release(b, rule, 5*time.Minute)
	// The copies' delete events still wake the controller for the gone rule; let that pass
	// before the stop cancels it mid-request (harmless, but logged as a reconcile error).
	time.Sleep(time.Second)
	return seconds, writesPerCopy
}

// series collects a benchmark's figures over rounds and reports each one's median, in the
// order the figures were first added; for a ratio (a name starting x-) of more than one
// round, also the lowest and the highest round (suffixes -min, -max), so a reader sees how
// far the rounds spread.
type series struct {
	names  []string
	values map[string][]float64
}

func (s *series) add(name string, v float64) {
	if s.values == nil {
		s.values = map[string][]float64{}
	}
	if _, ok := s.values[name]; !ok {
		s.names = append(s.names, name)
	}
	s.values[name] = append(s.values[name], v)
}

func (s *series) median(name string) float64 { return median(s.values[name]) }

func (s *series) report(b *testing.B) {
	b.Helper()
	for _, name := range s.names {
		b.ReportMetric(s.median(name), name)
		if vs := s.values[name]; strings.HasPrefix(name, "x-") && len(vs) > 1 {
			b.ReportMetric(slices.Min(vs), name+"-min")
			b.ReportMetric(slices.Max(vs), name+"-max")
		}
	}
}

// BenchmarkFanOut1000 creates a rule whose one Secret goes to 1,000 namespaces and compares
// the time until the last copy exists with a tuned client creating 1,000 Secrets of the
// same size (32 workers) into 1,000 other namespaces, in JSON and in protobuf. The manager
// (main.go's options, this controller only) runs once at the shipped client limits
// (--kube-api-qps -1: no client-side limit, the API server's Priority and Fairness governs;
// figures without a suffix) and once at the limits shipped before, 200 requests/s with
// bursts of 400 (suffix qps200); each configuration's manager runs only for its own
// measurement and deletes its copies before it stops. Each round measures the baselines and
// both configurations back to back (new Secret names each round, same namespaces); the
// figures are medians over the rounds, the ratios medians of the rounds' ratios (with the
// lowest and highest round's as -min and -max); api-writes/copy counts the shipped
// manager's requests that write. A third baseline creates, in protobuf, the very Secret the
// manager creates as a copy (its labels, its annotations and the data), disguised (the
// label and annotation keys and the managed-by value renamed to strings of the same length)
// so that no cache of the manager selects it: x-raw-create-same-copy divides by it. The log
// says, per round, when the manager's first copy write was sent after the rule's creation,
// how long its copy writes took, and how long after the last write's answer the last copy
// was seen.
//
// When the binaries are given, the round then runs mittwald/kubernetes-replicator v2.12.4
// (push replication: the source Secret carries replicator.v1.mittwald.de/replicate-to-matching
// with a label selector of the same 1,000 namespaces, and the replicator writes the copies
// one after another; flags -replicate-configmaps, -replicate-roles, -replicate-role-bindings
// and -replicate-service-accounts false, so it runs only its Secret replicator) as a process
// of its own, started for its measurement and stopped after it, with its requests passing
// through a counting proxy on loopback in this process: the build with its client limit
// raised to 5000 requests/s (suffix replicator-tuned, every round; x-replicator-tuned is
// Quartet's time over its time), and the release as it ships, at client-go's default 5
// requests/s with bursts of 10 (suffix replicator, one round only, because 1,000 writes take
// it about 200 s; x-replicator is Quartet's median time over that one).
func BenchmarkFanOut1000(b *testing.B) {
	be := newBenchEnv(b, benchTargets)
	rawNS := be.plainNamespaces(b, "raw", benchTargets)
	peer := be.replicator(b)
	for i := 0; i < b.N; i++ {
		var m series
		for r := range rounds {
			rawJSON := rawCreate(b, rawNS, fmt.Sprintf("raw-json-%d-%d", i, r), false).Seconds()
			rawProto := rawCreate(b, rawNS, fmt.Sprintf("raw-proto-%d-%d", i, r), true).Seconds()
			// The copy the manager creates (its labels, annotations and data), created by
			// the tuned loop in protobuf, disguised so that no cache selects it.
			sameName := fmt.Sprintf("raw-same-%d-%d", i, r)
			rawSame := createAll(b, rawNS, disguised(b, desiredCopy(benchRuleID(be.src, sameName),
				view{}.source(be.source(sameName)), ""))).Seconds()
			d, writes := be.fanOut(b, shippedLimits, fmt.Sprintf("fanout-%d-%d", i, r))
			old, _ := be.fanOut(b, qps200Limits, fmt.Sprintf("fanout-qps200-%d-%d", i, r))
			m.add("x-raw-create", d/rawJSON)
			m.add("x-raw-create-protobuf", d/rawProto)
			m.add("x-raw-create-protobuf-qps200", old/rawProto)
			m.add("x-raw-create-same-copy", d/rawSame)
			m.add("s-raw-create-1000-same-copies", rawSame)
			m.add("s-fanout-1000-copies", d)
			m.add("s-fanout-1000-copies-qps200", old)
			m.add("s-raw-create-1000-secrets", rawJSON)
			m.add("s-raw-create-1000-secrets-protobuf", rawProto)
			m.add("api-writes/copy", writes)
			if peer.tuned != "" {
				p, pw := peer.fanOut(b, peer.tuned, true, fmt.Sprintf("replicator-tuned-%d-%d", i, r), 5*time.Minute)
				m.add("x-replicator-tuned", d/p)
				m.add("s-fanout-1000-copies-replicator-tuned", p)
				m.add("api-writes/copy-replicator-tuned", pw)
			}
		}
		if peer.released != "" {
			p, _ := peer.fanOut(b, peer.released, false, fmt.Sprintf("replicator-%d", i), 15*time.Minute)
			m.add("x-replicator", m.median("s-fanout-1000-copies")/p)
			m.add("s-fanout-1000-copies-replicator", p)
		}
		m.report(b)
	}
}

// BenchmarkFanOutScale fans one Secret out to 100, 1,000 and 10,000 namespaces under the
// manager at the shipped client limits (no client-side limit), next to a tuned client
// creating as many Secrets of the same size in protobuf (32 workers) into as many other
// namespaces right before: s-fanout-N and s-raw-protobuf-N are medians over nine rounds
// for 100 and 1,000 and three rounds for 10,000, x-raw-protobuf-N the median of the rounds'
// ratios, api-writes/copy-N the manager's requests that write, per copy. Between the two,
// the same loop creates the very Secret the manager creates as a copy, disguised as in
// BenchmarkFanOut1000 so that no cache selects it: x-raw-same-copy-N divides by it. MB-rss-N is this
// process's resident memory after garbage collection with the N copies in place (the
// manager runs in the benchmark process, so the figure includes the benchmark's own
// clients), x-idle-rss-N that figure over the same measurement taken with the N namespaces
// created but before the first rule. Each rule is deleted, and its copies with it, before
// the next round, and so are the baselines' Secrets.
func BenchmarkFanOutScale(b *testing.B) {
	be := newBenchEnv(b, 0)
	be.startManager(b, shippedLimits)
	for i := 0; i < b.N; i++ {
		var m series
		for _, n := range []int{100, 1000, 10000} {
			label := fmt.Sprintf("%s-%d-%d", be.id, i, n)
			targets := be.namespaces(b, fmt.Sprintf("scale%d-%d", i, n), n, map[string]string{"copytest": label})
			rawNS := be.plainNamespaces(b, fmt.Sprintf("rawscale%d-%d", i, n), n)
			nRounds := rounds
			if n >= 10000 {
				nRounds = 3
			}
			time.Sleep(2 * time.Second) // the manager's namespace watch catches up
			idle, _ := settledMemory(b)
			var rss uint64
			for r := range nRounds {
				raw := rawCreate(b, rawNS, fmt.Sprintf("raw-%d-%d", i, r), true).Seconds()
				sameName := fmt.Sprintf("raw-same-%d-%d", i, r)
				same := createAll(b, rawNS, disguised(b, desiredCopy(benchRuleID(be.src, sameName),
					view{}.source(be.source(sameName)), ""))).Seconds()
				rule, d, writes := be.copyInto(b, fmt.Sprintf("scale-%d-%d-%d", i, n, r), label, targets, 10*time.Minute)
				m.add(fmt.Sprintf("s-fanout-%d", n), d)
				m.add(fmt.Sprintf("s-raw-protobuf-%d", n), raw)
				m.add(fmt.Sprintf("s-raw-same-copy-%d", n), same)
				m.add(fmt.Sprintf("x-raw-protobuf-%d", n), d/raw)
				m.add(fmt.Sprintf("x-raw-same-copy-%d", n), d/same)
				m.add(fmt.Sprintf("api-writes/copy-%d", n), writes)
				if r == nRounds-1 {
					time.Sleep(2 * time.Second) // the manager finishes its status write and events
					rss, _ = settledMemory(b)
				}
				be.release(b, rule, 10*time.Minute)
				// The baselines' Secrets go too: the package's later benchmarks share the API
				// server, and the peers among them cache every Secret of the cluster.
				deleteAll(b, rawNS, fmt.Sprintf("raw-%d-%d", i, r))
				deleteAll(b, rawNS, sameName)
			}
			m.add(fmt.Sprintf("MB-rss-%d", n), float64(rss)/(1<<20))
			m.add(fmt.Sprintf("x-idle-rss-%d", n), float64(rss)/float64(idle))
		}
		m.report(b)
	}
}

// BenchmarkUpdatePropagation1000 changes a Secret that has 1,000 copies and measures the time
// until every copy holds the new content, next to a tuned client JSON-patching the data of
// 1,000 Secrets of the same size right before; medians over the rounds (ratios with their
// lowest and highest round as -min and -max). The manager runs at the shipped client limits
// (no client-side limit). Where the time goes: ms-update-to-first-write from the update to
// the manager's first copy write, ms-copy-writes from that write to the last write's answer,
// ms-last-write-to-seen from then until the last copy is seen; x-raw-patch-writes-only
// divides the copy writes alone by the raw patch. A second baseline sends the very JSON
// patch the manager sends (its ownership tests, its annotations and the data) with the same
// tuned loop to 1,000 look-alike Secrets (the copy, disguised as in BenchmarkFanOut1000, so
// that no cache selects them), right after the manager's update: x-raw-same-patch and
// x-raw-same-patch-writes-only divide by it, and x-same-patch-over-plain divides it by the
// plain data patch: what the ownership tests and annotations cost the API server alone.
//
// When the binary is given, the same follows for mittwald/kubernetes-replicator v2.12.4 built
// with its client limit raised to 5000 requests/s (run as in BenchmarkFanOut1000, after
// Quartet's rounds, on its own source Secret pushed into the same 1,000 namespaces): the time
// from the source's update until every copy carries the new source version in
// replicator.v1.mittwald.de/replicated-from-version; x-replicator-tuned is Quartet's median
// time over the peer's.
func BenchmarkUpdatePropagation1000(b *testing.B) {
	be := newBenchEnv(b, benchTargets)
	be.startManager(b, shippedLimits)
	ctx := context.Background()
	name := "update"
	rule, _, _ := be.copyInto(b, name, be.id, be.targets, 5*time.Minute)
	rawNS := be.plainNamespaces(b, "raw-u", benchTargets)
	rawCreate(b, rawNS, "raw", false)
	// The copy as the manager wrote it: the objects of the same-patch baseline start as it.
	written, err := be.cs.CoreV1().Secrets(be.targets[0]).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sameNS := be.plainNamespaces(b, "raw-s", benchTargets)
	createAll(b, sameNS, disguised(b, written))
	peer := be.replicator(b)
	for i := 0; i < b.N; i++ {
		var m series
		for r := range rounds {
			round := i*rounds + r
			rawD := rawPatch(b, be, rawNS, "raw", round).Seconds()
			live, err := be.cs.CoreV1().Secrets(be.src).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			before, err := be.cs.CoreV1().Secrets(be.targets[0]).Get(ctx, name, metav1.GetOptions{})
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
			seen := uw.until(b, be.targets, 5*time.Minute)
			d := seen.Sub(start).Seconds()
			uw.stop()
			first, last := be.calls.WriteWindow("secrets")
			m.add("s-update-1000-copies", d)
			m.add("s-raw-patch-1000-secrets", rawD)
			m.add("x-raw-patch", d/rawD)
			// Where the time goes: from the update to the manager's first copy write, its
			// writes, and from the last write's answer to the last copy seen by the watch.
			m.add("ms-update-to-first-write", ms(first.Sub(start)))
			m.add("ms-copy-writes", ms(last.Sub(first)))
			m.add("ms-last-write-to-seen", ms(seen.Sub(last)))
			m.add("x-raw-patch-writes-only", last.Sub(first).Seconds()/rawD)
			// The same JSON patch the manager sent (its ownership tests, annotations and
			// data), sent by the tuned loop to look-alike Secrets no cache selects.
			samePatch := updatePatch(idOf(rule), desiredCopy(idOf(rule),
				view{}.source(live), be.targets[0]), ptr.To(stateOf(before)))
			sameD := patchAll(b, be, sameNS, name, disguise(samePatch)).Seconds()
			m.add("s-raw-same-patch-1000-secrets", sameD)
			m.add("x-raw-same-patch", d/sameD)
			m.add("x-raw-same-patch-writes-only", last.Sub(first).Seconds()/sameD)
			m.add("x-same-patch-over-plain", sameD/rawD)
			m.add("api-writes/copy", float64(be.calls.Total("POST", "PATCH", "PUT", "DELETE"))/benchTargets)
		}
		if peer.tuned != "" {
			for _, d := range peer.updates(b, fmt.Sprintf("replicator-update-%d", i), rounds) {
				m.add("x-replicator-tuned", m.median("s-update-1000-copies")/d[0])
				m.add("s-update-1000-copies-replicator-tuned", d[0])
				m.add("api-writes/copy-replicator-tuned", d[1])
			}
		}
		m.report(b)
	}
}

// BenchmarkNewNamespaceLatency creates 200 namespaces one after another while a rule already
// copies a Secret into 1,000, and measures from each namespace's creation to its copy, in
// nine rounds: p50-ms, p99-ms (with 200 samples, the second highest) and max-ms are medians
// over the rounds. The manager runs at the shipped client limits (no client-side limit);
// api-calls/namespace counts its requests per new namespace, api-reads/namespace its GETs
// (a source's body is remembered with its version, so a new namespace needs none).
//
// When the binary is given, each round continues with mittwald/kubernetes-replicator
// v2.12.4 (the build with its client limit raised to 5000 requests/s, though one write per
// namespace does not reach even the default limit; run as in BenchmarkFanOut1000, after
// Quartet's namespaces, with a source Secret of its own pushed into the same 1,000
// namespaces, and 200 new namespaces only its selector matches): p50-ms-replicator,
// p99-ms-replicator and max-ms-replicator, and Quartet's figure over the peer's in the same
// round as x-p50-replicator and x-p99-replicator, medians of the rounds' ratios (with the
// lowest and highest round's as -min and -max).
func BenchmarkNewNamespaceLatency(b *testing.B) {
	be := newBenchEnv(b, benchTargets)
	be.startManager(b, shippedLimits)
	rule, _, _ := be.copyInto(b, "latency", be.id, be.targets, 5*time.Minute)
	cw := be.watchCopies(b, rule.Name, func(metav1.Object) bool { return true })
	peer := be.replicator(b)
	for i := 0; i < b.N; i++ {
		var m series
		for r := range rounds {
			be.calls.Reset()
			lat := be.newNamespaceLatency(b, cw, fmt.Sprintf("late-%d-%d", i, r), map[string]string{"copytest": be.id})
			m.add("api-calls/namespace", float64(be.calls.Total())/latencySamples)
			m.add("api-reads/namespace", float64(be.calls.Total("GET"))/latencySamples)
			if r == 0 {
				b.Logf("the manager's requests for %d new namespaces: %v", latencySamples, be.calls.Snapshot())
			}
			p50, p99 := percentileMS(lat, 50), percentileMS(lat, 99)
			m.add("p50-ms", p50)
			m.add("p99-ms", p99)
			m.add("max-ms", percentileMS(lat, 100))
			if peer.tuned != "" {
				plat := peer.newNamespaceLatency(b, fmt.Sprintf("replicator-latency-%d-%d", i, r))
				pp50, pp99 := percentileMS(plat, 50), percentileMS(plat, 99)
				m.add("p50-ms-replicator", pp50)
				m.add("p99-ms-replicator", pp99)
				m.add("max-ms-replicator", percentileMS(plat, 100))
				m.add("x-p50-replicator", p50/pp50)
				m.add("x-p99-replicator", p99/pp99)
			}
		}
		m.report(b)
	}
}

// latencySamples is how many new namespaces a latency figure is taken over.
const latencySamples = 200

// newNamespaceLatency creates latencySamples namespaces with the given labels, one after
// another, and returns for each the time from its creation until cw saw a copy in it.
func (be *benchEnv) newNamespaceLatency(b *testing.B, cw *copyWatch, prefix string, labels map[string]string) []time.Duration {
	b.Helper()
	ctx := context.Background()
	var lat []time.Duration
	for j := range latencySamples {
		ns := fmt.Sprintf("%s-%s-%d", prefix, be.id, j)
		start := time.Now()
		if _, err := be.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, cw.until(b, []string{ns}, time.Minute).Sub(start))
		time.Sleep(20 * time.Millisecond)
	}
	return lat
}

// percentileMS returns the p-th percentile of lat in milliseconds (100: the maximum).
func percentileMS(lat []time.Duration, p int) float64 {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(x, y int) bool { return s[x] < s[y] })
	i := min(len(s)*p/100, len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

// BenchmarkRSSUnrelatedSecrets measures how much the running manager's resident memory
// grows when 10,000 Secrets of 10 KB that no rule matches are created: 1,000 in the namespace
// of a rule (with labels that do not match it) and 9,000 in nine other namespaces. The
// manager runs in this process at the shipped client limits; the figure is VmRSS after
// garbage collection.
//
// When the binary is given, mittwald/kubernetes-replicator v2.12.4 (the build with its client
// limit raised to 5000 requests/s; only its Secret replicator enabled, as in
// BenchmarkFanOut1000) runs as a process of its own through the same creation, talking to
// the API server directly so its traffic does not pass through this process:
// MB-rss-replicator-before and MB-rss-replicator are its VmRSS from /proc before and after
// (it caches every Secret on the API server, those of the benchmarks run before this one
// included; its memory is not garbage-collected on demand, so the after figure is read once
// it has stopped changing), MB-rss-growth-replicator the difference.
func BenchmarkRSSUnrelatedSecrets(b *testing.B) {
	be := newBenchEnv(b, 10)
	be.startManager(b, shippedLimits)
	ctx := context.Background()
	be.copyInto(b, "rss", be.id, be.targets, time.Minute)
	peer := be.replicator(b)
	const (
		unrelated = 10000
		size      = 10 << 10
		perNS     = 1000
	)
	for i := 0; i < b.N; i++ {
		nss := []string{be.src}
		nss = append(nss, be.plainNamespaces(b, fmt.Sprintf("noise%d", i), unrelated/perNS-1)...)
		var rp *benchutil.Process
		if peer.tuned != "" {
			rp = peer.start(b, peer.tuned, true, benchutil.DirectKubeconfig(b, env.Config))
		}
		time.Sleep(2 * time.Second)
		before, heapBefore := settledMemory(b)
		var peerBefore uint64
		if rp != nil {
			peerBefore = processRSS(b, rp)
		}
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
		if rp != nil {
			peerAfter := steadyRSS(b, rp)
			rp.Stop()
			b.ReportMetric(float64(peerBefore)/(1<<20), "MB-rss-replicator-before")
			b.ReportMetric(float64(peerAfter)/(1<<20), "MB-rss-replicator")
			b.ReportMetric((float64(peerAfter)-float64(peerBefore))/(1<<20), "MB-rss-growth-replicator")
		}

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

// BenchmarkKeyFilterRules measures what key filters cost when many rules copy one source:
// 50 rules each copy the source's common key and one key of their own (renamed) into a
// namespace of their own, and, in the same run on the same API server, 50 rules without a
// key filter each copy a source of the same content whole into a namespace of their own
// (the baseline). Each round changes the common key of both sources (one update each, the
// filtered set first, then the whole one) and measures until the 50 copies of the set hold
// the new content. Figures: the seconds for each set, x-whole (filtered over whole), and the
// manager's GETs of the source per update for each set (the body is read when a copy is
// written, once per rule; the content of a version is read once for all the key filters).
func BenchmarkKeyFilterRules(b *testing.B) {
	const rules, keysPerSource = 50, 50
	be := newBenchEnv(b, 0)
	be.startManager(b, shippedLimits)
	ctx := context.Background()
	content := func(round int) map[string][]byte {
		data := map[string][]byte{"common": []byte(strings.Repeat(strconv.Itoa(round%10), 256))}
		for k := range keysPerSource {
			data[fmt.Sprintf("k%02d", k)] = []byte(strings.Repeat("v", 80))
		}
		return data
	}
	type set struct {
		name, source string
		targets      []string
		views        map[string]view // namespace → the view of the rule copying there
		mu           sync.Mutex
		want         map[string]string // namespace → the content hash its copy must show
		watch        *copyWatch
	}
	// expect sets the content each copy of s must show after the update to data, and
	// forgets the copies seen so far.
	expect := func(s *set, data map[string][]byte) {
		src := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: data}
		s.mu.Lock()
		for ns, v := range s.views {
			s.want[ns] = v.source(src).Hash
		}
		s.mu.Unlock()
		if s.watch != nil {
			s.watch.mu.Lock()
			s.watch.seen = map[string]time.Time{}
			s.watch.mu.Unlock()
		}
	}
	var sets []*set
	for _, name := range []string{"filtered", "whole"} {
		s := &set{name: name, source: "kf-" + name, views: map[string]view{}, want: map[string]string{}}
		sets = append(sets, s)
		s.targets = be.namespaces(b, "b"+name, rules, nil)
		if _, err := be.cs.CoreV1().Secrets(be.src).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: be.src,
			Name: s.source}, Type: corev1.SecretTypeOpaque, Data: content(0)}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for i, ns := range s.targets {
			r := ruleFor(be.src, be.id, flantv1.RuleTypeSecret)
			r.Name = fmt.Sprintf("%s-%02d-%s", name, i, be.id)
			r.Spec.Selector, r.Spec.SourceNames = nil, []string{s.source}
			r.Spec.NamespaceSelector, r.Spec.Namespaces = nil, []string{ns}
			if name == "filtered" {
				r.Spec.Keys = []flantv1.CopiedKey{{Key: "common"}, {Key: fmt.Sprintf("k%02d", i), TargetKey: "own"}}
			}
			createRule(b, r)
			s.views[ns] = viewOf(r.Spec)
		}
		expect(s, content(0))
		s.watch = be.watchSecrets(b, LabelRuleNamespace+"="+be.src, func(o metav1.Object) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return o.GetName() == s.source && o.GetAnnotations()[AnnotationContentHash] == s.want[o.GetNamespace()]
		})
	}
	update := func(s *set, round int) (seconds float64, gets int) {
		live, err := be.cs.CoreV1().Secrets(be.src).Get(ctx, s.source, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		live.Data = content(round)
		expect(s, live.Data)
		be.calls.Reset()
		start := time.Now()
		if _, err := be.cs.CoreV1().Secrets(be.src).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		seconds = s.watch.until(b, s.targets, 5*time.Minute).Sub(start).Seconds()
		return seconds, be.calls.Snapshot()["GET /api/v1/namespaces/"+be.src+"/secrets/"+s.source]
	}
	for _, s := range sets {
		s.watch.until(b, s.targets, 5*time.Minute)
	}
	for i := 0; i < b.N; i++ {
		var m series
		for r := range rounds {
			round := 1 + i*rounds + r
			f, fGets := update(sets[0], round)
			w, wGets := update(sets[1], round)
			m.add("s-update-50-filtered-rules", f)
			m.add("s-update-50-whole-rules", w)
			m.add("x-whole", f/w)
			m.add("source-gets/update-filtered", float64(fGets))
			m.add("source-gets/update-whole", float64(wGets))
		}
		m.report(b)
	}
}

// benchRuleID names a rule for the raw baselines' copies, with a UID as long as a real one.
func benchRuleID(namespace, name string) ruleID {
	return ruleID{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}, UID: "00000000-0000-4000-8000-000000000000"}
}
