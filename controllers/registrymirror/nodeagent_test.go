package registrymirror

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostsTOMLOwner(t *testing.T) {
	owner, managed := hostsTOMLOwner(RenderHostsTOML("ns/a", "https://quay.io", "http://127.0.0.1:35000"))
	assert.True(t, managed)
	assert.Equal(t, "ns/a", owner)
	_, managed = hostsTOMLOwner("server = \"https://quay.io\"\n")
	assert.False(t, managed)
	_, managed = hostsTOMLOwner("")
	assert.False(t, managed)
}

func TestParseAgentFlags(t *testing.T) {
	c, err := parseAgentFlags([]string{"--target=svc.ns.svc:5000", "--owner=ns/a"})
	require.NoError(t, err)
	assert.Equal(t, ":5000", c.Listen)
	assert.Equal(t, 30*time.Second, c.Resync)
	assert.Empty(t, c.HostsDir)

	c, err = parseAgentFlags(agentArgs(fullMirror(), 36000)[1:])
	require.NoError(t, err, "the DaemonSet's own arguments parse")
	assert.Equal(t, "/run/quartet/hosts-dir", c.HostsDir)
	assert.Equal(t, "https://quay.example:8443", c.Server)
	assert.Equal(t, "http://127.0.0.1:36000", c.Mirror)
	assert.Equal(t, "mirrors/quay", c.Owner)

	for _, bad := range [][]string{
		{},
		{"--owner=ns/a"},
		{"--target=x:1", "--owner=ns/a", "--hosts-dir=/d"},
		{"--target=x:1", "--owner=ns/a", "extra"},
		{"--target=x:1", "--owner=ns/a", "--resync=0s"},
		{"--nope"},
	} {
		_, err := parseAgentFlags(bad)
		assert.Error(t, err, "%q", bad)
	}
	assert.Equal(t, 2, NodeAgentMain(t.Context(), []string{"--nope"}))
}

func TestHostsFile(t *testing.T) {
	dir := t.TempDir()
	mine := &hostsFile{dir: dir, owner: "ns/a", content: RenderHostsTOML("ns/a", "https://quay.io", "http://127.0.0.1:35000")}
	path := filepath.Join(dir, "hosts.toml")

	wrote, prev, err := mine.ensure(false)
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Empty(t, prev)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, mine.content, string(b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	wrote, _, err = mine.ensure(false)
	require.NoError(t, err)
	assert.False(t, wrote, "already right")

	// Another mirror's file: taken over only when starting.
	other := &hostsFile{dir: dir, owner: "ns/b", content: RenderHostsTOML("ns/b", "https://quay.io", "http://127.0.0.1:35001")}
	_, _, err = other.ensure(false)
	assert.ErrorContains(t, err, "belongs to RegistryMirror ns/a")
	wrote, prev, err = other.ensure(true)
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Equal(t, "ns/a", prev)
	removed, err := mine.remove()
	require.NoError(t, err)
	assert.False(t, removed, "a mirror removes only its own file")
	removed, err = other.remove()
	require.NoError(t, err)
	assert.True(t, removed)
	assert.NoFileExists(t, path)
	removed, err = other.remove()
	require.NoError(t, err)
	assert.False(t, removed, "nothing to remove")

	// An administrator's own file is never touched.
	require.NoError(t, os.WriteFile(path, []byte("server = \"https://quay.io\"\n"), 0o600))
	_, _, err = mine.ensure(true)
	assert.ErrorContains(t, err, "not written by Quartet")
	removed, err = mine.remove()
	require.NoError(t, err)
	assert.False(t, removed)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "server = \"https://quay.io\"\n", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left behind")
}

// echoServer answers every connection with what it receives.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAgentRelaysAndKeepsHostsTOML runs the agent for real on loopback: it relays bytes
// to the target, writes hosts.toml, reports ready, rewrites a deleted file, and removes
// the file when stopped.
func TestAgentRelaysAndKeepsHostsTOML(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseAgentFlags([]string{
		"--listen=127.0.0.1:0", "--health-listen=127.0.0.1:0", "--target=" + echoServer(t), "--owner=ns/a",
		"--hosts-dir=" + dir, "--server=https://quay.io", "--mirror=http://127.0.0.1:35000", "--resync=50ms", "--drain=2s",
	})
	require.NoError(t, err)
	a, err := newAgent(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	health := "http://" + a.health.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()

	path := filepath.Join(dir, "hosts.toml")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, health+"/readyz")
		assert.Equal(c, http.StatusOK, code)
	}, 5*time.Second, 20*time.Millisecond)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, RenderHostsTOML("ns/a", "https://quay.io", "http://127.0.0.1:35000"), string(b))
	code, _ := get(t, health+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	conn, err := net.Dial("tcp", a.relay.Addr().String())
	require.NoError(t, err)
	_, err = conn.Write([]byte("GET /v2/ HTTP/1.1\r\n"))
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	echoed, err := io.ReadAll(conn)
	require.NoError(t, err)
	assert.Equal(t, "GET /v2/ HTTP/1.1\r\n", string(echoed), "bytes relayed both ways, end of stream passed on")
	_ = conn.Close()

	require.NoError(t, os.Remove(path))
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 5*time.Second, 20*time.Millisecond, "a deleted hosts.toml is rewritten")

	// Someone else's file makes the agent unready instead of fighting over it.
	require.NoError(t, os.WriteFile(path, []byte(RenderHostsTOML("ns/b", "https://quay.io", "http://127.0.0.1:35001")), 0o644))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, health+"/readyz")
		assert.Equal(c, http.StatusServiceUnavailable, code)
		assert.Contains(c, body, "belongs to RegistryMirror ns/b")
	}, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, os.WriteFile(path, []byte(RenderHostsTOML("ns/a", "https://quay.io", "http://127.0.0.1:35000")), 0o644))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop")
	}
	assert.NoFileExists(t, path, "removed on SIGTERM")
	_, err = net.Dial("tcp", a.relay.Addr().String())
	assert.Error(t, err, "relay closed")
}

// TestAgentDrainsOpenConnections: a stuck connection is cut after --drain.
func TestAgentDrainsOpenConnections(t *testing.T) {
	cfg, err := parseAgentFlags([]string{"--listen=127.0.0.1:0", "--health-listen=127.0.0.1:0",
		"--target=" + echoServer(t), "--owner=ns/a", "--drain=100ms"})
	require.NoError(t, err)
	a, err := newAgent(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	conn, err := net.Dial("tcp", a.relay.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("x"))
	require.NoError(t, err)
	buf := make([]byte, 1)
	_, err = io.ReadFull(conn, buf)
	require.NoError(t, err, "relayed before the stop")
	code, _ := get(t, "http://"+a.health.Addr().String()+"/readyz")
	assert.Equal(t, http.StatusOK, code, "ready without hosts.toml duty")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("agent waited forever for an open connection")
	}
	_, err = io.ReadAll(conn)
	assert.NoError(t, err, "the open connection was closed")
}
