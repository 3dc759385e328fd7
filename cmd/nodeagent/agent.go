// Package nodeagent is the node side of a RegistryMirror, run by the manager binary as
// `manager node-agent` in the mirror's DaemonSet: a TCP relay from the pod's --listen
// address (published on the node's loopback at the mirror's host port) to the registry
// Service and, with --hosts-dir, the keeper of containerd's hosts.toml for the upstream,
// removed again on SIGTERM. The RegistryMirror controller builds its command line from
// the same Args the agent parses.
//
// The agent asks the registry for GET /v2/ every --probe-interval. hosts.toml is written
// only once the registry has answered. While the registry does not answer (probeFailures
// probes in a row), the relay closes every connection it accepts and cuts the ones it
// holds: containerd then sees an error from the mirror at once and pulls from the upstream
// (hosts.toml's server) instead of waiting on a registry that may never answer.
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
// returns the process's exit code: 2 for invalid arguments, 1 when the agent could not
// start or stopped with an error.
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
	// dial connects to the registry Service (net.Dialer's; tests replace it).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu       sync.Mutex
	notReady string // why /readyz fails; "" when ready
	conns    sync.WaitGroup
	open     map[net.Conn]struct{}
	served   atomic.Int64
	refused  atomic.Int64

	// answering is whether the registry answered the last probes: the relay turns
	// connections away while it is false. Only the probe loop writes it; failures and
	// answeredOnce are the probe loop's own.
	answering    atomic.Bool
	failures     int
	answeredOnce bool
}

func newAgent(cfg Args, log *slog.Logger) (*agent, error) {
	a := &agent{cfg: cfg, log: log, open: map[net.Conn]struct{}{}, notReady: "waiting for the registry at " + cfg.Target + " to answer"}
	a.dial = (&net.Dialer{Timeout: cfg.DialTimeout}).DialContext
	// A fresh connection per probe, as a pull through the relay makes one, dialled as the
	// relay dials.
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

func (a *agent) setNotReady(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.notReady = why
}

func (a *agent) readiness() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.notReady
}

// run serves until ctx ends, then removes hosts.toml (so containerd stops using the mirror
// before it goes), stops accepting, and lets open connections drain.
func (a *agent) run(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := a.readiness(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	healthSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = healthSrv.Serve(a.health) }()

	a.log.Info("Started node agent", "relay", a.relay.Addr().String(), "target", a.cfg.Target, "hostsDir", a.cfg.HostsDir)

	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		a.accept()
	}()

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

	a.setNotReady("stopping")
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
	<-acceptDone
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

// probeRegistry asks the registry Service for GET /v2/, as containerd's first request
// through the mirror does. Any answer below 500 (200, or 401 from a registry that wants a
// login) is an answer.
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

// observe acts on one probe's outcome: the first answer writes hosts.toml (taking over a
// file another Quartet mirror left) and makes the agent ready; probeFailures failures in a
// row turn the relay's connections away until the registry answers again. Readiness stays:
// it says the node is configured, the mirror's status says whether its registry answers.
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
				a.setNotReady("")
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

// syncHosts makes sure hosts.toml is in place and records the outcome for /readyz.
// takeOver lets a starting agent replace a hosts.toml another Quartet mirror wrote (for
// example one left by an agent that was killed); later checks never fight over it.
func (a *agent) syncHosts(takeOver bool) {
	wrote, prev, err := a.hosts.ensure(takeOver)
	if err != nil {
		if a.readiness() != err.Error() {
			a.log.Error("Could not configure containerd", "path", a.hosts.path(), "err", err)
		}
		a.setNotReady(err.Error())
		return
	}
	if wrote {
		a.log.Info("Wrote hosts.toml", "path", a.hosts.path(), "server", a.cfg.Server, "mirror", a.cfg.Mirror, "previousOwner", prev)
	}
	a.setNotReady("")
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
		a.conns.Add(1)
		go func() {
			defer a.conns.Done()
			defer func() {
				a.mu.Lock()
				delete(a.open, c)
				a.mu.Unlock()
			}()
			a.relayConn(c)
		}()
	}
}

// dialAttempts is how many times dialRegistry tries a connection the registry refuses.
const dialAttempts = 3

// dialRegistry connects to the registry Service (addr, the relay's target). A refused
// connection is tried again at once, up to dialAttempts times: behind the Service's
// address each connection may reach another registry replica, and one that has just died
// refuses connections until the Service stops sending them to it (a second or two).
// Nothing has been sent on a refused connection, so trying again is safe; a timeout is not
// tried again (it has used the dial timeout already).
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

// relayConn copies bytes both ways between a client and the registry Service, passing
// each side's end of stream on to the other.
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
