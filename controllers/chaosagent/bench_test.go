package chaosagent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

const (
	benchPods       = 10000
	benchNamespaces = 10
	benchRounds     = 5
)

// processCPU returns the CPU time (user and system) this process has used.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRoundOver10000Pods runs a dry-run agent with every mode on over 10,000 running pods
// (plus the ConfigMaps of their namespaces), a round every second (pauseDuration 1, at most 10
// actions), and measures, after two warm-up rounds, the API calls per round counted at the
// manager's client and the process CPU per round. A round reads pods, Deployments,
// HorizontalPodAutoscalers, ConfigMaps and Namespaces from the manager's informer cache (pods,
// ConfigMaps and Namespaces as metadata only), makes no LIST, and writes the agent's status
// and two Events per action, one on the target and one on the agent. process-cpu-ms/round is
// the CPU of the whole benchmark process (getrusage): the manager with its informers and the
// Go runtime, plus what the benchmark does meanwhile, which is kept to reading the rounds
// metric in-process and a few GETs of the agent at the end of the window. The informers'
// initial LISTs fall in the warm-up, outside every figure per round.
// apiserver-cpu-ms/round is kube-apiserver's CPU over the same window, the background load of
// the local cluster (controller-manager, scheduler, kwok) included. The decision alone (reading
// the cache and deciding) is timed in-process too. The baseline is a round without an informer
// cache: one LIST each of pods, Deployments and ConfigMaps straight from the API server, timed
// on the same API server with a tuned client-go client.
//
// The peer is linki/chaoskube v0.39.1, run before the manager starts (never at the same time)
// over the same pods: `chaoskube --dry-run --interval=1s --namespace-labels=chaos-test=<the
// agent's label> --max-kill=10`, its requests counted by a proxy in front of the API server.
// Its rounds are read from its chaoskube_intervals_total metric, scraped only at the ends of
// the window; two warm-up rounds are discarded and a failed round fails the benchmark. Each
// chaoskube round LISTs every pod of the cluster from the API server (whole objects, in
// protobuf, client-go's default) and the namespaces that match the label, filters them and
// logs the 10 pods it would delete; in dry-run it writes nothing, and it only ever deletes
// pods, where the agent also scales Deployments and rewrites ConfigMaps. So
// x-chaoskube-api-calls (the agent's calls per round over chaoskube's) above 1 means the
// agent makes more calls, small writes, against chaoskube's two LISTs, one of them 10,000
// pods long. chaoskube-cpu-ms/round is the chaoskube process's own CPU (from /proc), and
// x-chaoskube-cpu divides process-cpu-ms/round by it: the agent's figure covers the whole
// benchmark process and chaoskube's only chaoskube, so the ratio leans against Quartet.
// Neither covers the API server, which serves chaoskube's LISTs: chaoskube-apiserver-cpu-ms/round
// is kube-apiserver's CPU per chaoskube round, to set against apiserver-cpu-ms/round. The
// counting proxy runs in the benchmark process and is in neither figure. When a chaoskube
// round takes longer than the interval, as on a busy machine, its ticker drops ticks and the
// rounds run back to back; the figures per round hold.
func BenchmarkRoundOver10000Pods(b *testing.B) {
	env.Require(b)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(benchutil.TunedConfig(env.Config))
	require.NoError(b, err)

	sel := "bench-" + rand.String(5)
	namespaces, err := benchutil.CreateNamespaces(ctx, cs, sel, benchNamespaces)
	require.NoError(b, err)
	for _, ns := range namespaces {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(b, err)
		n.Labels = map[string]string{"chaos-test": sel}
		_, err = cs.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(b, err)
	}
	// The ServiceAccount admission plugin refuses pods until each namespace has its default account.
	require.Eventually(b, func() bool {
		for _, ns := range namespaces {
			if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err != nil {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond)

	// Pods bound straight to the kwok node (no scheduling), which runs them.
	start := time.Now()
	require.NoError(b, benchutil.Parallel(ctx, benchPods, func(i int) error {
		ns := namespaces[i%benchNamespaces]
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%50)}},
			Spec: corev1.PodSpec{NodeName: "kwok-node-0", AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/fake:1"}}},
		}, metav1.CreateOptions{})
		return err
	}))
	b.Logf("created %d pods in %s", benchPods, time.Since(start).Round(time.Millisecond))
	require.Eventually(b, func() bool {
		running := 0
		for _, ns := range namespaces {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return false
			}
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
		}
		return running == benchPods
	}, 5*time.Minute, 3*time.Second, "kwok runs every pod")
	b.Logf("%d pods running after %s", benchPods, time.Since(start).Round(time.Millisecond))
	b.Cleanup(func() {
		for _, ns := range namespaces {
			_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
	})

	// Baseline: a round without a cache, three LISTs.
	naiveCPU0, naiveStart := processCPU(b), time.Now()
	for i := 0; i < benchRounds; i++ {
		_, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		require.NoError(b, err)
		_, err = cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
		require.NoError(b, err)
		_, err = cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
		require.NoError(b, err)
	}
	naiveCPU := (processCPU(b) - naiveCPU0) / benchRounds
	naiveWall := time.Since(naiveStart) / benchRounds

	// The peer runs before the manager starts, so the two are never measured at once.
	peer := measureChaoskube(b, sel)

	// The controller, its client counted.
	var counter benchutil.CallCounter
	cfg := rest.CopyConfig(env.Config)
	counter.Wrap(cfg)
	r := startManager(b, cfg, &Options{}, scope.Namespaces{Operator: operatorNamespace})
	agent := &blackadderv1beta1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Name: sel},
		Spec: blackadderv1beta1.ChaosAgentSpec{
			DryRun: true, TantrumMode: true, CancerMode: true, IpsumMode: true,
			Eagerness: 100, PauseDuration: 1, MaxActionsPerRound: 10, Seed: ptr.To[int64](1),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"chaos-test": sel}},
		},
	}
	require.NoError(b, env.Client.Create(ctx, agent))
	b.Cleanup(func() { _ = env.Client.Delete(ctx, agent) })
	rounds := func() int64 {
		got := &blackadderv1beta1.ChaosAgent{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(agent), got); err != nil {
			return -1
		}
		return got.Status.Rounds
	}
	require.Eventually(b, func() bool { return rounds() >= 2 }, 3*time.Minute, 100*time.Millisecond, "warm-up rounds")

	// The warm-up wait returns within a poll of round 2's status write, while the agent waits
	// out its pause: the window opens between rounds. The rounds are then followed in-process
	// (the rounds metric, no API call) and the status is read only once the last round has
	// begun, so the benchmark's own reads add a few GETs to the process's CPU rather than one
	// every 50 ms (they go through env.Client, which the counter does not see).
	b.ResetTimer()
	r0, m0 := rounds(), roundsMetric(agent.Name)
	counter.Reset()
	cpu0, api0 := processCPU(b), apiServerCPU()
	require.True(b, benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return roundsMetric(agent.Name) >= m0+benchRounds }), "rounds")
	require.Eventually(b, func() bool { return rounds() >= r0+benchRounds }, time.Minute, 20*time.Millisecond, "status of the last round")
	cpu, api1 := processCPU(b)-cpu0, apiServerCPU()
	ran := rounds() - r0
	b.StopTimer()
	calls := counter.Snapshot()
	b.Logf("API calls over %d rounds: %v", ran, calls)
	lists, statusWrites, events := 0, 0, 0
	for k, v := range calls {
		switch {
		case strings.HasPrefix(k, "GET ") && !isNamedGet(k):
			lists += v
		case strings.HasSuffix(k, "/status"):
			statusWrites += v
		case strings.Contains(k, "/events"):
			events += v
		}
	}

	// The decision alone, in-process: read 10,000 pods (and the rest) from the cache, select, decide.
	spec := withDefaults(agent.Spec)
	scope, err := r.scopeOf(spec)
	require.NoError(b, err)
	decideCPU0 := processCPU(b)
	decideStart := time.Now()
	var candidates int
	for i := 0; i < benchRounds; i++ {
		inv, _, err := r.inventory(ctx, agent, spec, true)
		require.NoError(b, err)
		c := selectCandidates(inv, scope)
		candidates = len(c.Pods)
		require.Len(b, decide(spec, c, seededRand(agent, int64(i))), 10)
	}
	decideCPU := (processCPU(b) - decideCPU0) / benchRounds
	decideWall := time.Since(decideStart) / benchRounds
	require.Equal(b, benchPods, candidates)

	b.ReportMetric(float64(counter.Total())/float64(ran), "api-calls/round")
	b.ReportMetric(float64(lists)/float64(ran), "list-calls/round")
	b.ReportMetric(float64(statusWrites)/float64(ran), "status-writes/round")
	b.ReportMetric(float64(events)/float64(ran), "event-writes/round")
	b.ReportMetric(3, "naive-list-calls/round")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(ran), "process-cpu-ms/round")
	b.ReportMetric(float64(decideCPU.Microseconds())/1000, "decide-cpu-ms/round")
	b.ReportMetric(float64(decideWall.Microseconds())/1000, "decide-wall-ms/round")
	b.ReportMetric(float64(naiveCPU.Microseconds())/1000, "naive-list-cpu-ms/round")
	b.ReportMetric(float64(naiveWall.Microseconds())/1000, "naive-list-wall-ms/round")
	b.ReportMetric(benchPods, "pods")
	if api0 >= 0 && api1 >= 0 {
		b.ReportMetric(float64((api1-api0).Microseconds())/1000/float64(ran), "apiserver-cpu-ms/round")
	}
	if peer != nil {
		peerTotal, peerLists := 0, 0
		for k, v := range peer.calls {
			peerTotal += v
			if strings.HasPrefix(k, "GET ") && !isNamedGet(k) {
				peerLists += v
			}
		}
		peerCalls := float64(peerTotal) / float64(peer.rounds)
		peerCPU := float64(peer.cpu.Microseconds()) / 1000 / float64(peer.rounds)
		b.ReportMetric(peerCalls, "chaoskube-api-calls/round")
		b.ReportMetric(float64(peerLists)/float64(peer.rounds), "chaoskube-list-calls/round")
		b.ReportMetric(peerCPU, "chaoskube-cpu-ms/round")
		if peer.apiCPU >= 0 {
			b.ReportMetric(float64(peer.apiCPU.Microseconds())/1000/float64(peer.rounds), "chaoskube-apiserver-cpu-ms/round")
		}
		if peerCalls > 0 {
			b.ReportMetric(float64(counter.Total())/float64(ran)/peerCalls, "x-chaoskube-api-calls")
		}
		if peerCPU > 0 {
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(ran)/peerCPU, "x-chaoskube-cpu")
		}
	}
}

// isNamedGet reports whether "GET /path" reads one object rather than a collection: a
// collection path ends with a resource name that the counted resources use.
func isNamedGet(key string) bool {
	for _, coll := range []string{"/pods", "/deployments", "/configmaps", "/horizontalpodautoscalers", "/namespaces", "/chaosagents", "/events"} {
		if len(key) >= len(coll) && key[len(key)-len(coll):] == coll {
			return false
		}
	}
	return true
}

const (
	benchDeploymentGuards = 8
	benchHTTPGuards       = 2
)

// BenchmarkGuardChecksPerRound measures what the guards cost a round: an agent with 8
// Deployment guards and 2 HTTP guards (a server on loopback, allowed by the flag), checked as
// a round checks them (checkGuards, all holding, so all are checked). Deployment guards read
// the manager's informer cache, so a check makes no API call (api-calls/round, counted at
// the manager's client) and one request per HTTP guard (http-requests/round, counted at the
// server). Two baselines come from the same run: the same checks with each Deployment read
// by a GET from the API server instead of the cache (x-apiserver-gets: the cached checks'
// wall time over theirs), and one status write of the agent, which every round makes anyway
// (x-status-write: the guard checks' wall time over a status PATCH's). Each figure is per
// round over b.N rounds; `make bench` runs one (-benchtime 1x), so it is one cold round.
func BenchmarkGuardChecksPerRound(b *testing.B) {
	env.Require(b)
	ctx := context.Background()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)

	ns := "guards-" + rand.String(5)
	require.NoError(b, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	b.Cleanup(func() { _ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	var guards []blackadderv1beta1.SteadyStateGuard
	for i := 0; i < benchDeploymentGuards; i++ {
		// No replicas, so no pods: the floor is 50% of 0, and the check is the same read.
		d := testenv.Deployment(ns, fmt.Sprintf("app-%d", i), 0)
		require.NoError(b, env.Client.Create(ctx, d))
		guards = append(guards, blackadderv1beta1.SteadyStateGuard{Name: d.Name, Deployment: &blackadderv1beta1.DeploymentGuard{
			Namespace: ns, Name: d.Name, MinReady: intstr.FromString("50%")}})
	}
	for i := 0; i < benchHTTPGuards; i++ {
		guards = append(guards, blackadderv1beta1.SteadyStateGuard{Name: fmt.Sprintf("http-%d", i), HTTP: &blackadderv1beta1.HTTPGuard{
			URL: fmt.Sprintf("%s/healthz/%d", srv.URL, i), ExpectedStatus: 200, TimeoutSeconds: 5}})
	}

	var counter benchutil.CallCounter
	cfg := rest.CopyConfig(env.Config)
	counter.Wrap(cfg)
	r := startManager(b, cfg, &Options{GuardAllowedCIDRs: "127.0.0.0/8"}, scope.Namespaces{Operator: operatorNamespace})
	agent := &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: "guards-" + rand.String(5)},
		Spec: blackadderv1beta1.ChaosAgentSpec{Paused: true, Guards: guards}}
	require.NoError(b, env.Client.Create(ctx, agent))
	b.Cleanup(func() {
		// Released by the manager (its finalizer) before the manager stops.
		_ = env.Client.Delete(ctx, agent)
		require.Eventually(b, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(agent), &blackadderv1beta1.ChaosAgent{}))
		}, time.Minute, 100*time.Millisecond)
	})

	// Warm-up: the first check starts the Deployment informer, and the controller's own
	// pass over the paused agent (finalizer, status) is done before anything is counted.
	require.Eventually(b, func() bool {
		v := r.checkGuards(ctx, guards)
		got := &blackadderv1beta1.ChaosAgent{}
		return len(v) == len(guards) && firstFailure(v) == nil &&
			env.Client.Get(ctx, client.ObjectKeyFromObject(agent), got) == nil && got.Status.ObservedGeneration == got.Generation
	}, time.Minute, 100*time.Millisecond, "every guard holds and the agent is reconciled")

	// Baseline: the same checks, each Deployment read from the API server.
	direct := &Reconciler{Client: directReads{Client: r.Client, reader: r.APIReader}, APIReader: r.APIReader, HTTP: r.HTTP, Watched: r.Watched}

	b.ResetTimer()
	counter.Reset()
	hits0 := hits.Load()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if v := r.checkGuards(ctx, guards); firstFailure(v) != nil {
			b.Fatalf("guard failed: %+v", firstFailure(v))
		}
	}
	cached := time.Since(start) / time.Duration(b.N)
	b.StopTimer()
	apiCalls := counter.Total()
	httpRequests := hits.Load() - hits0

	start = time.Now()
	for i := 0; i < b.N; i++ {
		if v := direct.checkGuards(ctx, guards); firstFailure(v) != nil {
			b.Fatalf("guard failed: %+v", firstFailure(v))
		}
	}
	gets := time.Since(start) / time.Duration(b.N)

	// Baseline: one status write of the agent, as every round makes.
	got := &blackadderv1beta1.ChaosAgent{}
	require.NoError(b, env.Client.Get(ctx, client.ObjectKeyFromObject(agent), got))
	start = time.Now()
	for i := 0; i < b.N; i++ {
		base := got.DeepCopy()
		got.Status.Rounds++
		require.NoError(b, env.Client.Status().Patch(ctx, got, client.MergeFrom(base)))
	}
	statusWrite := time.Since(start) / time.Duration(b.N)

	b.ReportMetric(float64(cached.Microseconds()), "guard-check-us/round")
	b.ReportMetric(float64(apiCalls)/float64(b.N), "api-calls/round")
	b.ReportMetric(float64(httpRequests)/float64(b.N), "http-requests/round")
	b.ReportMetric(float64(gets.Microseconds()), "apiserver-gets-us/round")
	b.ReportMetric(float64(statusWrite.Microseconds()), "status-write-us")
	b.ReportMetric(float64(cached)/float64(gets), "x-apiserver-gets")
	b.ReportMetric(float64(cached)/float64(statusWrite), "x-status-write")
}

// directReads reads with reader (the API server) what the manager's client would read
// from its cache.
type directReads struct {
	client.Client
	reader client.Reader
}

func (d directReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return d.reader.Get(ctx, key, obj, opts...)
}

const benchImmutable = 10

// BenchmarkRoundOverImmutableConfigMaps measures what the agents' memory of immutable
// ConfigMaps buys (the In-memory state table of Reconciler): an ipsum agent (eagerness 100, at
// most 10 actions) over a namespace holding 10 immutable ConfigMaps runs rounds as a pass runs
// them (runRound), once keeping its memory and once dropping it before every round (forget,
// as a restart would). After a first round that finds each ConfigMap immutable, it reports per
// round the GETs of ConfigMaps (a round reads a ConfigMap's body before it overwrites it), all
// API calls counted at the manager's client (the GETs and the Events of the skips; the event
// library sends a repeated Event once more as a series, then holds it), and the action slots
// spent on Skipped: Immutable.
func BenchmarkRoundOverImmutableConfigMaps(b *testing.B) {
	env.Require(b)
	ctx := context.Background()
	sel := "imm-" + rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sel, Labels: map[string]string{"chaos-test": sel}}}
	require.NoError(b, env.Client.Create(ctx, ns))
	b.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })
	for i := 0; i < benchImmutable; i++ {
		require.NoError(b, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sel, Name: fmt.Sprintf("frozen-%d", i)},
			Data: map[string]string{"k": "v"}, Immutable: ptr.To(true)}))
	}
	var counter benchutil.CallCounter
	cfg := rest.CopyConfig(env.Config)
	counter.Wrap(cfg)
	r := startManager(b, cfg, &Options{}, scope.Namespaces{Operator: operatorNamespace})
	// The agent is never created: only runRound acts for it, not the manager's passes.
	agent := &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: sel, UID: types.UID(sel)},
		Spec: withDefaults(blackadderv1beta1.ChaosAgentSpec{IpsumMode: true, Eagerness: 100, Seed: ptr.To[int64](1),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"chaos-test": sel}}})}
	sc, err := r.scopeOf(agent.Spec)
	require.NoError(b, err)
	require.Eventually(b, func() bool {
		inv, _, err := r.inventory(ctx, agent, agent.Spec, false)
		return err == nil && len(selectCandidates(inv, sc).ConfigMaps) == benchImmutable
	}, time.Minute, 100*time.Millisecond, "the cache holds the ConfigMaps")

	measure := func(remember bool) (gets, calls, skips float64) {
		r.forget(agent.Name)
		_, err := r.runRound(ctx, agent, agent.Spec, sc, r.memoryOf(agent), r.Clock.Now())
		require.NoError(b, err)
		time.Sleep(time.Second) // the first round's Events are sent
		counter.Reset()
		immutable := 0
		for i := 0; i < benchRounds; i++ {
			if !remember {
				r.forget(agent.Name)
			}
			out, err := r.runRound(ctx, agent, agent.Spec, sc, r.memoryOf(agent), r.Clock.Now())
			require.NoError(b, err)
			for _, rec := range out.Records {
				if rec.Outcome == skipped(SkipImmutable) {
					immutable++
				}
			}
		}
		time.Sleep(time.Second) // the rounds' Events are sent
		for k, v := range counter.Snapshot() {
			if strings.HasPrefix(k, "GET ") && strings.Contains(k, "/configmaps/") {
				gets += float64(v)
			}
		}
		return gets / benchRounds, float64(counter.Total()) / benchRounds, float64(immutable) / benchRounds
	}
	b.ResetTimer()
	gets, calls, skips := measure(true)
	forgetGets, forgetCalls, forgetSkips := measure(false)
	b.StopTimer()
	r.forget(agent.Name)
	b.ReportMetric(gets, "configmap-gets/round")
	b.ReportMetric(calls, "api-calls/round")
	b.ReportMetric(skips, "immutable-skips/round")
	b.ReportMetric(forgetGets, "without-memory-configmap-gets/round")
	b.ReportMetric(forgetCalls, "without-memory-api-calls/round")
	b.ReportMetric(forgetSkips, "without-memory-immutable-skips/round")
}
