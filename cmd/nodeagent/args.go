package nodeagent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Subcommand is the manager's first argument that runs the node agent: the DaemonSet's
// container runs `/manager node-agent <Args.CommandLine()>`.
const Subcommand = "node-agent"

// Flag names, shared by CommandLine and Parse so the two cannot drift apart.
const (
	flagListen       = "listen"
	flagHealthListen = "health-listen"
	flagTarget       = "target"
	flagOwner        = "owner"
	flagHostsDir     = "hosts-dir"
	flagServer       = "server"
	flagMirror       = "mirror"
	flagResync       = "resync"
	flagDrain        = "drain"
	flagDialTimeout  = "dial-timeout"
	flagCapabilities = "capabilities"
	flagProbe        = "probe-interval"
	flagProbeTimeout = "probe-timeout"
)

// Defaults of the optional flags.
const (
	DefaultListen       = ":5000"
	DefaultHealthListen = ":8081"
	DefaultResync       = 30 * time.Second
	DefaultDrain        = 10 * time.Second
	DefaultDialTimeout  = 5 * time.Second
	DefaultProbe        = 2 * time.Second
	DefaultProbeTimeout = 2 * time.Second
)

// Args are the node agent's command line: what the RegistryMirror controller puts into
// the DaemonSet (CommandLine) and what the agent reads back (Parse).
type Args struct {
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
	// Probe is how often the agent asks the registry Service for GET /v2/, ProbeTimeout
	// how long it waits for the answer. hosts.toml is written only once the registry has
	// answered; after ProbeFailures failures in a row the relay refuses connections and
	// cuts the open ones, so containerd falls back to the upstream at once.
	Probe, ProbeTimeout time.Duration
	// Capabilities are what containerd may use the mirror for (hosts.toml): pull, and
	// resolve when a cluster admin's RegistryHostGrant allows it.
	Capabilities []string
}

// DefaultCapabilities are hosts.toml's capabilities unless a grant adds resolve.
var DefaultCapabilities = []string{"pull"}

// DefaultArgs returns Args with every optional flag at its default and the required ones
// (Target, Owner) empty.
func DefaultArgs() Args {
	return Args{
		Listen:       DefaultListen,
		HealthListen: DefaultHealthListen,
		Resync:       DefaultResync,
		Drain:        DefaultDrain,
		DialTimeout:  DefaultDialTimeout,
		Probe:        DefaultProbe,
		ProbeTimeout: DefaultProbeTimeout,
		Capabilities: slices.Clone(DefaultCapabilities),
	}
}

// CommandLine renders a as the flags that follow Subcommand, in the form Parse reads
// back: the addresses, target and owner always; hosts-dir, server and mirror when set;
// the durations and capabilities only when they differ from their defaults.
func (a Args) CommandLine() []string {
	out := []string{
		flagArg(flagListen, a.Listen),
		flagArg(flagHealthListen, a.HealthListen),
		flagArg(flagTarget, a.Target),
		flagArg(flagOwner, a.Owner),
	}
	for _, f := range []struct{ name, value string }{
		{flagHostsDir, a.HostsDir}, {flagServer, a.Server}, {flagMirror, a.Mirror},
	} {
		if f.value != "" {
			out = append(out, flagArg(f.name, f.value))
		}
	}
	for _, f := range []struct {
		name       string
		value, def time.Duration
	}{
		{flagResync, a.Resync, DefaultResync}, {flagDrain, a.Drain, DefaultDrain}, {flagDialTimeout, a.DialTimeout, DefaultDialTimeout},
		{flagProbe, a.Probe, DefaultProbe}, {flagProbeTimeout, a.ProbeTimeout, DefaultProbeTimeout},
	} {
		if f.value != f.def {
			out = append(out, flagArg(f.name, f.value.String()))
		}
	}
	if !slices.Equal(a.Capabilities, DefaultCapabilities) {
		out = append(out, flagArg(flagCapabilities, strings.Join(a.Capabilities, ",")))
	}
	return out
}

func flagArg(name, value string) string { return "--" + name + "=" + value }

// Parse reads the node agent's flags (the arguments after Subcommand) and validates them.
func Parse(args []string) (Args, error) {
	a := DefaultArgs()
	fs := flag.NewFlagSet(Subcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.Listen, flagListen, a.Listen, "Address the relay listens on.")
	fs.StringVar(&a.HealthListen, flagHealthListen, a.HealthListen, "Address of /healthz and /readyz.")
	fs.StringVar(&a.Target, flagTarget, "", "Registry Service host:port every connection is relayed to.")
	fs.StringVar(&a.Owner, flagOwner, "", "The RegistryMirror, namespace/name.")
	fs.StringVar(&a.HostsDir, flagHostsDir, "", "containerd hosts directory of the upstream to write hosts.toml into; empty: leave containerd alone.")
	fs.StringVar(&a.Server, flagServer, "", "Upstream URL (hosts.toml server).")
	fs.StringVar(&a.Mirror, flagMirror, "", "Node-local mirror URL (hosts.toml host).")
	fs.DurationVar(&a.Resync, flagResync, a.Resync, "How often hosts.toml is checked.")
	fs.DurationVar(&a.Drain, flagDrain, a.Drain, "How long open connections may finish after SIGTERM.")
	fs.DurationVar(&a.DialTimeout, flagDialTimeout, a.DialTimeout, "Timeout of connecting to the registry Service.")
	fs.DurationVar(&a.Probe, flagProbe, a.Probe, "How often the registry Service is asked for GET /v2/.")
	fs.DurationVar(&a.ProbeTimeout, flagProbeTimeout, a.ProbeTimeout, "How long a probe of the registry may take.")
	fs.Func(flagCapabilities, "hosts.toml capabilities, comma-separated: pull, and resolve (default pull).", func(v string) error {
		a.Capabilities = strings.Split(v, ",")
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return a, a.Validate()
}

// Validate reports the first reason a cannot run an agent.
func (a Args) Validate() error {
	if a.Target == "" || a.Owner == "" {
		return errors.New("--target and --owner are required")
	}
	if a.HostsDir != "" && (a.Server == "" || a.Mirror == "") {
		return errors.New("--hosts-dir needs --server and --mirror")
	}
	if a.Resync <= 0 {
		return errors.New("--resync must be positive")
	}
	if a.Probe <= 0 || a.ProbeTimeout <= 0 || a.ProbeTimeout > a.Probe {
		return errors.New("--probe-interval and --probe-timeout must be positive, the timeout at most the interval")
	}
	if !slices.Contains(a.Capabilities, "pull") {
		return errors.New("--capabilities must include pull")
	}
	for _, c := range a.Capabilities {
		if c != "pull" && c != "resolve" {
			return fmt.Errorf("--capabilities: unknown capability %q (pull, resolve)", c)
		}
	}
	return nil
}
