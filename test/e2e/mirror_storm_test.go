package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/controllers/registrymirror"
	"github.com/quartet-operator/quartet/test/realnode"
)

// upstreamGets counts the GETs of path (query aside) the upstream answered with 200, from its
// access log: fetches of the content (a HEAD is not one).
func upstreamGets(log, path string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if _, method, ok := accessed(line, path); ok && method == "GET" {
			n++
		}
	}
	return n
}

// TestMirrorPullStormFetchesEachBlobOnce is a pull storm on a cold mirror (issue 42): while
// the upstream is held still (its process stopped), a crowd of clients on the node asks the
// mirror's node endpoint for every blob of a new image, and a Deployment's pods start on
// that image through the mirror. Once every request waits on the upstream, it goes on: every
// client gets every blob whole, every pod runs, the mirror counts one fetch per blob and
// requests that read another's fetch, and the upstream's access log shows each blob fetched
// (GET) once.
func TestMirrorPullStormFetchesEachBlobOnce(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	ctx := context.Background()
	const ns, repo, clients, replicas = "mirror-storm", "storm/app", 12, 3
	up, err := env.StartUpstreamRegistry(5016, "", "", "")
	require.NoError(t, err)
	t.Cleanup(up.Stop) // a frozen registry is killed too
	img, _, err := env.TestImage(t, 8<<20)
	require.NoError(t, err)
	ref, err := up.Push(repo, "1", img)
	require.NoError(t, err)
	manifest, err := img.Manifest()
	require.NoError(t, err)
	blobs := []string{manifest.Config.Digest.String()}
	for _, l := range manifest.Layers {
		blobs = append(blobs, l.Digest.String())
	}
	m := newMirror(t, ns, "storm", "http://"+up.Host, "", pullResolve)
	before, err := mirrorCacheReport(ctx, ns, m.Name)
	require.NoError(t, err)

	require.NoError(t, up.Freeze())
	frozen := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			_ = up.Thaw()
		}
	}()

	// The crowd: every client asks for every blob at once, through the node's endpoint.
	tr, err := env.Cluster.RegistryTransport()
	require.NoError(t, err)
	hc := &http.Client{Transport: tr, Timeout: 3 * time.Minute}
	var wg sync.WaitGroup
	var ended atomic.Int32
	errs := make(chan error, clients*len(blobs))
	for range clients {
		for _, b := range blobs {
			wg.Go(func() {
				err := fetchBlob(ctx, hc, m.Status.NodeEndpoint+"/v2/"+repo+"/blobs/"+b, b)
				ended.Add(1)
				errs <- err
			})
		}
	}
	// The pods: the kubelet's pull goes through the mirror too (hosts.toml).
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "storm", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "storm"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "storm"}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers:                    []corev1.Container{{Name: "main", Image: ref, Command: []string{"sleep", "3600"}}},
				},
			},
		},
	}
	require.NoError(t, env.Client.Create(ctx, dep))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), dep) })

	// Every client's request has reached the mirror once each has its connection to the
	// node endpoint (the relay passes it on at once); the mirror holds them all, asking the
	// frozen upstream first. Going on, they all ask for the blob at once.
	nodePort, err := strconv.Atoi(m.Status.NodeEndpoint[strings.LastIndex(m.Status.NodeEndpoint, ":")+1:])
	require.NoError(t, err)
	require.NoError(t, realnode.WaitFor(ctx, "every client's request held by the mirror", time.Minute, func(ctx context.Context) (bool, string, error) {
		if ended.Load() > 0 {
			return false, "", realnode.Failed{Reason: fmt.Sprintf("a client's request ended while the upstream was frozen: %v", <-errs)}
		}
		n, err := connectionsTo(ctx, nodePort)
		return err == nil && n >= clients*len(blobs), fmt.Sprintf("%d connections", n), err
	}))
	time.Sleep(time.Second) // the requests' bytes follow their connections; the upstream stays frozen meanwhile
	t.Logf("upstream frozen %s: %d blob requests waiting (%d blobs)", time.Since(frozen).Round(time.Millisecond), clients*len(blobs), len(blobs))

	since := time.Now()
	require.NoError(t, up.Thaw())
	thawed = true
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	timing(fmt.Sprintf("pull storm: upstream on again to %d clients with every blob (%d blobs)", clients, len(blobs)), since)
	require.NoError(t, env.WaitDeploymentAvailable(ctx, ns, dep.Name, 3*time.Minute))
	timing(fmt.Sprintf("pull storm: upstream on again to %d pods of the new image running", replicas), since)

	log := up.Log()
	for _, b := range blobs {
		require.Equal(t, 1, upstreamGets(log, "/v2/"+repo+"/blobs/"+b), "the upstream served blob %s once", b)
	}
	after, err := mirrorCacheReport(ctx, ns, m.Name)
	require.NoError(t, err)
	require.EqualValues(t, len(blobs), after.UpstreamFetches-before.UpstreamFetches, "one fetch per blob, the pods' pulls included")
	require.Zero(t, after.UpstreamFetchFailures-before.UpstreamFetchFailures)
	require.Positive(t, after.CoalescedWaiters-before.CoalescedWaiters, "requests read another's fetch as it arrived")
	t.Logf("upstream: each of %d blobs fetched once, manifest GETs %d; mirror: %d fetches, %d blob and %d manifest waiters, %d bytes fetched",
		len(blobs), upstreamGets(log, "/v2/"+repo+"/manifests/1"), after.UpstreamFetches-before.UpstreamFetches,
		after.CoalescedWaiters-before.CoalescedWaiters, after.CoalescedManifestWaiters-before.CoalescedManifestWaiters,
		after.UpstreamFetchedBytes-before.UpstreamFetchedBytes)
}

// fetchBlob GETs a blob and checks that what came is the blob of that digest.
func fetchBlob(ctx context.Context, hc *http.Client, url, digest string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("GET %s: content of %s", url, got)
	}
	return nil
}

// connectionsTo counts the established TCP connections to port in the node's network
// namespace, from their client's end (/proc/net/tcp and tcp6 there).
func connectionsTo(ctx context.Context, port int) (int, error) {
	out, err := env.Cluster.NodeCommand(ctx, "cat", "/proc/net/tcp", "/proc/net/tcp6").Output()
	if err != nil {
		return 0, err
	}
	suffix := fmt.Sprintf(":%04X", port)
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[2], suffix) && f[3] == "01" { // remote address, state ESTABLISHED
			n++
		}
	}
	return n, nil
}

// mirrorCacheReport reads the mirror registry's own report (GET /quartet/cache) through its
// Service, from the node.
func mirrorCacheReport(ctx context.Context, ns, name string) (registrymirror.CacheReport, error) {
	var rep registrymirror.CacheReport
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-registry"}, svc); err != nil {
		return rep, err
	}
	tr, err := env.Cluster.RegistryTransport()
	if err != nil {
		return rep, err
	}
	url := fmt.Sprintf("http://%s:%d/quartet/cache", svc.Spec.ClusterIP, registrymirror.RegistryPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return rep, err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return rep, json.NewDecoder(resp.Body).Decode(&rep)
}
