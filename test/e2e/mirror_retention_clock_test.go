package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/internal/hoststoml"
	"github.com/quartet-operator/quartet/test/realnode"
)

// TestMirrorRegistryKeepsWhatWasPulledSinceItsFirstFetch is issue 22's retention timeline on
// the real node, with the mirror-registry image and the node's containerd: two images are
// pulled through it at t0; one of them again (a cache hit) before the retention ends; the
// upstream stops; once the other image has been evicted (a retention after its only pull),
// the first image's first fetch is more than a retention ago, yet a pod of it, gone from the
// node, starts from the cache, and the other image's pull fails.
//
// The operator's API allows no retention under 1h, so this runs the registry image the
// operator deploys in a pod of its own (the command line the operator renders, with
// --retention=60s and a 2s eviction interval) and points the node's containerd at it with a
// hosts.toml of its own. What is decided is decided by the registry's own clock: the test
// waits for the eviction it logs, and checks the times it measured around the pulls.
func TestMirrorRegistryKeepsWhatWasPulledSinceItsFirstFetch(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const ns, retention = "mirror-retention-clock", 60 * time.Second
	up, err := env.StartUpstreamRegistry(5009, "", "", "")
	require.NoError(t, err)
	t.Cleanup(up.Stop)
	push := func(repo string) (string, string) {
		img, layer, err := env.TestImage(t, 256<<10)
		require.NoError(t, err)
		ref, err := up.Push(repo, "1", img)
		require.NoError(t, err)
		return ref, layer
	}
	usedRef, usedLayer := push("library/used")
	unusedRef, unusedLayer := push("library/unused")

	reg := startMirrorRegistryPod(t, ns, "registry", "http://"+up.Host, retention)
	hostsPath := filepath.Join(env.Cluster.Node.CertsDir, up.Host, "hosts.toml")
	require.NoError(t, os.MkdirAll(filepath.Dir(hostsPath), 0o755))
	hosts, err := hoststoml.Render("", hoststoml.File{
		Server: "http://" + up.Host,
		Mirror: hoststoml.Host{URL: "http://" + reg.Status.PodIP + ":5000", Capabilities: []string{"pull", "resolve"}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hostsPath, hosts, 0o644))
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(hostsPath)) })
	logOf := func() string {
		b, err := env.Clientset.CoreV1().Pods(ns).GetLogs(reg.Name, &corev1.PodLogOptions{Container: "registry"}).DoRaw(ctx)
		require.NoError(t, err)
		return string(b)
	}

	// t0: both images are fetched from the upstream through the registry.
	firstFetch := time.Now()
	usedPod := runImage(t, ns, "used-first", usedRef)
	unusedPod := runImage(t, ns, "unused-first", unusedRef)
	unusedLastPull := time.Now()
	require.NotEmpty(t, fetchers(logOf(), "/v2/library/used/blobs/"+usedLayer), "the node pulled through the registry")
	require.NotEmpty(t, fetchers(logOf(), "/v2/library/unused/blobs/"+unusedLayer))
	removeImage(t, ns, usedPod, "library/used")
	removeImage(t, ns, unusedPod, "library/unused")

	// Near the end of the retention, the used image is pulled again: its layer from the cache.
	time.Sleep(time.Until(firstFetch.Add(retention / 2)))
	upstreamFetches := len(fetchers(up.Log(), "/v2/library/used/blobs/"+usedLayer))
	again := runImage(t, ns, "used-again", usedRef)
	lastPull := time.Now()
	require.Equal(t, upstreamFetches, len(fetchers(up.Log(), "/v2/library/used/blobs/"+usedLayer)), "the second pull's layer came from the cache")
	removeImage(t, ns, again, "library/used")
	up.Stop() // the outside connection goes

	// The registry evicts the unused image a retention after its only pull...
	require.NoError(t, realnode.WaitFor(ctx, "the unused image's layer evicted", 2*retention, func(ctx context.Context) (bool, string, error) {
		return strings.Contains(evictionLines(logOf()), unusedLayer), "not yet", nil
	}))
	evicted := time.Now()
	t.Logf("evicted %s after its only pull (retention %s); eviction log:\n%s", evicted.Sub(unusedLastPull).Round(time.Second), retention, evictionLines(logOf()))
	// ...and, though the used image was fetched as long ago, keeps it: pulled since.
	require.True(t, evicted.After(firstFetch.Add(retention)), "first fetch + retention has passed")
	require.NotContains(t, evictionLines(logOf()), usedLayer, "the used image's layer is kept")
	served := len(fetchers(logOf(), "/v2/library/used/blobs/"+usedLayer))
	runImage(t, ns, "used-from-cache", usedRef)
	startedBy := time.Now()
	require.Greater(t, len(fetchers(logOf(), "/v2/library/used/blobs/"+usedLayer)), served, "the registry served the layer from its cache")
	require.True(t, startedBy.Before(lastPull.Add(retention)), "still within a retention of the last pull (%s after it): otherwise the test was too slow to prove anything",
		startedBy.Sub(lastPull).Round(time.Second))
	t.Logf("the pod started %s after the first fetch, %s after the last pull (retention %s)",
		startedBy.Sub(firstFetch).Round(time.Second), startedBy.Sub(lastPull).Round(time.Second), retention)
	why := pullFails(t, ns, "unused-after", unusedRef)
	t.Logf("the evicted image, the upstream gone: %s", why)
	timing("mirror-registry (retention 60s): first fetch to a pod served from the cache after it", firstFetch)
}

// evictionLines are the registry's "Evicted cached content" log lines.
func evictionLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `msg="Evicted cached content"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// startMirrorRegistryPod runs the mirror-registry image the operator deploys as a pod of
// its own in front of upstream, with the operator's command line but a short retention
// and eviction interval, its cache on an emptyDir, and waits until it is ready.
func startMirrorRegistryPod(t *testing.T, ns, name, upstream string, retention time.Duration) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"config.yml": fmt.Sprintf(
		"version: 0.1\nlog: {level: info, formatter: text}\nhttp: {addr: \":5000\", draintimeout: 5s}\n"+
			"storage: {filesystem: {rootdirectory: /var/lib/registry}}\nproxy: {remoteurl: %q}\n", upstream)}}
	require.NoError(t, env.Client.Create(ctx, cm))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "registry", Image: realnode.MirrorRegistryImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/mirror-registry"},
				Args: []string{"--config=/etc/distribution/config.yml", "--retention=" + retention.String(), "--max-disk-percent=0",
					"--eviction-interval=2s", "--save-interval=2s"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 5000}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(5000)}},
					PeriodSeconds: 1},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/var/lib/registry"}, {Name: "config", MountPath: "/etc/distribution"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}},
			},
		},
	}
	require.NoError(t, env.Client.Create(ctx, pod))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod) })
	require.NoError(t, realnode.WaitFor(ctx, "mirror-registry pod "+name+" ready", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.Status.PodIP != "" {
				return true, "", nil
			}
		}
		return false, string(pod.Status.Phase), nil
	}))
	return pod
}
