package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOwnerAliveNeedsTheSameProcess: a node's owner counts as alive only while the process
// that wrote owner.pid runs; a process that was later given the same PID (another start
// time) does not keep a dead owner's node from being cleaned up.
func TestOwnerAliveNeedsTheSameProcess(t *testing.T) {
	dir := t.TempDir()
	require.False(t, ownerAlive(dir), "no owner.pid")

	owner := exec.Command("sleep", "60")
	require.NoError(t, owner.Start())
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	pid := owner.Process.Pid
	require.NoError(t, writeOwner(dir, pid))
	require.True(t, ownerAlive(dir), "the owner runs")

	start, err := processStartTime(pid)
	require.NoError(t, err)
	n, err := strconv.ParseUint(start, 10, 64)
	require.NoError(t, err)
	file := filepath.Join(dir, ownerFile)
	reused := strconv.Itoa(pid) + " " + strconv.FormatUint(n+1, 10)
	require.NoError(t, os.WriteFile(file, []byte(reused), 0o644))
	require.False(t, ownerAlive(dir), "the PID now belongs to a process that started later: the owner is gone")

	require.NoError(t, os.WriteFile(file, []byte(strconv.Itoa(pid)), 0o644))
	require.True(t, ownerAlive(dir), "an owner.pid of before start times were recorded: the PID alone")

	require.NoError(t, writeOwner(dir, pid))
	require.NoError(t, owner.Process.Kill())
	_ = owner.Wait()
	require.False(t, ownerAlive(dir), "the owner exited")

	require.NoError(t, writeOwner(dir, os.Getpid()))
	require.False(t, ownerAlive(dir), "this process is never its own node's stale owner")
}

// TestProcessStartTimeWithSpacesInTheName: the start time is read past a command name with
// spaces and parentheses.
func TestProcessStartTimeWithSpacesInTheName(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "a (b) c")
	require.NoError(t, os.Symlink("/bin/sleep", bin))
	p := exec.Command(bin, "60")
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Process.Kill(); _ = p.Wait() })
	got, err := processStartTime(p.Process.Pid)
	require.NoError(t, err)
	self, err := processStartTime(os.Getpid())
	require.NoError(t, err)
	a, err := strconv.ParseUint(got, 10, 64)
	require.NoError(t, err)
	b, err := strconv.ParseUint(self, 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, a, b, "the child started after this process")
}
