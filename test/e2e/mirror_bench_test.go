package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/hoststoml"
	"github.com/quartet-operator/quartet/test/realnode"
)

// pullRounds is how many pulls of each kind the benchmark times (it reports the median).
const pullRounds = 3

// BenchmarkMirrorPull50MB measures on the real node, in one run: a RegistryMirror from
// create to the first pod running from an image pulled through it (cold cache: the mirror
// fetches from the upstream), then pulls of an image with a 50 MB layer (random, so
// incompressible) by a node that does not have it, straight from the upstream registry
// (its 127.0.0.1 name, which no mirror configures) and through the warm mirror (its node
// IP name, configured by the mirror's hosts.toml). Each pull is a new pod with the image
// removed from containerd first; the time is the kubelet's own measure of the pull (its
// Pulled Event: "Successfully pulled image … in 1.2s"), so pod start-up is not in it. The
// access logs prove which path each pull took.
func BenchmarkMirrorPull50MB(b *testing.B) {
	if env == nil {
		b.Skip("set QUARTET_REAL_NODE=1 to run the real-node benchmarks (make bench NODE=real; needs root)")
	}
	const ns, port = "mirror-bench", 5006
	up, viaMirror, layer := upstreamWithImage(b, port, "", "", "", "library/big", 50<<20)
	direct := strings.Replace(viaMirror, up.Host, fmt.Sprintf("127.0.0.1:%d", port), 1)
	blob := "/v2/library/big/blobs/" + layer

	for i := 0; i < b.N; i++ {
		ctx := context.Background()
		require.NoError(b, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns, i)}}))
		nsi := fmt.Sprintf("%s-%d", ns, i)
		m := &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: nsi},
			Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: "http://" + up.Host, Storage: resource.MustParse("1Gi"), ConfigureNodes: true}}
		// The cluster admin's grant comes first: create to Ready measures the mirror, not
		// the admin. Pull and resolve, as before grants existed.
		grantNodes(b, nsi, m.Name, m.Spec.Upstream, false, pullResolve)
		since := time.Now()
		require.NoError(b, env.Client.Create(ctx, m))
		require.NoError(b, env.WaitMirrorReady(ctx, nsi, m.Name, 4*time.Minute))
		ready := time.Since(since)
		require.NoError(b, env.Client.Get(ctx, client.ObjectKeyFromObject(m), m))
		pod := runImage(b, nsi, "first", viaMirror)
		first := time.Since(since)
		require.NotEmpty(b, fetchers(registryLog(b, m), blob), "the first pull went through the mirror")

		var directs, warms []time.Duration
		for r := range pullRounds {
			removeImage(b, nsi, pod, "library/big")
			before := len(fetchers(up.Log(), blob))
			pod = runImage(b, nsi, fmt.Sprintf("direct-%d", r), direct)
			directs = append(directs, pullDuration(b, pod))
			byNode := fetchers(up.Log(), blob)[before:]
			require.NotEmpty(b, byNode, "the direct pull fetched the layer from the upstream")
			for _, addr := range byNode {
				require.True(b, strings.HasPrefix(addr, "127.0.0.1"), "the direct pull came from the node, not the mirror: %s", addr)
			}

			removeImage(b, nsi, pod, "library/big")
			before = len(fetchers(registryLog(b, m), blob))
			pod = runImage(b, nsi, fmt.Sprintf("mirror-%d", r), viaMirror)
			warms = append(warms, pullDuration(b, pod))
			require.Greater(b, len(fetchers(registryLog(b, m), blob)), before, "the warm pull was served by the mirror")
		}
		slices.Sort(directs)
		slices.Sort(warms)
		d, w := directs[pullRounds/2], warms[pullRounds/2]
		b.Logf("create to Ready %s, to first pull %s; direct pulls %v, warm mirror pulls %v", ready.Round(time.Millisecond), first.Round(time.Millisecond), directs, warms)
		b.ReportMetric(ready.Seconds(), "s-create-to-ready")
		b.ReportMetric(first.Seconds(), "s-create-to-first-pull")
		b.ReportMetric(d.Seconds(), "s-direct-pull")
		b.ReportMetric(w.Seconds(), "s-warm-mirror-pull")
		b.ReportMetric(w.Seconds()/d.Seconds(), "x-direct-pull")
		require.NoError(b, env.Client.Delete(ctx, m))
	}
}

// pulledIn is the duration in the kubelet's Pulled Event message.
var pulledIn = regexp.MustCompile(`Successfully pulled image "[^"]+" in ([0-9][0-9.hmsuµn]*) `)

// pullDuration waits for the kubelet's Pulled Event of pod and returns the pull's duration.
func pullDuration(b testing.TB, pod *corev1.Pod) time.Duration {
	b.Helper()
	var d time.Duration
	require.NoError(b, realnode.WaitFor(context.Background(), "the Pulled Event of "+pod.Name, time.Minute, func(ctx context.Context) (bool, string, error) {
		evs := &corev1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(pod.Namespace)); err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.UID != pod.UID || e.Reason != "Pulled" {
				continue
			}
			m := pulledIn.FindStringSubmatch(e.Message)
			if m == nil {
				return false, "", realnode.Failed{Reason: "not a fresh pull: " + e.Message}
			}
			var err error
			d, err = time.ParseDuration(m[1])
			return err == nil, e.Message, err
		}
		return false, "", nil
	}))
	return d
}

// BenchmarkMirrorFallback measures on the real node what TestMirrorDownFallsBackToTheUpstreamFast
// checks: with the mirror's only registry frozen (its container paused) while the upstream is
// up, the kubelet's pull time of a 4 MiB-layer image once the node agent has noticed, against
// the same pull straight from the upstream with no mirror (medians of fallbackRounds pulls
// each); a pull started at the freeze; and how long the agent took to notice.
func BenchmarkMirrorFallback(b *testing.B) {
	if env == nil {
		b.Skip("set QUARTET_REAL_NODE=1 to run the real-node benchmarks (make bench NODE=real; needs root)")
	}
	for i := 0; i < b.N; i++ {
		f := measureFallback(b, fmt.Sprintf("mirror-bench-fallback-%d", i), 5013)
		b.ReportMetric(f.direct.Seconds(), "s-direct-pull")
		b.ReportMetric(f.noticedPull.Seconds(), "s-mirror-down-pull")
		b.ReportMetric(f.noticedPull.Seconds()/f.direct.Seconds(), "x-direct-pull")
		b.ReportMetric(f.atFreeze.Seconds(), "s-pull-at-freeze")
		b.ReportMetric(f.noticed.Seconds(), "s-agent-notices")
	}
}

// warmImages is how many images BenchmarkMirrorWarm warms.
const warmImages = 10

// BenchmarkMirrorWarm measures on the real node how long a new mirror takes to warm the
// images the pods already run: warmImages images with a 1 MiB layer each, pulled by the node
// straight from the upstream before the mirror exists, then the mirror created; the time runs
// from its creation to status.imagesCached counting all of them. It includes the kubelet
// bringing the manager's new pinned-images list into the registry's ConfigMap volume (its
// periodic sync, up to about a minute), then the registry fetching each image.
func BenchmarkMirrorWarm(b *testing.B) {
	if env == nil {
		b.Skip("set QUARTET_REAL_NODE=1 to run the real-node benchmarks (make bench NODE=real; needs root)")
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		ns := fmt.Sprintf("mirror-bench-warm-%d", i)
		up, err := env.StartUpstreamRegistry(5014, "", "", "")
		require.NoError(b, err)
		require.NoError(b, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		hostsPath := filepath.Join(env.Cluster.Node.CertsDir, up.Host, "hosts.toml")
		require.NoError(b, os.MkdirAll(filepath.Dir(hostsPath), 0o755))
		hosts, err := hoststoml.Render("", hoststoml.File{
			Server: "http://" + up.Host,
			Mirror: hoststoml.Host{URL: "http://" + up.Host, Capabilities: []string{"pull", "resolve"}},
		})
		require.NoError(b, err)
		require.NoError(b, os.WriteFile(hostsPath, hosts, 0o644))
		for j := range warmImages {
			img, _, err := env.TestImage(b, 1<<20)
			require.NoError(b, err)
			ref, err := up.Push(fmt.Sprintf("library/warm-%02d", j), "1", img)
			require.NoError(b, err)
			runImage(b, ns, fmt.Sprintf("early-%02d", j), ref)
		}
		require.NoError(b, os.Remove(hostsPath), "the node agent writes the mirror's own")

		since := time.Now()
		m := newMirror(b, ns, "warm", "http://"+up.Host, "", pullResolve)
		waitMirror(b, m, fmt.Sprintf("%d images in use, %d cached", warmImages, warmImages), 5*time.Minute, func(m *mirrorsv1alpha1.RegistryMirror) bool {
			return m.Status.ImagesInUse != nil && *m.Status.ImagesInUse == warmImages && m.Status.ImagesCached != nil && *m.Status.ImagesCached == warmImages
		})
		warmed := time.Since(since)
		b.ReportMetric(warmed.Seconds(), fmt.Sprintf("s-create-to-%d-images-cached", warmImages))
		deleteMirrorAndWaitForHostsFile(b, m, up.Host)
		up.Stop()
	}
}
