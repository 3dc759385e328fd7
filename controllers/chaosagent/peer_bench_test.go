package chaosagent

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/test/benchutil"
)

// peerInterval is the time between rounds for chaoskube (--interval) and for the ChaosAgent
// of BenchmarkRoundOver10000Pods (pauseDuration: 1).
const peerInterval = time.Second

// peerRounds is what a peer did over the rounds of a measurement window.
type peerRounds struct {
	rounds  int64
	calls   map[string]int
	cpu     time.Duration // the peer process's user+system CPU
	apiCPU  time.Duration // kube-apiserver's CPU over the same window; negative if unknown
	wall    time.Duration
	formats map[string]map[string]int
}

// measureChaoskube runs linki/chaoskube (the binary benchutil.EnvChaoskube names) in dry-run
// over the pods of the namespaces labelled chaos-test=sel, through a counting proxy, and
// measures benchRounds rounds after two warm-up rounds. It returns nil when no binary is given.
func measureChaoskube(b *testing.B, sel string) *peerRounds {
	b.Helper()
	bin := benchutil.PeerBinary(b, benchutil.EnvChaoskube)
	if bin == "" {
		b.Logf("%s not set: chaoskube is not measured", benchutil.EnvChaoskube)
		return nil
	}
	ctx := context.Background()
	proxy := benchutil.StartCountingProxy(b, env.Config)
	addr := freeLoopbackAddr(b)
	p := benchutil.StartProcess(b, "chaoskube", bin, nil,
		"--kubeconfig="+proxy.Kubeconfig(b),
		"--interval="+peerInterval.String(),
		"--namespace-labels=chaos-test="+sel,
		"--max-kill=10", // the ChaosAgent's maxActionsPerRound
		"--dry-run",
		"--metrics-address="+addr)
	defer p.Stop()

	// chaoskube_intervals_total counts the returns of TerminateVictims (one LIST and decision
	// each), incremented just before chaoskube waits for its next tick; errors_total counts
	// the rounds that failed, which still count as intervals.
	var last map[string]float64
	scrape := func() bool {
		m, err := scrapeCounters("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		last = m
		return true
	}
	// The first round runs at start-up, the second on the first tick; both are discarded.
	require.True(b, benchutil.WaitFor(ctx, 3*time.Minute, func() bool {
		return scrape() && last["chaoskube_intervals_total"] >= 2
	}), "chaoskube warm-up rounds")
	i0, e0 := last["chaoskube_intervals_total"], last["chaoskube_errors_total"]
	proxy.Calls.Reset()
	cpu0, err := p.CPU()
	require.NoError(b, err)
	api0 := apiServerCPU()
	start := time.Now()
	// No scrape while the rounds run, so the metrics handler adds to chaoskube's CPU only at
	// the end of the window.
	time.Sleep(benchRounds*peerInterval - peerInterval/2)
	require.True(b, benchutil.WaitFor(ctx, 2*time.Minute, func() bool {
		return scrape() && last["chaoskube_intervals_total"] >= i0+benchRounds
	}), "chaoskube rounds")
	cpu1, err := p.CPU()
	require.NoError(b, err)
	api1 := apiServerCPU()
	out := &peerRounds{
		rounds:  int64(last["chaoskube_intervals_total"] - i0),
		calls:   proxy.Calls.Snapshot(),
		cpu:     cpu1 - cpu0,
		apiCPU:  -1,
		wall:    time.Since(start),
		formats: proxy.Formats(),
	}
	if api0 >= 0 && api1 >= 0 {
		out.apiCPU = api1 - api0
	}
	require.Zero(b, last["chaoskube_errors_total"]-e0, "chaoskube rounds failed")
	for k := range out.calls {
		require.False(b, strings.HasPrefix(k, "DELETE "), "chaoskube in dry-run deleted: %s", k)
	}
	b.Logf("chaoskube: %d rounds in %s, CPU %s, API calls %v, response formats %v",
		out.rounds, out.wall.Round(time.Millisecond), out.cpu, out.calls, out.formats)
	return out
}

// scrapeCounters reads the unlabelled samples of a Prometheus text exposition.
func scrapeCounters(url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// freeLoopbackAddr returns 127.0.0.1:<a port free a moment ago>.
func freeLoopbackAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	addr := l.Addr().String()
	require.NoError(b, l.Close())
	return addr
}

// apiServerCPU returns the CPU kube-apiserver has used so far, or -1 when it is not known
// (no local cluster).
func apiServerCPU() time.Duration {
	if env.Cluster == nil {
		return -1
	}
	for _, p := range env.Cluster.Processes {
		if p.Name == "kube-apiserver" {
			if cpu, err := benchutil.ProcCPU(p.PID); err == nil {
				return cpu
			}
		}
	}
	return -1
}

// roundsMetric reads quartet_chaosagent_rounds_total of an agent in-process: following the
// rounds this way costs no API call.
func roundsMetric(agent string) float64 {
	var m dto.Metric
	if err := roundsTotal.WithLabelValues(agent).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
