package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/test/realnode"
)

// TestMirrorKeepsLastUsesAcrossARestart is the part of issue 22's acceptance the operator's
// mirror can show on the real node: the API allows no retention under 1h, so "still served
// after first fetch + retention because it was pulled since" is proven with a fake clock in
// cmd/mirror-registry (TestMirrorKeepsContentUsedWithinRetention), and with the image and
// the node's containerd in a pod of the test's own with a 60s retention
// (TestMirrorRegistryKeepsWhatWasPulledSinceItsFirstFetch). Here, with the images and the
// install users get: the mirror runs the mirror-registry image with the retention and disk
// bound of its spec, as the UID the pod names, not root; an image is pulled through it twice
// (the second time from the cache); the upstream stops; the registry pod is deleted, drains
// and saves the last uses into its state file on the cache volume (written by that UID), and
// its replacement reads them back; a pod of the image, gone from the node, starts again from
// the cache. The mirror is deleted at the end, its hosts.toml with it.
func TestMirrorKeepsLastUsesAcrossARestart(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const ns, name = "mirror-retention", "kept"
	up, ref, layer := upstreamWithImage(t, 5008, "", "", "", "library/kept", 512<<10)
	m := newMirror(t, ns, name, "http://"+up.Host, "", pullResolve)
	// Registered after newMirror's grant, so it runs before the grant is revoked: the mirror
	// goes and takes its hosts.toml off the node before the next test looks at the node's
	// hosts.toml files (TestMirrorServesPullsAndOutlivesItsUpstream compares them).
	t.Cleanup(func() { deleteMirrorAndWaitForHostsFile(t, m, up.Host) })

	sts := &appsv1.StatefulSet{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-registry"}, sts))
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	require.Equal(t, realnode.MirrorRegistryImage, c.Image, "the CSV's RELATED_IMAGE_REGISTRY")
	require.Equal(t, []string{"/mirror-registry"}, c.Command)
	require.Equal(t, []string{"--config=/etc/distribution/config.yml", "--retention=720h0m0s", "--max-disk-percent=85",
		"--pinned-file=/etc/distribution/pinned-images"}, c.Args,
		"the API server's defaults of spec.retention and spec.maxDiskPercent")
	require.NotNil(t, pod.SecurityContext.RunAsUser)
	uid := *pod.SecurityContext.RunAsUser
	require.NotZero(t, uid, "not root")
	first := registryPod(t, ns, name)
	requireLogLine(t, ns, first.Name, "Serving the mirror", "retention=720h0m0s", "maxDiskPercent=85")

	removeImage(t, ns, runImage(t, ns, "first-pull", ref), "library/kept")
	second := time.Now()
	again := runImage(t, ns, "second-pull", ref)
	require.GreaterOrEqual(t, len(fetchers(registryLog(t, m), "/v2/library/kept/blobs/"+layer)), 2, "both pulls went through the mirror")

	// The outside connection goes, and the registry pod with it (a node drain, an eviction).
	up.Stop()
	since := time.Now()
	require.NoError(t, env.Client.Delete(ctx, first))
	var next *corev1.Pod
	require.NoError(t, realnode.WaitFor(ctx, "a new registry pod, ready", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.Name}, p); err != nil {
			if apierrors.IsNotFound(err) {
				return false, "not found", nil
			}
			return false, "", err
		}
		if p.UID == first.UID {
			return false, "the old pod is terminating", nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				next = p
				return true, "", nil
			}
		}
		return false, string(p.Status.Phase), nil
	}))
	timing("registry pod deleted (drain, state saved) to its replacement ready", since)

	// The state file on the cache volume: written by the pod's UID, with the second pull.
	lastUse, owner := stateFileOnNode(t, ns, name+"-registry-cache")
	require.Equal(t, uint32(uid), owner, "the state file was written by the registry's UID %d", uid)
	require.Contains(t, lastUse, layer)
	require.GreaterOrEqual(t, lastUse[layer], second.Unix()-1, "the layer's last use is the second pull, a cache hit")
	line := requireLogLine(t, ns, next.Name, "Restored cache last uses", "usedNow=0")
	t.Logf("the new registry pod: %s", line)

	// The node loses the image; a new pod starts from the cache, the upstream still gone.
	removeImage(t, ns, again, "library/kept")
	served := len(fetchers(registryLog(t, m), "/v2/library/kept/blobs/"+layer))
	runImage(t, ns, "after-restart", ref)
	require.Greater(t, len(fetchers(registryLog(t, m), "/v2/library/kept/blobs/"+layer)), served,
		"the new registry pod served the layer from the cache")
}

// registryPod is the mirror's registry pod.
func registryPod(t testing.TB, ns, mirror string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: mirror + "-registry-0"}, p))
	return p
}

// requireLogLine waits until the registry container of pod logged a line with msg
// (logrus' msg="...") and each of fields (key=value), and returns it.
func requireLogLine(t testing.TB, ns, pod, msg string, fields ...string) string {
	t.Helper()
	return requireContainerLogLine(t, ns, pod, "registry", msg, fields...)
}

// requireContainerLogLine waits until container of pod logged a line with msg (logrus' or
// slog's msg="...") and each of fields (key=value), and returns it.
func requireContainerLogLine(t testing.TB, ns, pod, container, msg string, fields ...string) string {
	t.Helper()
	var found string
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("%s logging %q", pod, msg), time.Minute, func(ctx context.Context) (bool, string, error) {
		b, err := env.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.Contains(l, `msg="`+msg+`"`) {
				continue
			}
			ok := true
			for _, f := range fields {
				ok = ok && strings.Contains(l, " "+f)
			}
			if ok {
				found = l
				return true, "", nil
			}
		}
		return false, "no such line yet", nil
	}))
	return found
}

// stateFileOnNode reads mirror-registry's state file (<rootdirectory>/quartet/last-use) from
// the host directory of the PersistentVolume bound to claim (the real node's hostPath
// provisioner): digest -> unix seconds, and the file's owner.
func stateFileOnNode(t *testing.T, ns, claim string) (map[string]int64, uint32) {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc))
	pv := &corev1.PersistentVolume{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv))
	require.NotNil(t, pv.Spec.HostPath, "the real node's volumes are host directories")
	path := filepath.Join(pv.Spec.HostPath.Path, "quartet", "last-use")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && strings.HasPrefix(f[0], "sha256:") {
			sec, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err, "%s: %q", path, l)
			out[f[0]] = sec
		}
	}
	return out, fi.Sys().(*syscall.Stat_t).Uid
}

// deleteMirrorAndWaitForHostsFile deletes mirror m and waits until its node agent took the
// hosts.toml of upstream host off the node.
func deleteMirrorAndWaitForHostsFile(t testing.TB, m *mirrorsv1alpha1.RegistryMirror, host string) {
	t.Helper()
	ctx := context.Background()
	hostsPath := filepath.Join(env.Cluster.Node.CertsDir, host, "hosts.toml")
	if err := env.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	require.NoError(t, realnode.WaitFor(ctx, "mirror "+m.Namespace+"/"+m.Name+" deleted, its hosts.toml removed", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		_, err := os.Stat(hostsPath)
		return os.IsNotExist(err), fmt.Sprint(err), nil
	}))
}
