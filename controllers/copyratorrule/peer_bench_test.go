package copyratorrule

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quartet-operator/quartet/test/benchutil"
)

// The peer of this package's benchmarks is mittwald/kubernetes-replicator (v2.12.4), run as a
// process through benchutil (see peer.go there). It copies by push replication: a source
// Secret annotated replicate-to-matching with a namespace label selector is copied, as a
// whole and serially, into every namespace the selector matches, and again into each new
// one. Push replication needs no --allow-all (only pull replication checks permissions).
// The copies keep the source's labels and carry the source's resourceVersion in
// replicated-from-version.
const (
	replicatorReplicateToMatching   = "replicator.v1.mittwald.de/replicate-to-matching"
	replicatorReplicatedFromVersion = "replicator.v1.mittwald.de/replicated-from-version"

	// peerTargetLabel marks the namespaces the peer's sources are pushed into; Quartet's
	// rules select copytest instead, so each sees only its own new namespaces.
	peerTargetLabel = "peertest"
	// peerSourceLabel names a peer source; its copies keep the label, so a watch finds them.
	peerSourceLabel = "peer-source"
	// peerTunedQPS is the tuned peer's client rate limit, the raw baseline's (TunedConfig).
	peerTunedQPS = "5000"
)

// replicatorPeer runs the replicator next to Quartet on a benchEnv's target namespaces.
type replicatorPeer struct {
	be *benchEnv
	// released and tuned are the binaries benchutil.EnvReplicator and EnvReplicatorTuned
	// name; "" when not given, and the benchmark leaves that peer's figures out.
	released, tuned string
	src             string // the namespace of the peer's sources
	proxy           *benchutil.CountingProxy
	kubeconfig      string // through proxy
}

// replicator prepares the peer for be, when a binary is given.
func (be *benchEnv) replicator(b *testing.B) *replicatorPeer {
	b.Helper()
	rp := &replicatorPeer{be: be,
		released: benchutil.PeerBinary(b, benchutil.EnvReplicator),
		tuned:    benchutil.PeerBinary(b, benchutil.EnvReplicatorTuned)}
	if rp.released == "" && rp.tuned == "" {
		return rp
	}
	rp.src = sourceNamespace(b, "psrc")
	rp.proxy = benchutil.StartCountingProxy(b, env.Config)
	rp.kubeconfig = rp.proxy.Kubeconfig(b)
	return rp
}

// start runs binary with kubeconfig (rp.kubeconfig: through the counting proxy) and waits
// until its Secret cache has synced and it sits idle. tuned sets its client limit to
// peerTunedQPS. Only the Secret replicator runs: the others would watch ConfigMaps, Roles,
// RoleBindings and ServiceAccounts that no benchmark asks it to copy.
func (rp *replicatorPeer) start(b *testing.B, binary string, tuned bool, kubeconfig string) *benchutil.Process {
	b.Helper()
	var extraEnv []string
	if tuned {
		extraEnv = []string{"PEER_KUBE_API_QPS=" + peerTunedQPS}
	}
	addr := freeAddr(b)
	viaProxy := kubeconfig == rp.kubeconfig
	if viaProxy {
		rp.proxy.Calls.Reset()
	}
	p := benchutil.StartProcess(b, "replicator", binary, extraEnv,
		"-kubeconfig", kubeconfig, "-status-addr", addr,
		"-replicate-configmaps=false", "-replicate-roles=false", "-replicate-role-bindings=false",
		"-replicate-service-accounts=false")
	ready := benchutil.WaitFor(context.Background(), 3*time.Minute, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		// /readyz covers the Secret cache only; the namespace watch has delivered its
		// initial list (every namespace, each handled in a goroutine) once it watches.
		calls := rp.proxy.Calls.Snapshot()
		return !viaProxy || calls["WATCH /api/v1/namespaces"] > 0 && calls["WATCH /api/v1/secrets"] > 0
	})
	if !ready {
		b.Fatalf("replicator not ready at %s within 3 minutes", addr)
	}
	time.Sleep(time.Second)
	return p
}

// freeAddr returns a loopback address with a port free at the time of the call.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// createSource creates a peer source named name, pushed into the namespaces labelled
// peertest=<id>, with the payload of Quartet's sources.
func (rp *replicatorPeer) createSource(b *testing.B, name string) *corev1.Secret {
	b.Helper()
	s := rp.be.source(name)
	s.Namespace = rp.src
	s.Labels = map[string]string{peerSourceLabel: name}
	s.Annotations = map[string]string{replicatorReplicateToMatching: peerTargetLabel + "=" + rp.be.id}
	created, err := rp.be.cs.CoreV1().Secrets(rp.src).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return created
}

// deleteSource deletes a peer source; with the peer stopped, its copies stay, and a later
// peer start finds no source to resync.
func (rp *replicatorPeer) deleteSource(b *testing.B, name string) {
	b.Helper()
	if err := rp.be.cs.CoreV1().Secrets(rp.src).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
}

// watch watches the copies of peer source name whose replicated-from-version satisfies
// version.
func (rp *replicatorPeer) watch(b *testing.B, name string, version func(string) bool) *copyWatch {
	b.Helper()
	return rp.be.watchSecrets(b, peerSourceLabel+"="+name, func(o metav1.Object) bool {
		v, ok := o.GetAnnotations()[replicatorReplicatedFromVersion]
		return ok && o.GetNamespace() != rp.src && version(v)
	})
}

func anyVersion(string) bool { return true }

// writesPerCopy returns the peer's writes since the last reset of the proxy's counts, per
// target namespace.
func (rp *replicatorPeer) writesPerCopy() float64 {
	return float64(rp.proxy.Calls.Total("POST", "PATCH", "PUT", "DELETE")) / float64(len(rp.be.targets))
}

// fanOut starts binary, creates source name and returns the seconds until every target
// namespace has its copy and the peer's writes per copy; the peer then stops and the source
// is deleted.
func (rp *replicatorPeer) fanOut(b *testing.B, binary string, tuned bool, name string, timeout time.Duration) (seconds, writesPerCopy float64) {
	b.Helper()
	p := rp.start(b, binary, tuned, rp.kubeconfig)
	defer p.Stop()
	cw := rp.watch(b, name, anyVersion)
	defer cw.stop()
	rp.proxy.Calls.Reset()
	start := time.Now()
	rp.createSource(b, name)
	seconds = cw.until(b, rp.be.targets, timeout).Sub(start).Seconds()
	writesPerCopy = rp.writesPerCopy()
	p.Stop()
	rp.deleteSource(b, name)
	return seconds, writesPerCopy
}

// updates starts the tuned peer, pushes source name into the target namespaces, then
// changes its content n times, each time measuring the seconds until every copy carries the
// new source version; it returns {seconds, writes per copy} per update.
func (rp *replicatorPeer) updates(b *testing.B, name string, n int) [][2]float64 {
	b.Helper()
	ctx := context.Background()
	p := rp.start(b, rp.tuned, true, rp.kubeconfig)
	defer p.Stop()
	cw := rp.watch(b, name, anyVersion)
	live := rp.createSource(b, name)
	cw.until(b, rp.be.targets, 5*time.Minute)
	cw.stop()
	var out [][2]float64
	for r := range n {
		// Every copy carries the version it was written from; the update's new version is
		// not known before the update returns, but the old one is.
		old := live.ResourceVersion
		uw := rp.watch(b, name, func(v string) bool { return v != old })
		live.Data["payload"] = []byte(strings.Repeat(fmt.Sprint(r%10), benchPayloadSize))
		rp.proxy.Calls.Reset()
		start := time.Now()
		var err error
		if live, err = rp.be.cs.CoreV1().Secrets(rp.src).Update(ctx, live, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		d := uw.until(b, rp.be.targets, 5*time.Minute).Sub(start).Seconds()
		out = append(out, [2]float64{d, rp.writesPerCopy()})
		uw.stop()
	}
	p.Stop()
	rp.deleteSource(b, name)
	return out
}

// newNamespaceLatency starts the tuned peer, pushes source name into the target namespaces
// and returns the latencies of latencySamples new namespaces only the peer's selector
// matches.
func (rp *replicatorPeer) newNamespaceLatency(b *testing.B, name string) []time.Duration {
	b.Helper()
	p := rp.start(b, rp.tuned, true, rp.kubeconfig)
	defer p.Stop()
	cw := rp.watch(b, name, anyVersion)
	defer cw.stop()
	rp.createSource(b, name)
	cw.until(b, rp.be.targets, 5*time.Minute)
	lat := rp.be.newNamespaceLatency(b, cw, "late-"+name, map[string]string{peerTargetLabel: rp.be.id})
	p.Stop()
	rp.deleteSource(b, name)
	return lat
}

// processRSS returns p's resident memory.
func processRSS(b *testing.B, p *benchutil.Process) uint64 {
	b.Helper()
	rss, err := p.RSS()
	if err != nil {
		b.Fatal(err)
	}
	return rss
}

// steadyRSS returns p's resident memory once it has changed by less than 1 MB over three
// seconds (at most two minutes): a process that caches what it watches has then taken in
// what the API server sent.
func steadyRSS(b *testing.B, p *benchutil.Process) uint64 {
	b.Helper()
	last := processRSS(b, p)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(3 * time.Second)
		now := processRSS(b, p)
		if diff := int64(now) - int64(last); diff < 1<<20 && diff > -(1<<20) {
			return now
		}
		last = now
	}
	return last
}
