package registrymirror

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// agentConfig is the node agent's command line.
type agentConfig struct {
	// Listen is where the relay accepts connections (in the pod; the DaemonSet publishes it
	// on the node's 127.0.0.1:<hostPort>).
	Listen string
	// HealthListen serves /healthz and /readyz for the kubelet's probes.
	HealthListen string
	// Target is the registry Service (host:port) every connection is relayed to.
	Target string
	// Owner is the mirror, namespace/name, recorded in hosts.toml.
	Owner string
	// HostsDir, when set, is the containerd hosts directory of the upstream
	// (/etc/containerd/certs.d/<host>) to write hosts.toml into.
	HostsDir string
	// Server is the upstream URL (hosts.toml's server); Mirror the node-local address of
	// the mirror (hosts.toml's host).
	Server, Mirror string
	// Resync is how often hosts.toml is checked and rewritten if it went missing.
	Resync time.Duration
	// Drain is how long open connections may finish after SIGTERM.
	Drain time.Duration
	// DialTimeout bounds connecting to the registry Service.
	DialTimeout time.Duration
}

func parseAgentFlags(args []string) (agentConfig, error) {
	var c agentConfig
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Listen, "listen", ":5000", "Address the relay listens on.")
	fs.StringVar(&c.HealthListen, "health-listen", ":8081", "Address of /healthz and /readyz.")
	fs.StringVar(&c.Target, "target", "", "Registry Service host:port every connection is relayed to.")
	fs.StringVar(&c.Owner, "owner", "", "The RegistryMirror, namespace/name.")
	fs.StringVar(&c.HostsDir, "hosts-dir", "", "containerd hosts directory of the upstream to write hosts.toml into; empty: leave containerd alone.")
	fs.StringVar(&c.Server, "server", "", "Upstream URL (hosts.toml server).")
	fs.StringVar(&c.Mirror, "mirror", "", "Node-local mirror URL (hosts.toml host).")
	fs.DurationVar(&c.Resync, "resync", 30*time.Second, "How often hosts.toml is checked.")
	fs.DurationVar(&c.Drain, "drain", 10*time.Second, "How long open connections may finish after SIGTERM.")
	fs.DurationVar(&c.DialTimeout, "dial-timeout", 5*time.Second, "Timeout of connecting to the registry Service.")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.Target == "" || c.Owner == "" {
		return c, errors.New("--target and --owner are required")
	}
	if c.HostsDir != "" && (c.Server == "" || c.Mirror == "") {
		return c, errors.New("--hosts-dir needs --server and --mirror")
	}
	if c.Resync <= 0 {
		return c, errors.New("--resync must be positive")
	}
	return c, nil
}

// NodeAgentMain runs the node side of a RegistryMirror (`manager node-agent`): a TCP relay
// from the pod's --listen address to the registry Service and, with --hosts-dir, the
// keeper of containerd's hosts.toml for the upstream, removed again on SIGTERM.
func NodeAgentMain(ctx context.Context, args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := parseAgentFlags(args)
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
	cfg    agentConfig
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

func newAgent(cfg agentConfig, log *slog.Logger) (*agent, error) {
	a := &agent{cfg: cfg, log: log, open: map[net.Conn]struct{}{}, notReady: "starting"}
	if cfg.HostsDir != "" {
		a.hosts = &hostsFile{dir: cfg.HostsDir, owner: cfg.Owner, content: RenderHostsTOML(cfg.Owner, cfg.Server, cfg.Mirror)}
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

// hostsFile is containerd's hosts.toml for one upstream, kept by one mirror's agent.
type hostsFile struct {
	dir, owner, content string
}

func (h *hostsFile) path() string { return filepath.Join(h.dir, "hosts.toml") }

// ensure writes hosts.toml unless it is already right. It never touches a file Quartet
// did not write, and replaces another mirror's file only when takeOver is set. It
// returns whether it wrote and the previous owner, if another mirror.
func (h *hostsFile) ensure(takeOver bool) (wrote bool, previousOwner string, err error) {
	existing, err := os.ReadFile(h.path())
	switch {
	case err == nil:
		owner, managed := hostsTOMLOwner(string(existing))
		if !managed {
			return false, "", fmt.Errorf("%s exists and was not written by Quartet; it is left alone", h.path())
		}
		if string(existing) == h.content {
			return false, "", nil
		}
		if owner != h.owner {
			if !takeOver {
				return false, "", fmt.Errorf("%s now belongs to RegistryMirror %s", h.path(), owner)
			}
			previousOwner = owner
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, "", err
	}
	if err := writeFileAtomic(h.path(), []byte(h.content)); err != nil {
		return false, "", err
	}
	return true, previousOwner, nil
}

// remove deletes hosts.toml if this mirror wrote it.
func (h *hostsFile) remove() (bool, error) {
	existing, err := os.ReadFile(h.path())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if owner, managed := hostsTOMLOwner(string(existing)); !managed || owner != h.owner {
		return false, nil
	}
	if err := os.Remove(h.path()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// writeFileAtomic writes through a temporary file and a rename, so containerd never
// reads half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".hosts.toml.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
