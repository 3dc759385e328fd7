// Command benchreport turns the output of `make bench` (go test -bench) into
// docs/PERFORMANCE.md: the machine, the date, the targets, and one table per benchmark with every
// metric the benchmark reported. It writes what was measured in that run, and keeps from the
// report it replaces what the run could not measure (peers' figures, the real node's benchmarks),
// marked with their run's date. It reads go test's output with golang.org/x/perf/benchfmt
// (parse.go); a benchmark run more than once (go test -count) is reported as the median of its
// rounds and their spread. The report's text is report.md.tmpl.
//
//	go run ./hack/benchreport bin/bench.txt docs/PERFORMANCE.md
package main

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/quartet-operator/quartet/test/localcluster"
)

const module = "github.com/quartet-operator/quartet"

//go:embed report.md.tmpl
var reportText string

var report = template.Must(template.New("report").Option("missingkey=error").
	Funcs(template.FuncMap{"doc": benchDoc, "dir": dir}).Parse(reportText))

type result struct {
	Pkg, Name string
	Metrics   [][2]string // value, unit
	Rounds    int         // how many times it ran (go test -count); 0 when kept
	Kept      bool        // not run this time: figures of the previous report
}

// Figures are r's metrics by unit.
func (r result) Figures() byUnit {
	m := byUnit{}
	for _, x := range r.Metrics {
		m[x[1]] = x[0]
	}
	return m
}

// byUnit is a benchmark's metrics: unit → value.
type byUnit map[string]string

// Get is a metric as the benchmark reported it; "—" when the run did not measure it.
func (m byUnit) Get(unit string) string { return cmp.Or(m[unit], "—") }

// Minus is metric a minus metric b, both of the same run.
func (m byUnit) Minus(a, b string) string {
	x, errA := number(m[a])
	y, errB := number(m[b])
	if errA != nil || errB != nil {
		return "—"
	}
	return formatFigure(x - y)
}

// number is the figure a cell starts with: a median has its spread after it, a kept figure
// its run's date.
func number(cell string) (float64, error) {
	n, _, _ := strings.Cut(cell, " ")
	return strconv.ParseFloat(n, 64)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: benchreport <go test -bench output> <markdown out>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	k8sVersion, err := localcluster.KubernetesVersion()
	if err != nil {
		return err
	}
	etcdVersion, err := localcluster.EtcdVersion()
	if err != nil {
		return err
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	results, cpu, failed, err := parse(f, in)
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return fmt.Errorf("no benchmark results in %s", in)
	}
	// Peers run only where their binaries are given (test/benchutil/peer.go), the real node's
	// benchmarks only with NODE=real: a run without them keeps their figures from the report
	// it replaces, marked with their run's date.
	if previous, err := os.ReadFile(out); err == nil {
		results = keepPeerFigures(results, string(previous))
	}
	var b bytes.Buffer
	if err := report.Execute(&b, map[string]any{
		"Date":   time.Now().UTC().Format("2006-01-02 15:04 MST"),
		"Rounds": slices.ContainsFunc(results, func(r result) bool { return r.Rounds > 1 }),
		"CPU":    cmp.Or(strings.TrimSpace(cpu), "unknown"), "Cores": runtime.NumCPU(), "Memory": memTotal(),
		"Go": runtime.Version(), "Kubernetes": k8sVersion, "Etcd": etcdVersion, "Kwok": localcluster.KwokVersion,
		"Targets": judge(results), "Results": results, "Failed": failed,
	}); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}

// dir is a package's directory in the module.
func dir(pkg string) string { return strings.TrimPrefix(pkg, module+"/") }

// benchDoc returns the doc comment of the benchmark function, read from the package's
// test files, so the report explains each benchmark in the words next to its code.
func benchDoc(pkg, name string) string {
	fn, _, _ := strings.Cut(name, "/")
	files, _ := filepath.Glob(filepath.Join(dir(pkg), "*_test.go"))
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Doc != nil {
				return strings.Join(strings.Fields(fd.Doc.Text()), " ")
			}
		}
	}
	return ""
}

func memTotal() string {
	b, _ := os.ReadFile("/proc/meminfo")
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// goal is a target an issue set for a benchmark figure.
type goal struct {
	Bench, Metric, Text string
	met                 func(float64) bool // nil: reported, no target
}

func atMost(limit float64) func(float64) bool { return func(v float64) bool { return v <= limit } }

func is(want float64) func(float64) bool { return func(v float64) bool { return v == want } }

var goals = []goal{
	{"BenchmarkFanOut1000", "x-raw-create-protobuf", "≤ 1.05× raw protobuf create, manager as shipped (issue 15)", atMost(1.05)},
	{"BenchmarkFanOut1000", "api-writes/copy", "≤ 1.01 API writes per copy (issue 15)", atMost(1.01)},
	{"BenchmarkFanOut1000", "x-raw-create-same-copy", "reported: ÷ the tuned loop creating the very Secret the manager creates as a copy, labels and annotations included (issue 23)", nil},
	{"BenchmarkFanOut1000", "x-raw-create-protobuf-qps200", "reported: the old client limit, 200/s burst 400 (issue 15)", nil},
	{"BenchmarkFanOut1000", "x-replicator-tuned", "reported: Quartet ÷ kubernetes-replicator, its rate limit raised (issue 15)", nil},
	{"BenchmarkFanOut1000", "x-replicator", "reported: Quartet ÷ kubernetes-replicator at its defaults (issue 15)", nil},
	{"BenchmarkUpdatePropagation1000", "x-raw-patch", "≤ 1.1× raw patch (issue 15)", atMost(1.1)},
	{"BenchmarkUpdatePropagation1000", "api-writes/copy", "≤ 1.01 API writes per copy (issue 15)", atMost(1.01)},
	{"BenchmarkUpdatePropagation1000", "x-raw-same-patch", "reported: ÷ the tuned loop sending the very patch the manager sends, ownership tests and annotations included (issue 23)", nil},
	{"BenchmarkUpdatePropagation1000", "x-same-patch-over-plain", "reported: the tuned loop's patch as the manager sends it ÷ its plain data patch, the ownership tests and annotations alone: the floor of x-raw-patch (issue 23)", nil},
	{"BenchmarkUpdatePropagation1000", "ms-update-to-first-write", "reported: from the source's update to the manager's first copy write (issue 23)", nil},
	{"BenchmarkUpdatePropagation1000", "x-replicator-tuned", "reported: Quartet ÷ kubernetes-replicator, its rate limit raised (issue 15)", nil},
	{"BenchmarkNewNamespaceLatency", "x-p50-replicator", "p50 ≤ kubernetes-replicator's p50 in the same run (issue 15)", atMost(1)},
	{"BenchmarkNewNamespaceLatency", "p99-ms", "p99 < 100 ms (issue 15)", func(v float64) bool { return v < 100 }},
	{"BenchmarkNewNamespaceLatency", "x-p99-replicator", "p99 ≤ kubernetes-replicator's p99 in the same run (issue 23)", atMost(1)},
	{"BenchmarkNewNamespaceLatency", "api-reads/namespace", "no read per new namespace: the source's body is remembered with its version (issue 23)", is(0)},
	{"BenchmarkNewNamespaceLatency", "api-calls/namespace", "reported: the manager's requests per new namespace (issue 23)", nil},
	{"BenchmarkFanOutScale", "x-raw-protobuf-10000", "fan-out to 10,000 namespaces ≤ 1.1× raw protobuf create (issue 15)", atMost(1.1)},
	{"BenchmarkFanOutScale", "x-raw-same-copy-10000", "reported: ÷ the tuned loop creating the very Secret the manager creates as a copy, 10,000 of them (issue 23)", nil},
	{"BenchmarkFanOutScale", "x-idle-rss-10000", "RSS with 10,000 copies ≤ 1.5× idle RSS (issue 15)", atMost(1.5)},
	{"BenchmarkHostileTenant", "x-others-lookalikes", "the others' work (a platform rule's copies into new namespaces, a granted mirror's pass, three ChaosAgent rounds) ≤ 2× its time without the attacker, beside 1,100 look-alike copies (issue 37)", atMost(2)},
	{"BenchmarkHostileTenant", "x-others-consent-flood", "the same beside 200 rules of 200 ServiceAccounts asking for consent everywhere (issue 37)", atMost(2)},
	{"BenchmarkHostileTenant", "x-others-orphans", "the same while the 1,000 copies of 40 rules deleted without their finalizers are swept (issue 37)", atMost(2)},
	{"BenchmarkHostileTenant", "x-others-pending-pins", "the same beside 1,000 Pending pods with images of the mirror's host (issue 37)", atMost(2)},
	{"BenchmarkHostileTenant", "x-others-pending-tolerance", "the same beside 1,000 Pending pods the ChaosAgent selects (issue 37)", atMost(2)},
	{"BenchmarkHostileTenant", "x-others-lookalike-daemonsets", "the same beside 1,000 DaemonSets with the node agent's labels on the mirror's ports (issue 37)", atMost(2)},
	{"BenchmarkHostileTenant", "x-others-nat64", "the same beside 50 mirrors whose upstream embeds the metadata address in IPv6 (issue 37)", atMost(2)},
	{"BenchmarkHostileTenant", "x-cpu-consent-flood", "reported: the manager's CPU beside the consent flood ÷ without it (issue 37)", nil},
	{"BenchmarkHostileTenant", "x-requests-consent-flood", "reported: the manager's requests beside the consent flood ÷ without it (issue 37)", nil},
	{"BenchmarkRSSUnrelatedSecrets", "MB-rss-growth", "≤ 20 MB RSS growth with 10,000 unrelated 10 KB Secrets (issue 5)", atMost(20)},
	{"BenchmarkRSSUnrelatedSecrets", "MB-rss-growth-replicator", "reported: kubernetes-replicator's growth in the same scenario; it starts holding every Secret the package's earlier benchmarks left (MB-rss-replicator-before), and the slack of a heap that large can take in the new ones without growing (issue 15)", nil},
	{"BenchmarkExchangeRates1000", "upstream-requests/fill-of-1000", "1 upstream request per source per refresh (issue 3)", is(1)},
	{"BenchmarkExchangeRates1000", "upstream-requests/refresh", "1 upstream request per source per refresh (issue 3)", is(1)},
	{"BenchmarkExchangeRates1000", "controller-api-writes/exchangerate", "initial fill: ≤ 3 controller writes per ExchangeRate, its ConfigMap, its status and one Event (issue 23, replacing 3.3× raw create)", atMost(3)},
	{"BenchmarkExchangeRates1000", "x-raw-create", "reported: initial fill ÷ raw ConfigMap create; the API server's CPU for the four writes alone is about 5.3× one raw create, measured 2026-11-23 (issue 23)", nil},
	{"BenchmarkExchangeRates1000", "api-writes/exchangerate/unchanged-refresh", "0 API writes per ExchangeRate per unchanged refresh (issue 15)", is(0)},
	{"BenchmarkExchangeRates1000", "api-writes/exchangerate/changed-refresh", "≤ 2 API writes per ExchangeRate per changed refresh: its ConfigMap and its status, nothing else (issue 15)", atMost(2)},
	{"BenchmarkExchangeRates1000", "configmap-writes/exchangerate/changed-refresh", "≤ 1 ConfigMap write per ExchangeRate per changed refresh (issue 15)", atMost(1)},
	{"BenchmarkExchangeRates1000", "status-writes/exchangerate/changed-refresh", "≤ 1 status write per ExchangeRate per changed refresh (issue 15)", atMost(1)},
	{"BenchmarkExchangeRatesTwoSources10000", "upstream-requests/unchanged-refresh", "two sources for 10,000 ExchangeRates: 1 upstream request per source per refresh (issue 25)", is(1)},
	{"BenchmarkExchangeRatesTwoSources10000", "api-writes/exchangerate/unchanged-refresh", "two sources: 0 API writes per ExchangeRate per unchanged refresh (issue 25)", is(0)},
	{"BenchmarkExchangeRatesTwoSources10000", "x-raw-create", "reported: fill with two sources ÷ raw ConfigMap create (issue 25)", nil},
	{"BenchmarkRoundOver10000Pods", "list-calls/round", "no LIST per round after start-up (issue 4)", is(0)},
	{"BenchmarkRoundOver10000Pods", "api-calls/round", "reported (issue 4 sets no target)", nil},
	{"BenchmarkRoundOver10000Pods", "process-cpu-ms/round", "reported (issue 4 sets no target)", nil},
	{"BenchmarkRoundOver10000Pods", "x-chaoskube-cpu", "reported: Quartet ÷ chaoskube, CPU per round (issue 15)", nil},
	{"BenchmarkRoundOver10000Pods", "x-chaoskube-api-calls", "reported: Quartet ÷ chaoskube, API calls per round (issue 15)", nil},
	{"BenchmarkGuardChecksPerRound", "api-calls/round", "guards read Deployments from the cache: no API call per round while they hold (issue 25)", is(0)},
	{"BenchmarkGuardChecksPerRound", "http-requests/round", "one request per HTTP guard per round (issue 25)", is(2)},
	{"BenchmarkGuardChecksPerRound", "x-apiserver-gets", "reported: guard checks from the cache ÷ the same checks with a GET per Deployment (issue 25)", nil},
	{"BenchmarkGuardChecksPerRound", "x-status-write", "reported: guard checks ÷ the status write every round makes anyway (issue 25)", nil},
	{"BenchmarkMirrorsToReady", "api-writes/mirror", "≤ 8 API writes per mirror from create to Ready (issue 23)", atMost(8)},
	{"BenchmarkMirrorsToReady", "x-raw-create", "100 mirrors to Ready ≤ 2× raw-creating their objects (issue 15)", atMost(2)},
	{"BenchmarkMirrorsToReady", "x-raw-create-until-workloads-ready", "reported: ÷ the same objects created raw and their workloads rolled out by the cluster (issue 23)", nil},
	{"BenchmarkMirrorsToReady", "raw-apply-over-create", "reported: server-side applying the objects ÷ creating them, both raw (issue 23)", nil},
	{"BenchmarkManagerIdle", "MB-idle-rss", "reported: idle RSS, all four controllers, nothing to do, about 19 MB of it k8s.io/apiserver linked by the metrics authentication filter; BenchmarkBigCluster's targets replace the 45 MB target (issue 23)", nil},
	{"BenchmarkManagerIdle", "api-writes-other/min", "steady state: no periodic writes but the ChaosAgent's rounds, which write by design (issue 15)", is(0)},
	{"BenchmarkManagerIdle", "api-reads-not-from-cache/min", "steady state: reads only from caches (issue 15)", is(0)},
	{"BenchmarkManagerIdle", "cpu-ms/min", "reported: steady-state CPU (issue 15)", nil},
	{"BenchmarkManagerIdle", "api-reviews/min", "reported: steady state, SubjectAccessReviews and TokenReviews, which change nothing (Copyrator's consent refresh) (issue 23)", nil},
	{"BenchmarkBigCluster", "MB-growth-unrelated", "RSS ≤ idle + 15 MB with 137,000 objects Quartet does not own: 100,000 ConfigMaps, 20,000 Secrets, 10,000 pods, 5,000 Deployments, 2,000 namespaces (issue 23)", atMost(15)},
	{"BenchmarkBigCluster", "x-growth-per-owned-MB", "RSS growth over idle with 1,000 CopyratorRules ≤ 1.5× the data of the copies Quartet owns (issue 23)", atMost(1.5)},
	{"BenchmarkBigCluster", "x-heap-growth-per-owned-MB", "reported: live-heap growth over idle with the rules ÷ the data of the copies (issue 23)", nil},
	{"BenchmarkBigCluster", "s-start-to-ready-100pct", "start to ready ≤ 10 s at full size (issue 23)", atMost(10)},
	{"BenchmarkBigCluster", "watches-held-100pct", "reported: API watches the manager holds at full size (issue 23)", nil},
	{"BenchmarkBigCluster", "watches-held-rules", "reported: API watches the manager holds with 1,000 rules in one namespace (issue 23)", nil},
	{"BenchmarkMirrorPull50MB", "x-direct-pull", "a 50 MB pull through the warm mirror ≤ 1.2× the same pull straight from the upstream (issue 22)", atMost(1.2)},
	{"BenchmarkMirrorPull50MB", "s-create-to-first-pull", "reported: RegistryMirror create to the first pod running from a pull through it (issue 12)", nil},
	{"BenchmarkMirrorFallback", "x-direct-pull", "with the mirror's registry down (frozen, noticed by the node agent) a pull ≤ 1.5× the same pull straight from the upstream (issue 22)", atMost(1.5)},
	{"BenchmarkMirrorFallback", "s-pull-at-freeze", "reported: a pull that starts as the registry freezes (issue 22)", nil},
	{"BenchmarkMirrorWarm", "s-create-to-10-images-cached", "reported: a new mirror warming 10 images the pods run, create to imagesCached 10 (issue 22)", nil},
}

// whyNot says what is known of why a target is missed, keyed by benchmark and metric; it is
// printed under the Targets table only when the run misses that target.
var whyNot = map[[2]string]string{
	{"BenchmarkFanOut1000", "x-raw-create-protobuf"}: "Where the time goes (the benchmark's log, per round): the manager's first copy write " +
		"follows the rule's creation by about 20 ms and the last copy is seen within a few ms of the last write's answer; the rest is " +
		"the 1,000 creates. A copy carries labels and annotations a bare Secret does not (the rule it belongs to, its source, its " +
		"content hash): x-raw-create-same-copy compares with the tuned loop creating that very Secret. The rounds spread widely " +
		"(x-raw-create-protobuf-min and -max, below): a round of 1,000 creates takes under a second on two cores shared with the " +
		"API server, etcd and the cluster's controllers, and any hiccup of theirs moves it by tens of percent.",
	{"BenchmarkUpdatePropagation1000", "x-raw-patch"}: "The update reaches the manager's first copy write in ms-update-to-first-write and " +
		"the last copy is seen about a millisecond after the last write's answer (ms-last-write-to-seen): the rest is the 1,000 " +
		"patches. Each of the manager's patches carries, besides the data, three ownership tests (a copy is written only while it is " +
		"still the rule's, so no one else's object of the name is overwritten) and the content-hash and source annotations: " +
		"x-raw-same-patch compares with the tuned loop sending that very patch to look-alike Secrets, and x-same-patch-over-plain " +
		"is that patch sent raw ÷ the plain data patch: the floor of this ratio with the manager adding nothing. Dropping the tests would let a copy overwrite " +
		"an object of the same name that stopped being the rule's between the cache's view and the write. Beyond that the API server " +
		"delivers every changed copy to the manager's copy cache and to the benchmark's own watch, which the look-alikes do not have. " +
		"The rounds spread widely (x-raw-patch-min and -max, below), as in BenchmarkFanOut1000: nine rounds of about a second each " +
		"do not pin this ratio to a tenth.",
	{"BenchmarkFanOutScale", "x-raw-protobuf-10000"}: "Three rounds at 10,000 namespaces. The copies carry the labels and annotations a " +
		"bare Secret does not (the rule they belong to, their source, their content hash): x-raw-same-copy-10000 compares with the " +
		"tuned loop creating that very Secret, and s-raw-same-copy-10000 over s-raw-protobuf-10000 is what those fields alone cost. " +
		"The rounds spread widely (x-raw-protobuf-10000-min and -max, below), as in BenchmarkFanOut1000.",
	{"BenchmarkNewNamespaceLatency", "x-p99-replicator"}: newNamespaceWhy,
	{"BenchmarkNewNamespaceLatency", "x-p50-replicator"}: newNamespaceWhy,
	{"BenchmarkMirrorsToReady", "x-raw-create"}: "Ready waits for the cluster's controllers to roll out what the mirror owns (the " +
		"registry's pod with its volume bound, the node agents' pods). The same objects created raw need " +
		"s-raw-600-objects-until-workloads-ready until their workloads are ready, itself more than twice ms-raw-create-600-objects: " +
		"the floor of this ratio is above 2 on this cluster. Against that floor the mirrors take x-raw-create-until-workloads-ready.",
	{"BenchmarkMirrorsToReady", "api-writes/mirror"}: "Six server-side applies (two Services, StatefulSet, DaemonSet, PVC, the registry's ConfigMap), the first status " +
		"(observedGeneration, Ready=False with the reason the mirror is waiting for) and Ready=True make 8. " +
		"Progress-only changes between those two are held for 5 s and written together (docs/registrymirror.md); a figure above 8 " +
		"is such progress written for mirrors whose rollout took longer.",
	{"BenchmarkBigCluster", "x-growth-per-owned-MB"}: "The live heap the manager keeps grows by x-heap-growth-per-owned-MB times the " +
		"copies' data: Copyrator caches each copy (a ConfigMap without its data but with its metadata, labels, annotations, the " +
		"cached content hash and size among them, and its index entry; about 2 KB a copy in heap profiles of 2026-11-25, twice the " +
		"1 KiB of data it stands for), and keeps per rule its copy counts and the rules' cache. RSS grows further: the Go runtime " +
		"(GOGC=100) lets the heap reach twice the live heap before it collects, and what the burst of 10,000 writes used and freed " +
		"goes back to the system only gradually (the runtime's background scavenger), so 20 s after the copies exist RSS is still " +
		"well above twice the live heap. The cache holds no data, so the ratio falls as copies grow: with copies of 1 KiB the " +
		"bookkeeping alone exceeds 1.5×.",
}

// newNamespaceWhy explains a miss of BenchmarkNewNamespaceLatency's targets against the peer.
const newNamespaceWhy = "A new namespace costs the manager one request, its copy's create (api-calls/namespace; the source's body is " +
	"remembered with its version), as it costs the peer. p99 over 200 namespaces is a round's second slowest, and one hiccup of " +
	"the two cores that the API server, etcd, the manager, the peer and the benchmark share moves it: the rounds spread widely " +
	"(the ratios' -min and -max, below)."

// verdict is a goal set against a run's figures.
type verdict struct {
	goal
	Value, Met string // the run's figure or "not measured"; "yes", "no", or "—" without a target
	Why        string // what is known of why the run misses the target
}

type verdicts []verdict

// Missed are the verdicts that say why their target is missed.
func (vs verdicts) Missed() verdicts {
	return slices.DeleteFunc(slices.Clone(vs), func(v verdict) bool { return v.Why == "" })
}

// judge sets the performance targets against this run's figures.
func judge(results []result) (vs verdicts) {
	figures := map[[2]string]string{} // benchmark and metric → value; the last benchmark of a name wins
	for _, r := range results {
		for _, m := range r.Metrics {
			figures[[2]string{r.Name, m[1]}] = m[0]
		}
	}
	for _, g := range goals {
		key := [2]string{g.Bench, g.Metric}
		v := verdict{goal: g, Value: cmp.Or(figures[key], "not measured"), Met: "no"}
		switch x, err := number(figures[key]); {
		case figures[key] == "": // not measured
		case g.met == nil:
			v.Met = "—"
		case err == nil && g.met(x):
			v.Met = "yes"
		default:
			v.Why = whyNot[key]
		}
		vs = append(vs, v)
	}
	return vs
}

// keepLeftOut orders results as order (the previous report's benchmarks, with their package
// directories) and adds those results lack whose function is still in its package's tests,
// with their figures from all; a benchmark the previous report did not have goes after the
// last of its package.
func keepLeftOut(results, order []result, all map[string][][2]string) []result {
	byName := map[string]result{}
	for _, r := range results {
		byName[r.Name] = r
	}
	var out []result
	placed := map[string]bool{}
	for _, k := range order {
		if r, ran := byName[k.Name]; ran {
			out, placed[k.Name] = append(out, r), true
			continue
		}
		if k.Pkg != "" && !slices.Contains(realNodeBenchmarks, k.Name) && benchExists(module+"/"+k.Pkg, k.Name) {
			out = append(out, result{Pkg: module + "/" + k.Pkg, Name: k.Name, Kept: true, Metrics: all[k.Name]})
		}
	}
	for _, r := range results {
		if placed[r.Name] {
			continue
		}
		if last := lastOf(out, r.Pkg); last >= 0 {
			out = slices.Insert(out, last+1, r)
		} else {
			out = append(out, r)
		}
	}
	return out
}

// lastOf is the index of the last result of package pkg in rs; -1 when none.
func lastOf(rs []result, pkg string) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Pkg == pkg {
			return i
		}
	}
	return -1
}

// benchExists reports whether the benchmark function is in the package's test files.
func benchExists(pkg, name string) bool {
	fn, _, _ := strings.Cut(name, "/")
	files, _ := filepath.Glob(filepath.Join(dir(pkg), "*_test.go"))
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), "func "+fn+"(") {
			return true
		}
	}
	return false
}

// realNodeBenchmarks are the benchmarks, all in test/e2e, only `make bench NODE=real` runs
// (root, the real node).
var realNodeBenchmarks = []string{"BenchmarkMirrorPull50MB", "BenchmarkMirrorFallback", "BenchmarkMirrorWarm"}

// isPeerMetric tells the metrics measured on a peer, which only runs when its binary is given.
func isPeerMetric(unit string) bool {
	return strings.Contains(unit, "replicator") || strings.Contains(unit, "chaoskube")
}

// keepPeerFigures adds to results the peer metrics (and the real node's benchmarks) that
// this run did not measure but the previous report had, each value followed by "(run of
// <date>)" unless it already says which run it is from; and the benchmarks a partial run
// (make bench BENCH=…) left out, when their function is still in their package's tests.
func keepPeerFigures(results []result, previous string) []result {
	_, date, _ := strings.Cut(previous, "Generated by `make bench` on ")
	date, _, _ = strings.Cut(date, ".")
	old := map[string][][2]string{} // benchmark → figures to keep
	all := map[string][][2]string{} // benchmark → every figure, dated
	var order []result              // the previous report's benchmarks, by package, in order
	bench, pkg := "", ""
	for line := range strings.Lines(previous) {
		if heading, ok := strings.CutPrefix(line, "## `"); ok {
			pkg, _, _ = strings.Cut(heading, "`")
			bench = ""
		}
		if name, ok := strings.CutPrefix(line, "### "); ok {
			bench = strings.TrimSpace(name)
			order = append(order, result{Pkg: pkg, Name: bench})
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if bench == "" || len(cells) != 2 {
			continue
		}
		unit, value := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if value == "" || unit == "metric" || strings.HasPrefix(unit, "---") {
			continue
		}
		if !strings.Contains(value, "(run of ") && date != "" {
			value += " (run of " + date + ")"
		}
		all[bench] = append(all[bench], [2]string{value, unit})
		if isPeerMetric(unit) || slices.Contains(realNodeBenchmarks, bench) {
			old[bench] = append(old[bench], [2]string{value, unit})
		}
	}
	results = keepLeftOut(results, order, all)
	for _, bench := range realNodeBenchmarks {
		if len(old[bench]) > 0 && !slices.ContainsFunc(results, func(r result) bool { return r.Name == bench }) {
			results = append(results, result{Pkg: module + "/test/e2e", Name: bench, Kept: true})
		}
	}
	for i, r := range results {
		for _, m := range old[r.Name] {
			if _, has := results[i].Figures()[m[1]]; !has && (r.Kept || isPeerMetric(m[1])) {
				results[i].Metrics = append(results[i].Metrics, m)
			}
		}
	}
	return results
}
