package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/internal/hoststoml"
)

// TestMirrorDownFallsBackToTheUpstreamFast (issue 22, part 5): the mirror's registry
// freezes (its container paused: connections open, nothing answers, as a hung process or
// a stalled disk does) while the upstream is up. A pull that starts at that moment must
// not wait on the mirror for ever: the node agent's probe finds the registry silent, cuts
// the connection containerd waits on and turns new ones away, and containerd pulls from
// the upstream. Measured against a direct pull of an image of the same size, by the
// kubelet's own pull time (median of fallbackRounds pulls of the same image, removed from
// the node in between): a pull started right at the freeze, and pulls started once the
// agent has noticed. On the code before this change the first pull hangs.
func TestMirrorDownFallsBackToTheUpstreamFast(t *testing.T) {
	requireEnv(t)
	f := measureFallback(t, "mirror-fallback", 5011)
	record("pull of a 4 MiB-layer image straight from the upstream (kubelet's pull time, median)", f.direct)
	record("the same size with the mirror's registry frozen at the pull's start (waits for the agent to notice)", f.atFreeze)
	record("the same image with the mirror's registry frozen, noticed by the agent (median)", f.noticedPull)
	record("the node agent noticing the frozen registry, from the freeze", f.noticed)
	t.Logf("pull times: direct %v (median); mirror frozen at the pull's start %v (%.2f×); mirror frozen and noticed %v (median, %.2f×); the agent noticed %v after the freeze",
		f.direct, f.atFreeze, float64(f.atFreeze)/float64(f.direct), f.noticedPull, float64(f.noticedPull)/float64(f.direct), f.noticed)
}

// fallback is what measureFallback measured.
type fallback struct {
	// direct: the median pull straight from the upstream, no mirror; atFreeze: a pull
	// started at the freeze; noticedPull: the median pull once the agent has noticed;
	// noticed: from the freeze to the agent's log line.
	direct, atFreeze, noticedPull, noticed time.Duration
}

// measureFallback runs the measurement of TestMirrorDownFallsBackToTheUpstreamFast (and
// BenchmarkMirrorFallback) in namespace ns with an upstream on port, and checks each pull
// took the path it should.
func measureFallback(t testing.TB, ns string, port int) fallback {
	t.Helper()
	ctx := context.Background()
	const name, size = "fallback", 4 << 20
	up, direct, directLayer := upstreamWithImage(t, port, "", "", "", "library/direct", size)
	img, _, err := env.TestImage(t, size)
	require.NoError(t, err)
	atFreeze, err := up.Push("library/at-freeze", "1", img)
	require.NoError(t, err)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	var f fallback

	// The baseline: the node pulls straight from the (plain-HTTP) upstream, no mirror.
	hostsPath := filepath.Join(env.Cluster.Node.CertsDir, up.Host, "hosts.toml")
	require.NoError(t, os.MkdirAll(filepath.Dir(hostsPath), 0o755))
	hosts, err := hoststoml.Render("", hoststoml.File{
		Server: "http://" + up.Host,
		Mirror: hoststoml.Host{URL: "http://" + up.Host, Capabilities: []string{"pull", "resolve"}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hostsPath, hosts, 0o644))
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(hostsPath)) })
	f.direct = medianPull(t, ns, "direct", direct, "library/direct")
	require.NoError(t, os.Remove(hostsPath), "the node agent writes the mirror's own")

	m := newMirror(t, ns, name, "http://"+up.Host, "", pullResolve)
	t.Cleanup(func() { deleteMirrorAndWaitForHostsFile(t, m, up.Host) })
	hosts, err = os.ReadFile(hostsPath)
	require.NoError(t, err)
	require.Contains(t, string(hosts), m.Status.NodeEndpoint, "pulls of the upstream's host go to the mirror first")

	// The registry freezes.
	id := registryContainer(t, ns, name+"-registry-0")
	ctr(t, "tasks", "pause", id)
	frozen := time.Now()
	t.Cleanup(func() {
		_, _ = env.Cluster.NodeCommand(context.Background(), "ctr", "--address", env.Cluster.Node.ContainerdSocket, "--namespace", "k8s.io",
			"tasks", "resume", id).CombinedOutput()
	})

	// A pull right at the freeze: it waits until the agent notices, then goes direct.
	f.atFreeze = pullDuration(t, runImage(t, ns, "at-freeze", atFreeze))
	agent := agentPod(t, ns, name)
	line := requireContainerLogLine(t, ns, agent, "node-agent", "The registry does not answer; turning connections away so containerd pulls from the upstream")
	t.Logf("the node agent: %s", line)
	f.noticed = logTime(t, line).Sub(frozen)

	// Pulls once the agent has noticed: straight to the upstream after one refused
	// connection per request.
	fetched := len(fetchers(up.Log(), "/v2/library/direct/blobs/"+directLayer))
	f.noticedPull = medianPull(t, ns, "after-notice", direct, "library/direct")
	fetchedBy := fetchers(up.Log(), "/v2/library/direct/blobs/"+directLayer)[fetched:]
	require.Len(t, fetchedBy, fallbackRounds, "each pull fetched the layer from the upstream once")
	for _, addr := range fetchedBy {
		require.False(t, strings.HasPrefix(addr, "10.244."), "the node fetched the layer itself, not the mirror's pod: %s", addr)
	}

	// The registry answers again: the agent relays again.
	ctr(t, "tasks", "resume", id)
	requireContainerLogLine(t, ns, agent, "node-agent", "The registry answers again; relaying")
	return f
}

// fallbackRounds is how many pulls a median of TestMirrorDownFallsBackToTheUpstreamFast
// takes: one pull of a few MiB on loopback varies by tens of milliseconds.
const fallbackRounds = 5

// medianPull pulls image fallbackRounds times in pods name-1, name-2, …, removing it from
// the node after each, and returns the median of the kubelet's pull times.
func medianPull(t testing.TB, ns, name, image, repo string) time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := 1; i <= fallbackRounds; i++ {
		pod := runImage(t, ns, fmt.Sprintf("%s-%d", name, i), image)
		ds = append(ds, pullDuration(t, pod))
		removeImage(t, ns, pod, repo)
	}
	t.Logf("%s: kubelet's pull times %v", name, ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// agentPod is the node agent pod of mirror ns/name (the node is the only one).
func agentPod(t testing.TB, ns, mirror string) string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(context.Background(), pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/instance": mirror, "app.kubernetes.io/component": "node-agent"}))
	require.Len(t, pods.Items, 1, "one node agent pod")
	return pods.Items[0].Name
}

// logTime is the time= of a log/slog text line.
func logTime(t testing.TB, line string) time.Time {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "time="); ok {
			ts, err := time.Parse(time.RFC3339Nano, v)
			require.NoError(t, err, "time= of %q", line)
			return ts
		}
	}
	require.Failf(t, "no time= in the line", "%q", line)
	return time.Time{}
}
