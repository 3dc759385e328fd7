// Package demo runs `make demo NODE=real` (hack/demoreal) as a user does and checks what it
// prints and what it leaves: the four stories told (with the cluster admin's consent steps
// before the copies and the mirror's node access), the host as before, also when it is
// interrupted with Ctrl-C halfway. It starts its own real node, so it is a package of its
// own (real-node packages run one at a time). Run with `make e2e` (root); without
// QUARTET_REAL_NODE=1 it skips.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/realnode"
)

// output collects what the demo prints while the test reads it.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// demo is `go run ./hack/demoreal args...` in a process group of its own, bounded in time:
// it is interrupted as Ctrl-C would (SIGINT to the group, so it stops the node and restores
// the host) when the test binary's -timeout is a minute away, or after 20 minutes, and killed
// if it has not ended two minutes later. A hung demo fails the test instead of outliving it.
func demo(t *testing.T, args ...string) (*exec.Cmd, *output) {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-3*time.Minute).Before(deadline) {
		deadline = d.Add(-3 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	out := &output{}
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./hack/demoreal"}, args...)...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		fmt.Fprintf(out, "\ntest: the demo is still running at its deadline (%s): interrupting it\n", deadline.Format(time.TimeOnly))
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	}
	cmd.WaitDelay = 2 * time.Minute
	return cmd, out
}

// TestDemoTellsTheFourStories runs the whole demo and reads its output as a user would.
func TestDemoTellsTheFourStories(t *testing.T) {
	if !realnode.Enabled() {
		t.Skip("set QUARTET_REAL_NODE=1 to run the real-node demo (make e2e; needs root)")
	}
	before, err := localcluster.SnapshotHost()
	require.NoError(t, err)
	cmd, out := demo(t, "-keep=1s")
	start := time.Now()
	require.NoError(t, cmd.Run(), "%s", out)
	t.Logf("demo ran in %s", time.Since(start).Round(time.Second))
	text := out.String()
	for _, want := range []string{
		"ClusterServiceVersion quartet.v0.3.0 Succeeded",
		"holds rate=1.1625",
		// The cluster admin's consent, then the copies it allows.
		"$ kubectl create clusterrolebinding copyrator-platform --clusterrole=quartet-copyrator-target --serviceaccount=demo:copyrator",
		"clusterrolebinding.rbac.authorization.k8s.io/copyrator-platform created",
		"team-a: copy in place", "team-b: copy in place",
		"kube-system      namespace kube-system is protected",
		"pods evicted; the budget refused the rest",
		// The cluster admin's grant, then the mirror on the node.
		"registryhostgrant.mirrors.quartet.dev/upstream created",
		"runs with the upstream STOPPED",
		"NodeAccess=True (Granted)",
		"UpstreamReachable=False (Unreachable)",
		"Ready=True (MirrorReady)",
		"stopping the demo",
	} {
		require.Contains(t, text, want, "the demo's output tells it")
	}
	after, err := localcluster.SnapshotHost()
	require.NoError(t, err)
	require.Empty(t, before.Diff(after), "the host is as it was before the demo")
}

// TestDemoCtrlCRestoresTheHost interrupts the demo while it installs and checks the host.
func TestDemoCtrlCRestoresTheHost(t *testing.T) {
	if !realnode.Enabled() {
		t.Skip("set QUARTET_REAL_NODE=1 to run the real-node demo (make e2e; needs root)")
	}
	before, err := localcluster.SnapshotHost()
	require.NoError(t, err)
	cmd, out := demo(t)
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(out.String(), "installing OLM") {
		require.True(t, time.Now().Before(deadline), "the demo never got to the install:\n%s", out)
		time.Sleep(500 * time.Millisecond)
	}
	// Ctrl-C reaches the whole foreground process group (go run and the demo).
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT))
	_ = cmd.Wait()
	require.Contains(t, out.String(), "stopping the demo", "%s", out)
	after, err := localcluster.SnapshotHost()
	require.NoError(t, err)
	require.Empty(t, before.Diff(after), "the host is as it was before the demo:\n%s", out)
}
