package nodeagent

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

func TestMainRefusesInvalidArguments(t *testing.T) {
	assert.Equal(t, 2, Main(t.Context(), []string{"--nope"}))
	assert.Equal(t, 2, Main(t.Context(), nil), "no --target and --owner")
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
	cfg, err := Parse([]string{
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
	assert.Equal(t, renderHostsTOML("ns/a", "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities), string(b))
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
	require.NoError(t, os.WriteFile(path, []byte(renderHostsTOML("ns/b", "https://quay.io", "http://127.0.0.1:35001", DefaultCapabilities)), 0o644))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, health+"/readyz")
		assert.Equal(c, http.StatusServiceUnavailable, code)
		assert.Contains(c, body, "belongs to RegistryMirror ns/b")
	}, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, os.WriteFile(path, []byte(renderHostsTOML("ns/a", "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities)), 0o644))

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
	cfg, err := Parse([]string{"--listen=127.0.0.1:0", "--health-listen=127.0.0.1:0",
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
