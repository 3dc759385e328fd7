package nodeagent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMainRefusesInvalidArguments(t *testing.T) {
	assert.Equal(t, 2, Main(t.Context(), []string{"--nope"}))
	assert.Equal(t, 2, Main(t.Context(), nil), "no --target and --owner")
}

// fakeRegistry is the registry Service an agent relays to: GET /v2/ answers 200, /echo
// sends the request's body back, /stuck sends its headers and then nothing. While hang is
// set every request waits without an answer, as a frozen registry's would, until its
// connection closes. v2 counts the probes.
type fakeRegistry struct {
	addr string
	hang atomic.Bool
	v2   atomic.Int64
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	t.Helper()
	f := &fakeRegistry{}
	released := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := func() {
			select {
			case <-r.Context().Done():
			case <-released:
			}
		}
		if r.URL.Path == "/v2/" {
			f.v2.Add(1)
		}
		if f.hang.Load() {
			wait()
			return
		}
		switch r.URL.Path {
		case "/v2/":
			_, _ = io.WriteString(w, "{}")
		case "/echo":
			_, _ = io.Copy(w, r.Body)
		case "/stuck":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			wait()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(released) }) // runs first: no handler outlives the test
	f.addr = srv.Listener.Addr().String()
	return f
}

// echo sends body through the relay at addr to /echo and returns what came back.
func echo(addr, body string) (string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Post("http://"+addr+"/echo", "text/plain", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// turnedAway reports whether the relay at addr closes a new connection without an answer.
func turnedAway(t *testing.T, addr string) bool {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	_, _ = conn.Write([]byte("GET /v2/ HTTP/1.1\r\nHost: mirror\r\n\r\n"))
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	b, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the relay neither answered nor closed the connection")
	return len(b) == 0
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
		"--listen=127.0.0.1:0", "--health-listen=127.0.0.1:0", "--target=" + newFakeRegistry(t).addr, "--owner=ns/a",
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
	assert.Equal(t, mustRenderHostsTOML(t, "ns/a", "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities), string(b))
	code, _ := get(t, health+"/healthz")
	assert.Equal(t, http.StatusOK, code)

	echoed, err := echo(a.relay.Addr().String(), "a request body")
	require.NoError(t, err)
	assert.Equal(t, "a request body", echoed, "bytes relayed both ways")

	require.NoError(t, os.Remove(path))
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 5*time.Second, 20*time.Millisecond, "a deleted hosts.toml is rewritten")

	// Someone else's file makes the agent unready instead of fighting over it.
	require.NoError(t, os.WriteFile(path, []byte(mustRenderHostsTOML(t, "ns/b", "https://quay.io", "http://127.0.0.1:35001", DefaultCapabilities)), 0o644))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := get(t, health+"/readyz")
		assert.Equal(c, http.StatusServiceUnavailable, code)
		assert.Contains(c, body, "belongs to RegistryMirror ns/b")
	}, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, os.WriteFile(path, []byte(mustRenderHostsTOML(t, "ns/a", "https://quay.io", "http://127.0.0.1:35000", DefaultCapabilities)), 0o644))

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
		"--target=" + newFakeRegistry(t).addr, "--owner=ns/a", "--drain=100ms"})
	require.NoError(t, err)
	a, err := newAgent(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, "http://"+a.health.Addr().String()+"/readyz")
		assert.Equal(c, http.StatusOK, code, "ready without hosts.toml duty once the registry answered")
	}, 5*time.Second, 20*time.Millisecond)
	conn := stuckRequest(t, a.relay.Addr().String())
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("agent waited forever for an open connection")
	}
	requireCut(t, conn)
}

// stuckRequest sends GET /stuck through the relay at addr and returns the connection once
// the response's headers arrived: the registry sends nothing more.
func stuckRequest(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.Write([]byte("GET /stuck HTTP/1.1\r\nHost: mirror\r\n\r\n"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "relayed before the stop")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return conn
}

// requireCut fails unless the relay closed conn: a read ends (within 10 s) other than by
// the deadline.
func requireCut(t *testing.T, conn net.Conn) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the open connection was not cut: %v", err)
}

// TestAgentConfiguresTheNodeOnlyOnceTheRegistryAnswers (issue 22, part 5): while the
// registry has never answered, no hosts.toml is written and the relay turns connections
// away; once it answers, the node is configured. When the registry then stops answering
// (a frozen process: connections open, no answer), the agent cuts the request stuck in
// it and turns new connections away, so containerd falls back to the upstream at once;
// hosts.toml stays, and relaying resumes when the registry answers again.
func TestAgentConfiguresTheNodeOnlyOnceTheRegistryAnswers(t *testing.T) {
	reg := newFakeRegistry(t)
	reg.hang.Store(true)
	dir := t.TempDir()
	cfg, err := Parse([]string{
		"--listen=127.0.0.1:0", "--health-listen=127.0.0.1:0", "--target=" + reg.addr, "--owner=ns/a",
		"--hosts-dir=" + dir, "--server=https://quay.io", "--mirror=http://127.0.0.1:35000",
		"--probe-interval=50ms", "--probe-timeout=40ms",
	})
	require.NoError(t, err)
	a, err := newAgent(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	relay, health := a.relay.Addr().String(), "http://"+a.health.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	// Never answered: three probes went unanswered, and still no hosts.toml.
	require.Eventually(t, func() bool { return reg.v2.Load() >= 3 }, 5*time.Second, 10*time.Millisecond)
	path := filepath.Join(dir, "hosts.toml")
	assert.NoFileExists(t, path, "no hosts.toml before the registry answered")
	code, body := get(t, health+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "waiting for the registry at "+reg.addr)
	assert.True(t, turnedAway(t, relay), "the relay turns connections away")

	// It answers: the node is configured and the relay relays.
	reg.hang.Store(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _ := get(t, health+"/readyz")
		assert.Equal(c, http.StatusOK, code)
	}, 5*time.Second, 10*time.Millisecond)
	assert.FileExists(t, path)
	echoed, err := echo(relay, "pull")
	require.NoError(t, err)
	assert.Equal(t, "pull", echoed)

	// It freezes with a request in flight: the request is cut, new ones are turned away.
	stuck := stuckRequest(t, relay)
	reg.hang.Store(true)
	requireCut(t, stuck)
	assert.True(t, turnedAway(t, relay), "new connections are turned away")
	assert.FileExists(t, path, "hosts.toml stays: containerd falls back on the closed connection")
	code, _ = get(t, health+"/readyz")
	assert.Equal(t, http.StatusOK, code, "the node stays configured")

	// It answers again: relaying resumes.
	reg.hang.Store(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		echoed, err := echo(relay, "again")
		assert.NoError(c, err)
		assert.Equal(c, "again", echoed)
	}, 5*time.Second, 10*time.Millisecond)
}

// TestDialRegistryTriesARefusedConnectionAgain: a refused connection (a registry replica
// that has just died, still behind the Service) is tried again at once, up to dialAttempts
// times; any other failure, a timeout above all, is not.
func TestDialRegistryTriesARefusedConnectionAgain(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name      string
		results   []error // the dials' outcomes in turn; nil: connected
		wantDials int
		wantErr   error
	}{
		{"connects", []error{nil}, 1, nil},
		{"refused once, then another replica", []error{refused, nil}, 2, nil},
		{"refused twice, then another replica", []error{refused, refused, nil}, 3, nil},
		{"refused every time", []error{refused, refused, refused, nil}, dialAttempts, syscall.ECONNREFUSED},
		{"a timeout is not tried again", []error{timeout, nil}, 1, os.ErrDeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dials := 0
			a := &agent{dial: func(context.Context, string, string) (net.Conn, error) {
				err := tc.results[dials]
				dials++
				if err != nil {
					return nil, err
				}
				c, _ := net.Pipe()
				return c, nil
			}}
			c, err := a.dialRegistry(t.Context(), "tcp", "registry:5000")
			assert.Equal(t, tc.wantDials, dials)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
				assert.Nil(t, c)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, c)
			_ = c.Close()
		})
	}
}
