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

// Args are the node agent's command line: what the RegistryMirror controller puts into
// the DaemonSet (CommandLine) and what the agent reads back (Parse).
type Args struct {
	// Listen is where the relay accepts connections (in the pod; the DaemonSet publishes it
	// on the node's 127.0.0.1:<hostPort>).
	Listen       string
	HealthListen string // serves /healthz and /readyz for the kubelet's probes
	Target       string // the registry Service (host:port) every connection is relayed to
	Owner        string // the mirror, namespace/name, recorded in hosts.toml
	// HostsDir, when set, is the containerd hosts directory of the upstream
	// (/etc/containerd/certs.d/<host>) to write hosts.toml into.
	HostsDir    string
	Server      string        // the upstream URL (hosts.toml's server)
	Mirror      string        // the node-local address of the mirror (hosts.toml's host)
	Resync      time.Duration // how often hosts.toml is checked and rewritten if it went missing
	Drain       time.Duration // how long open connections may finish after SIGTERM
	DialTimeout time.Duration // bounds connecting to the registry Service
	// Probe is how often the agent asks the registry Service for GET /v2/, ProbeTimeout how
	// long it waits for the answer (what failing probes do: the package doc).
	Probe, ProbeTimeout time.Duration
	// Capabilities are what containerd may use the mirror for (hosts.toml): pull, and
	// resolve when a cluster admin's RegistryHostGrant allows it.
	Capabilities []string
}

// DefaultCapabilities are hosts.toml's capabilities unless a grant adds resolve.
var DefaultCapabilities = []string{"pull"}

// DefaultArgs returns Args with every optional flag at its default (Target and Owner empty).
func DefaultArgs() Args {
	return Args{
		Listen:       ":5000",
		HealthListen: ":8081",
		Resync:       30 * time.Second,
		Drain:        10 * time.Second,
		DialTimeout:  5 * time.Second,
		Probe:        2 * time.Second,
		ProbeTimeout: 2 * time.Second,
		Capabilities: slices.Clone(DefaultCapabilities),
	}
}

// alwaysWritten and writtenIfChanged are the flags CommandLine writes, in its order: the
// addresses, target and owner always, the others when they differ from their defaults.
var (
	alwaysWritten    = []string{"listen", "health-listen", "target", "owner"}
	writtenIfChanged = []string{"hosts-dir", "server", "mirror", "resync", "drain", "dial-timeout",
		"probe-interval", "probe-timeout", "capabilities"}
)

// CommandLine renders a as the flags that follow Subcommand, in the form Parse reads back.
func (a Args) CommandLine() []string {
	defaults := DefaultArgs()
	set, unset := a.flagSet(), defaults.flagSet()
	var out []string
	for _, name := range slices.Concat(alwaysWritten, writtenIfChanged) {
		v := set.Lookup(name).Value.String()
		if slices.Contains(alwaysWritten, name) || v != unset.Lookup(name).Value.String() {
			out = append(out, "--"+name+"="+v)
		}
	}
	return out
}

// Parse reads the node agent's flags (the arguments after Subcommand) and validates them.
func Parse(args []string) (Args, error) {
	a := DefaultArgs()
	fs := a.flagSet()
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return a, a.Validate()
}

// flagSet binds the flags to a's fields, with a's values as their defaults. Parse reads and
// CommandLine writes the same flags, so the two cannot drift apart.
func (a *Args) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(Subcommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.Listen, "listen", a.Listen, "Address the relay listens on.")
	fs.StringVar(&a.HealthListen, "health-listen", a.HealthListen, "Address of /healthz and /readyz.")
	fs.StringVar(&a.Target, "target", a.Target, "Registry Service host:port every connection is relayed to.")
	fs.StringVar(&a.Owner, "owner", a.Owner, "The RegistryMirror, namespace/name.")
	fs.StringVar(&a.HostsDir, "hosts-dir", a.HostsDir,
		"containerd hosts directory of the upstream to write hosts.toml into; empty: leave containerd alone.")
	fs.StringVar(&a.Server, "server", a.Server, "Upstream URL (hosts.toml server).")
	fs.StringVar(&a.Mirror, "mirror", a.Mirror, "Node-local mirror URL (hosts.toml host).")
	fs.DurationVar(&a.Resync, "resync", a.Resync, "How often hosts.toml is checked.")
	fs.DurationVar(&a.Drain, "drain", a.Drain, "How long open connections may finish after SIGTERM.")
	fs.DurationVar(&a.DialTimeout, "dial-timeout", a.DialTimeout, "Timeout of connecting to the registry Service.")
	fs.DurationVar(&a.Probe, "probe-interval", a.Probe, "How often the registry Service is asked for GET /v2/.")
	fs.DurationVar(&a.ProbeTimeout, "probe-timeout", a.ProbeTimeout, "How long a probe of the registry may take.")
	fs.Var((*capabilities)(&a.Capabilities), "capabilities", "hosts.toml capabilities, comma-separated: pull, and resolve.")
	return fs
}

// capabilities is the value of --capabilities, comma-separated.
type capabilities []string

func (c *capabilities) String() string     { return strings.Join(*c, ",") }
func (c *capabilities) Set(v string) error { *c = strings.Split(v, ","); return nil }

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
