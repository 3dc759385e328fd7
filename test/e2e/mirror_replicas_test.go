package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/test/realnode"
)

// TestMirrorServesWithAReplicaKilledMidPull (issue 22, part 3): a mirror of two replicas,
// each of which has warmed the 20 images the pods ran, serves 20 concurrent pulls with the
// upstream gone while one replica's registry is killed (SIGKILL) in the middle of them:
// every pod starts. A blob download that was running through the killed registry breaks;
// containerd does not resume it from the other replica, so that pull attempt fails and the
// kubelet's next attempt goes to the replica that is left. The test counts those attempts
// (and those the kubelet's own pull rate limit, registryPullQPS, refuses) and requires the
// killed registry to have been serving the test's blobs when it died.
func TestMirrorServesWithAReplicaKilledMidPull(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const ns, name, pulls, size = "mirror-replicas", "ha", 20, 4 << 20
	up, err := env.StartUpstreamRegistry(5012, "", "", "")
	require.NoError(t, err)
	t.Cleanup(up.Stop)
	refs, repos := make([]string, pulls), make([]string, pulls)
	for i := range pulls {
		img, _, err := env.TestImage(t, size)
		require.NoError(t, err)
		repos[i] = fmt.Sprintf("library/ha-%02d", i)
		refs[i], err = up.Push(repos[i], "1", img)
		require.NoError(t, err)
	}

	m := newMirror(t, ns, name, "http://"+up.Host, "", pullResolve)
	t.Cleanup(func() { deleteMirrorAndWaitForHostsFile(t, m, up.Host) })
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Replicas = ptr.To[int32](2)
	// Both volumes stay above the disk bound all along (a volume on a node's shared disk
	// can be): nothing pulled within the registry's minimum age is evicted for it, so
	// the images stay while the pods that pinned them are gone and their successors wait.
	// (A 91% full host disk once evicted them a minute after the warm pods went.)
	m.Spec.MaxDiskPercent = ptr.To[int32](1)
	require.NoError(t, env.Client.Patch(ctx, m, patch))
	since := time.Now()
	waitMirror(t, m, "two registry replicas ready", 4*time.Minute, func(m *mirrorsv1alpha1.RegistryMirror) bool {
		ready := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionReady)
		return m.Status.ReadyReplicas == 2 && ready != nil && ready.Status == metav1.ConditionTrue && strings.Contains(ready.Message, "2/2 registry replicas serve")
	})
	timing("RegistryMirror "+name+": spec.replicas 1 to 2, to both ready", since)

	// The pods run the images (pulled through the mirror, from either replica): both
	// replicas pin and warm all of them (imagesCached is the fewest either holds).
	var first []*corev1.Pod
	for i := range pulls {
		first = append(first, runImage(t, ns, fmt.Sprintf("warm-%02d", i), refs[i]))
	}
	since = time.Now()
	waitMirror(t, m, fmt.Sprintf("%d images in use, cached by both replicas", pulls), 5*time.Minute, func(m *mirrorsv1alpha1.RegistryMirror) bool {
		return m.Status.ImagesInUse != nil && *m.Status.ImagesInUse == pulls && m.Status.ImagesCached != nil && *m.Status.ImagesCached == pulls
	})
	timing(fmt.Sprintf("both replicas warmed with %d images of 4 MiB (imagesCached %d)", pulls, pulls), since)
	for _, r := range []string{name + "-registry-0", name + "-registry-1-0"} {
		t.Logf("%s: %s", r, requireLogLine(t, ns, r, "Warmed the cache with pinned images", fmt.Sprintf("pinned=%d", pulls), fmt.Sprintf("cached=%d", pulls)))
	}

	// The outside connection goes; the node loses the images.
	up.Stop()
	removeImages(t, ns, first, repos)

	// 20 pulls at once; the second replica's registry is killed once it serves their blobs.
	victim := registryContainer(t, ns, name+"-registry-1-0")
	blobsBefore := strings.Count(podLog(t, ns, name+"-registry-1-0", false), "/blobs/sha256:")
	var pods []*corev1.Pod
	since = time.Now()
	for i := range pulls {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pull-%02d", i), Namespace: ns},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: "main", Image: refs[i], ImagePullPolicy: corev1.PullAlways, Command: []string{"sleep", "3600"}}}},
		}
		require.NoError(t, env.Client.Create(ctx, pod))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod) })
		pods = append(pods, pod)
	}
	// A request is logged when it ends: the first blob the second replica has served to
	// these pulls, while the others run.
	require.NoError(t, realnode.WaitFor(ctx, "the second replica serving a blob of the pulls", time.Minute, func(ctx context.Context) (bool, string, error) {
		n := strings.Count(podLog(t, ns, name+"-registry-1-0", false), "/blobs/sha256:")
		return n > blobsBefore, fmt.Sprintf("%d blob requests, %d before the pulls", n, blobsBefore), nil
	}))
	ctr(t, "tasks", "kill", "--signal", "SIGKILL", victim)
	killed := time.Since(since)

	failedAttempts := map[string]int{} // by cause: the kill, or the kubelet's own pull rate limit
	t.Cleanup(func() {
		if t.Failed() {
			explainPulls(t, ns, name, pods)
		}
	})
	require.NoError(t, realnode.WaitFor(ctx, fmt.Sprintf("all %d pods running", pulls), 4*time.Minute, func(ctx context.Context) (bool, string, error) {
		running := 0
		for _, p := range pods {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return false, "", err
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == pulls, fmt.Sprintf("%d/%d running", running, pulls), nil
	}))
	all := time.Since(since)
	evs := &corev1.EventList{}
	require.NoError(t, env.Client.List(ctx, evs, client.InNamespace(ns)))
	for _, e := range evs.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, "pull-") && e.Reason == "Failed" && strings.Contains(e.Message, "Failed to pull image") {
			cause := "through the mirror"
			if strings.Contains(e.Message, "pull QPS exceeded") {
				cause = "the kubelet's registryPullQPS"
			}
			failedAttempts[cause] += int(max(e.Count, 1))
			t.Logf("%s: %s", e.InvolvedObject.Name, e.Message)
		}
	}
	served := strings.Count(podLog(t, ns, name+"-registry-1-0", true), "/blobs/sha256:") - blobsBefore
	require.Positive(t, served, "the killed registry had served blobs of the pulls")
	// The disk bound held throughout, and the replica that stayed evicted nothing.
	t.Logf("%s: %s", name+"-registry-0", requireLogLine(t, ns, name+"-registry-0",
		"Disk stays above the threshold: the rest is pinned, used within the minimum age, or not the cache's"))
	require.NotContains(t, podLog(t, ns, name+"-registry-0", false), "Evicted cached content")
	record(fmt.Sprintf("%d concurrent pulls of 4 MiB-layer images, upstream down, one of two replicas killed: all running", pulls), all)
	t.Logf("%d pods running %v after they were created; the replica was killed %v after they were created, having served %d blob requests of the pulls; "+
		"failed pull attempts, each pod starting on a later one: %v", pulls, all, killed, served, failedAttempts)
}

// explainPulls logs, for a failed run, why pods are not running: each such pod's waiting
// reason and its pull Events, and the last lines of the node agent's log.
func explainPulls(t *testing.T, ns, mirror string, pods []*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	evs := &corev1.EventList{}
	if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
		t.Logf("listing Events: %v", err)
	}
	for _, p := range pods {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil || p.Status.Phase == corev1.PodRunning {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				t.Logf("%s not running: %s: %s", p.Name, w.Reason, w.Message)
			}
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == p.Name && e.Type == corev1.EventTypeWarning {
				t.Logf("%s: %s (x%d, last %s): %s", p.Name, e.Reason, e.Count, e.LastTimestamp.Format(time.RFC3339), e.Message)
			}
		}
	}
	tail := int64(40)
	b, err := env.Clientset.CoreV1().Pods(ns).GetLogs(agentPod(t, ns, mirror), &corev1.PodLogOptions{Container: "node-agent", TailLines: &tail}).DoRaw(ctx)
	t.Logf("the node agent's last lines (%v):\n%s", err, b)
}

// waitMirror waits until ok holds for the mirror, re-read each time.
func waitMirror(t testing.TB, m *mirrorsv1alpha1.RegistryMirror, what string, timeout time.Duration, ok func(*mirrorsv1alpha1.RegistryMirror) bool) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), what, timeout, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, "", err
		}
		return ok(m), fmt.Sprintf("readyReplicas %d, imagesInUse %v, imagesCached %v, %s", m.Status.ReadyReplicas,
			deref(m.Status.ImagesInUse), deref(m.Status.ImagesCached), conditionSummary(m.Status.Conditions)), nil
	}))
}

// podLog is the registry container's log of pod (of its previous run with previous).
func podLog(t testing.TB, ns, pod string, previous bool) string {
	t.Helper()
	b, err := env.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "registry", Previous: previous}).DoRaw(context.Background())
	if previous {
		require.NoError(t, err, "the log of %s's killed registry", pod)
	}
	return string(b)
}

// registryContainer is the containerd ID of pod's registry container.
func registryContainer(t testing.TB, ns, pod string) string {
	t.Helper()
	p := &corev1.Pod{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, p))
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "registry" {
			return strings.TrimPrefix(st.ContainerID, "containerd://")
		}
	}
	require.Fail(t, "no registry container", pod)
	return ""
}
