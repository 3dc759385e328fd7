// Package nodeagent is the node side of a RegistryMirror, `manager node-agent` in the
// mirror's DaemonSet: a TCP relay from the pod's --listen address (published on the node's
// loopback at the mirror's host port) to the registry Service and, with --hosts-dir, the
// keeper of containerd's hosts.toml for the upstream, removed again on SIGTERM. The
// RegistryMirror controller builds its command line from the same Args the agent parses.
//
// The agent asks the registry for GET /v2/ every --probe-interval; hosts.toml is written
// only once it has answered. While it does not answer (probeFailures probes in a row), the
// relay closes every connection it accepts and cuts the ones it holds: containerd then
// pulls from the upstream (hosts.toml's server) at once instead of waiting on the mirror.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// probeFailures is how many probes in a row must fail before the relay turns connections
// away: one lost probe on a busy node does not send the node's pulls around the mirror.
const probeFailures = 2

// Main runs the node agent with the arguments that follow Subcommand until ctx ends, and
// returns the exit code: 2 for invalid arguments, 1 if it could not start or failed.
func Main(ctx context.Context, args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := Parse(args)
	if err != nil {
		log.Error("Invalid arguments", "err", err)
		return 2
	}
	a, err := newAgent(cfg, log)
	if err != nil {
		log.Error("Could not start", "err", err)
		return 1
	}
	if err := a.run(ctx); err != nil {
		log.Error("Stopped with an error", "err", err)
		return 1
	}
	return 0
}

// agent is a running node agent.
type agent struct {
	cfg    Args
	log    *slog.Logger
	relay  net.Listener
	health net.Listener
	hosts  *hostsFile

	probe *http.Client
	dial  func(ctx context.Context, network, addr string) (net.Conn, error) // to the registry Service; tests replace it

	notReady atomic.Value // string: why /readyz fails; "" when ready
	mu       sync.Mutex   // guards open
	conns    sync.WaitGroup
	open     map[net.Conn]struct{}
	served   atomic.Int64
	refused  atomic.Int64

	// answering is whether the registry answered the last probes (else the relay turns
	// connections away). Only the probe loop writes it, and failures and answeredOnce.
	answering    atomic.Bool
	failures     int
	answeredOnce bool
}

func newAgent(cfg Args, log *slog.Logger) (*agent, error) {
	a := &agent{cfg: cfg, log: log, open: map[net.Conn]struct{}{}}
	a.notReady.Store("waiting for the registry at " + cfg.Target + " to answer")
	a.dial = (&net.Dialer{Timeout: cfg.DialTimeout}).DialContext
	// A fresh connection per probe, dialled as a pull through the relay is.
	a.probe = &http.Client{Timeout: cfg.ProbeTimeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: a.dialRegistry}}
	if cfg.HostsDir != "" {
		content, err := renderHostsTOML(cfg.Owner, cfg.Server, cfg.Mirror, cfg.Capabilities)
		if err != nil {
			return nil, fmt.Errorf("rendering hosts.toml: %w", err)
		}
		a.hosts = &hostsFile{dir: cfg.HostsDir, owner: cfg.Owner, content: content}
	}
	var err error
	if a.relay, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	if a.health, err = net.Listen("tcp", cfg.HealthListen); err != nil {
		_ = a.relay.Close()
		return nil, fmt.Errorf("listening on %s: %w", cfg.HealthListen, err)
	}
	return a, nil
}

// run serves until ctx ends, then removes hosts.toml (so containerd stops using the mirror
// before it goes), stops accepting, and lets open connections drain.
func (a *agent) run(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := a.notReady.Load().(string); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	healthSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = healthSrv.Serve(a.health) }()

	a.log.Info("Started node agent", "relay", a.relay.Addr().String(), "target", a.cfg.Target, "hostsDir", a.cfg.HostsDir)

	var accepting sync.WaitGroup
	accepting.Go(a.accept)

	a.observe(a.probeRegistry(ctx))
	probe := time.NewTicker(a.cfg.Probe)
	defer probe.Stop()
	var resync <-chan time.Time
	if a.hosts != nil {
		t := time.NewTicker(a.cfg.Resync)
		defer t.Stop()
		resync = t.C
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-probe.C:
			a.observe(a.probeRegistry(ctx))
		case <-resync:
			if a.answeredOnce {
				a.syncHosts(false)
			}
		}
	}

	a.notReady.Store("stopping")
	var errs []error
	if a.hosts != nil {
		removed, err := a.hosts.remove()
		if err != nil {
			errs = append(errs, fmt.Errorf("removing hosts.toml: %w", err))
		} else if removed {
			a.log.Info("Removed hosts.toml", "path", a.hosts.path())
		}
	}
	_ = a.relay.Close()
	accepting.Wait()
	drained := make(chan struct{})
	go func() { a.conns.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(a.cfg.Drain):
		a.cutOpen()
		<-drained
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = healthSrv.Shutdown(shutdownCtx)
	a.log.Info("Stopped node agent", "connectionsRelayed", a.served.Load(), "connectionsTurnedAway", a.refused.Load())
	return errors.Join(errs...)
}

// probeRegistry asks the registry Service for GET /v2/, as containerd's first request does.
// Any answer below 500 (200, or 401 from a registry that wants a login) is an answer.
func (a *agent) probeRegistry(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.cfg.Target+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := a.probe.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode >= http.StatusInternalServerError {
		return fmt.Errorf("GET /v2/: %s", resp.Status)
	}
	return nil
}

// observe acts on one probe's outcome: the first answer writes hosts.toml (taking over
// another Quartet mirror's) and makes the agent ready; probeFailures failures in a row turn
// connections away until the registry answers again. Readiness says the node is configured.
func (a *agent) observe(err error) {
	if err == nil {
		a.failures = 0
		if !a.answering.Swap(true) && a.answeredOnce {
			a.log.Info("The registry answers again; relaying", "target", a.cfg.Target)
		}
		if !a.answeredOnce {
			a.answeredOnce = true
			if a.hosts != nil {
				a.syncHosts(true)
			} else {
				a.notReady.Store("")
			}
		}
		return
	}
	a.failures++
	if !a.answeredOnce {
		if a.failures == 1 || a.failures%30 == 0 {
			a.log.Info("Waiting for the registry to answer before configuring the node", "target", a.cfg.Target, "err", err)
		}
		return
	}
	if a.failures == probeFailures {
		a.answering.Store(false)
		cut := a.cutOpen()
		a.log.Error("The registry does not answer; turning connections away so containerd pulls from the upstream",
			"target", a.cfg.Target, "failures", a.failures, "connectionsCut", cut, "err", err)
	}
}

// cutOpen closes every connection the relay holds and returns how many.
func (a *agent) cutOpen() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range a.open {
		_ = c.Close()
	}
	return len(a.open)
}

// syncHosts makes sure hosts.toml is in place and records the outcome for /readyz. takeOver
// lets a starting agent replace another Quartet mirror's (say, a killed agent's); later checks never fight over it.
func (a *agent) syncHosts(takeOver bool) {
	wrote, prev, err := a.hosts.ensure(takeOver)
	if err != nil {
		if a.notReady.Load().(string) != err.Error() {
			a.log.Error("Could not configure containerd", "path", a.hosts.path(), "err", err)
		}
		a.notReady.Store(err.Error())
		return
	}
	if wrote {
		a.log.Info("Wrote hosts.toml", "path", a.hosts.path(), "server", a.cfg.Server, "mirror", a.cfg.Mirror, "previousOwner", prev)
	}
	a.notReady.Store("")
}

func (a *agent) accept() {
	for {
		c, err := a.relay.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				a.log.Error("Accept failed", "err", err)
			}
			return
		}
		a.mu.Lock()
		a.open[c] = struct{}{}
		a.mu.Unlock()
		a.conns.Go(func() {
			a.relayConn(c)
			a.mu.Lock()
			delete(a.open, c)
			a.mu.Unlock()
		})
	}
}

const dialAttempts = 3 // how many times dialRegistry tries a connection the registry refuses

// dialRegistry connects to the registry Service (addr, the relay's target). A refused
// connection is tried again at once, up to dialAttempts times: each connection may reach
// another replica, and one that has just died refuses them until the Service stops sending
// them to it (a second or two). Nothing was sent on a refused connection, so trying again
// is safe; a timeout is not tried again (it has used the dial timeout already).
func (a *agent) dialRegistry(ctx context.Context, network, addr string) (net.Conn, error) {
	var err error
	for range dialAttempts {
		var c net.Conn
		if c, err = a.dial(ctx, network, addr); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			return c, err
		}
	}
	return nil, err
}

// relayConn copies bytes both ways between a client and the registry, passing each end of stream on.
func (a *agent) relayConn(client net.Conn) {
	defer client.Close()
	if !a.answering.Load() {
		// containerd reads the closed connection as the mirror failing and tries the
		// next host, the upstream.
		a.refused.Add(1)
		return
	}
	upstream, err := a.dialRegistry(context.Background(), "tcp", a.cfg.Target)
	if err != nil {
		a.log.Error("Could not reach the registry", "target", a.cfg.Target, "err", err)
		return
	}
	defer upstream.Close()
	a.served.Add(1)
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			// A side failed or was cut (cutOpen): end both, or the other direction
			// would wait on a registry that does not answer.
			_ = client.Close()
			_ = upstream.Close()
			return
		}
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	wg.Wait()
}
