package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The real-node tests need root, `make node-deps`, `make controlplane` and `make images`;
// `make test-node` runs them (QUARTET_REAL_NODE=1). Each one proves the host is as before.

// E2EImage is the test-support image `make images` builds (busybox applets, fakerates).
const E2EImage = "quay.io/quartet-operator/e2e:dev"

func requireRealNode(t *testing.T) {
	t.Helper()
	if os.Getenv("QUARTET_REAL_NODE") == "" {
		t.Skip("set QUARTET_REAL_NODE=1 to run the real-node tests (make test-node; needs root)")
	}
}

// realNodeDir is a short folder for a real node (containerd's socket path must stay
// under the unix socket limit), removed after the node's teardown unmounted everything.
func realNodeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "qn-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("real node folder kept: %s (logs in logs/)", dir)
			return
		}
		require.NoError(t, os.RemoveAll(dir))
	})
	return dir
}

func startRealNode(t *testing.T, ctx context.Context, dir string) *Cluster {
	t.Helper()
	binDir, kwokDir, err := DefaultBinDirs()
	require.NoError(t, err)
	c, err := Start(ctx, Options{Dir: dir, BinDir: binDir, KwokDir: kwokDir, Node: NodeReal, Log: t.Logf})
	require.NoError(t, err)
	// Registered before the folder's removal runs (cleanups run last-in first-out), so a
	// failing test still unmounts and restores the host before its folder goes.
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	return c
}

func requireHostAsBefore(t *testing.T, before *HostState) {
	t.Helper()
	after, err := SnapshotHost()
	require.NoError(t, err)
	require.Empty(t, before.Diff(after), "the host must be as it was before the real node started")
}

// runPod creates a pod that runs script in the e2e image and returns its log once it
// has Succeeded.
func runPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string, hostNetwork bool, script string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			HostNetwork:   hostNetwork,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "main", Image: E2EImage, Command: []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	_, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var phase corev1.PodPhase
	require.NoError(t, waitFor(ctx, 2*time.Minute, "pod "+name+" done", func() (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}))
	logs, err := cs.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err, "logs come from the kubelet through the API server")
	require.Equalf(t, corev1.PodSucceeded, phase, "pod %s: %s", name, logs)
	return string(logs)
}

// TestRealNodeRunsPodsAndRestoresHost starts the real node, runs restricted pods on the
// bridge network and on the host network, checks what they can and cannot reach, and
// proves that stopping leaves the host as it was.
func TestRealNodeRunsPodsAndRestoresHost(t *testing.T) {
	requireRealNode(t)
	before, err := SnapshotHost()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := realNodeDir(t)

	started := time.Now()
	c := startRealNode(t, ctx, dir)
	t.Logf("real node Ready in %s", time.Since(started).Round(100*time.Millisecond))
	cs, err := kubernetes.NewForConfig(c.RestConfig())
	require.NoError(t, err)

	// A bridge pod: its own address in the pod range; reaches the API server through the
	// kubernetes Service (kube-proxy) and on the node IP; reaches nothing outside.
	out := runPod(t, ctx, cs, "bridge", false, strings.Join([]string{
		"id -u", "grep -E '^(Seccomp|CapEff|NoNewPrivs):' /proc/self/status",
		"ip -4 -o addr show eth0 | awk '{print \"addr\", $4}'",
		// /readyz is readable without credentials (system:public-info-viewer).
		"echo service: $(httpget -k https://10.0.0.1/readyz)",
		"echo node-ip: $(httpget -k https://" + RealNodeIP + ":6443/readyz)",
		"echo dns: $(nslookup kubernetes.default.svc." + ClusterDomain + " " + ClusterDNSIP + " | grep -A1 'Name:' | tail -1)",
		// The host's DNS server is outside the namespace: there is no route to it.
		"echo outside: $(httpget -timeout 3s http://10.255.255.53/)",
		"touch /rootfs-write 2>/dev/null && echo rootfs-WRITABLE || echo rootfs-read-only",
	}, "; "))
	t.Logf("bridge pod:\n%s", out)
	require.Contains(t, out, "65532\n")
	require.Contains(t, out, "Seccomp:\t2")
	require.Contains(t, out, "CapEff:\t0000000000000000")
	require.Contains(t, out, "NoNewPrivs:\t1")
	require.Contains(t, out, "addr 10.244.0.")
	require.Contains(t, out, "service: 200 ok")
	require.Contains(t, out, "node-ip: 200 ok")
	require.Contains(t, out, "dns: Address: 10.0.0.1")
	require.Regexp(t, `outside: error: .*(unreachable|no route to host)`, out)
	require.Contains(t, out, "rootfs-read-only")

	// A hostNetwork pod shares the node's namespace: the API server on loopback.
	out = runPod(t, ctx, cs, "hostnet", true, "echo loopback: $(httpget -k https://127.0.0.1:6443/readyz); ip -4 -o addr show qnode0 | awk '{print $4}'")
	t.Logf("hostNetwork pod:\n%s", out)
	require.Contains(t, out, "loopback: 200 ok")
	require.Contains(t, out, RealNodeIP+"/24")

	// What the node changed while it ran, so the restore below is not vacuous.
	during, err := SnapshotHost()
	require.NoError(t, err)
	changed := before.Diff(during)
	t.Logf("host changes while the node ran (%d): %s", len(changed), strings.Join(firstN(changed, 12), "; "))
	require.NotEmpty(t, changed)

	stopped := time.Now()
	require.NoError(t, c.Stop())
	t.Logf("real node stopped and host restored in %s", time.Since(stopped).Round(100*time.Millisecond))
	requireHostAsBefore(t, before)
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}

// TestRealNodeFailedStartRestoresHost starts a node whose kubelet changes kernel settings
// and a fixed path, as the real one does, and then crashes: Start must fail naming the
// kubelet, and leave the host as it was.
func TestRealNodeFailedStartRestoresHost(t *testing.T) {
	requireRealNode(t)
	before, err := SnapshotHost()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := realNodeDir(t)

	binDir, kwokDir, err := DefaultBinDirs()
	require.NoError(t, err)
	fakeBin := filepath.Join(dir, "fake-bin")
	require.NoError(t, os.MkdirAll(fakeBin, 0o755))
	entries, err := os.ReadDir(binDir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.Symlink(filepath.Join(binDir, e.Name()), filepath.Join(fakeBin, e.Name())))
	}
	require.NoError(t, os.Remove(filepath.Join(fakeBin, "kubelet")))
	oops, err := os.ReadFile("/proc/sys/kernel/panic_on_oops")
	require.NoError(t, err)
	flipped := "1"
	if strings.TrimSpace(string(oops)) == "1" {
		flipped = "0"
	}
	require.NoError(t, os.WriteFile(filepath.Join(fakeBin, "kubelet"), []byte(`#!/bin/sh
echo `+flipped+` > /proc/sys/kernel/panic_on_oops
mkdir -p /var/lib/kubelet/device-plugins
echo "fake kubelet: changed kernel.panic_on_oops and /var/lib/kubelet, now crashing" >&2
exit 1
`), 0o755))

	_, err = Start(ctx, Options{Dir: dir, BinDir: fakeBin, KwokDir: kwokDir, Node: NodeReal, Log: t.Logf})
	require.Error(t, err)
	t.Logf("Start failed as it should: %v", err)
	require.Contains(t, err.Error(), "kubelet exited")
	require.Contains(t, err.Error(), "now crashing", "the error shows the kubelet's last log lines")
	requireHostAsBefore(t, before)
}

// TestRealNodeLeftBehindIsCleanedUp kills the process that owns a running real node (as
// `go test -timeout` or a SIGKILL would: no cleanup runs, containers and mounts stay) and
// proves that the next start, or `make cluster-down`, restores the host.
func TestRealNodeLeftBehindIsCleanedUp(t *testing.T) {
	requireRealNode(t)
	if dir := os.Getenv("QUARTET_REAL_NODE_ORPHAN"); dir != "" {
		// The child: start a node with a running pod, say so, and die without cleanup.
		ctx := context.Background()
		binDir, kwokDir, err := DefaultBinDirs()
		require.NoError(t, err)
		c, err := Start(ctx, Options{Dir: dir, BinDir: binDir, KwokDir: kwokDir, Node: NodeReal, Log: t.Logf})
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(c.RestConfig())
		require.NoError(t, err)
		runPod(t, ctx, cs, "before-kill", false, "true")
		_, err = cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: E2EImage, Command: []string{"sleep", "3600"}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, waitFor(ctx, time.Minute, "sleeper running", func() (bool, error) {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "sleeper", metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning, nil
		}))
		fmt.Println("ORPHAN-READY")
		os.Exit(3)
	}

	before, err := SnapshotHost()
	require.NoError(t, err)
	dir := realNodeDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRealNodeLeftBehindIsCleanedUp$", "-test.v")
	cmd.Env = append(os.Environ(), "QUARTET_REAL_NODE_ORPHAN="+dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	ready := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "ORPHAN-READY") {
			ready = true
		}
	}
	_ = cmd.Wait()
	require.True(t, ready, "the child started a node and a pod before dying")

	left, err := SnapshotHost()
	require.NoError(t, err)
	leftovers := before.Diff(left)
	t.Logf("left behind by the killed owner (%d): %s", len(leftovers), strings.Join(firstN(leftovers, 12), "; "))
	require.NotEmpty(t, leftovers, "the killed owner left state behind")
	require.NotEmpty(t, processesInNetns(filepath.Join(dir, netnsFile)), "containerd shims outlive their owner")

	require.NoError(t, CleanupStaleRealNodes(t.Logf))
	requireHostAsBefore(t, before)
	require.Empty(t, processesInNetns(filepath.Join(dir, netnsFile)))
}
