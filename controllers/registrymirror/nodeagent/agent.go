// Package nodeagent is the node side of a RegistryMirror, run by the manager binary as
// `manager node-agent` in the mirror's DaemonSet: a TCP relay from the pod's --listen
// address (published on the node's loopback at the mirror's host port) to the registry
// Service and, with --hosts-dir, the keeper of containerd's hosts.toml for the upstream,
// removed again on SIGTERM. The RegistryMirror controller builds its command line from
// the same Args the agent parses.
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
	"time"
)

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

	mu       sync.Mutex
	notReady string // why /readyz fails; "" when ready
	conns    sync.WaitGroup
	open     map[net.Conn]struct{}
	served   atomic.Int64
}

func newAgent(cfg Args, log *slog.Logger) (*agent, error) {
	a := &agent{cfg: cfg, log: log, open: map[net.Conn]struct{}{}, notReady: "starting"}
	if cfg.HostsDir != "" {
		a.hosts = &hostsFile{dir: cfg.HostsDir, owner: cfg.Owner, content: renderHostsTOML(cfg.Owner, cfg.Server, cfg.Mirror, cfg.Capabilities)}
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

	if a.hosts != nil {
		a.syncHosts(true)
	} else {
		a.setNotReady("")
	}
	a.log.Info("Started node agent", "relay", a.relay.Addr().String(), "target", a.cfg.Target, "hostsDir", a.cfg.HostsDir)

	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		a.accept()
	}()

	var tick <-chan time.Time
	if a.hosts != nil {
		t := time.NewTicker(a.cfg.Resync)
		defer t.Stop()
		tick = t.C
	}
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick:
			a.syncHosts(false)
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
		a.mu.Lock()
		for c := range a.open {
			_ = c.Close()
		}
		a.mu.Unlock()
		<-drained
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = healthSrv.Shutdown(shutdownCtx)
	a.log.Info("Stopped node agent", "connectionsRelayed", a.served.Load())
	return errors.Join(errs...)
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

// relayConn copies bytes both ways between a client and the registry Service, passing
// each side's end of stream on to the other.
func (a *agent) relayConn(client net.Conn) {
	defer client.Close()
	upstream, err := net.DialTimeout("tcp", a.cfg.Target, a.cfg.DialTimeout)
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
		_, _ = io.Copy(dst, src)
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
