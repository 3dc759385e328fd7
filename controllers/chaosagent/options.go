package chaosagent

import (
	"flag"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/quartet-operator/quartet/internal/egress"
	"github.com/quartet-operator/quartet/internal/scope"
)

// Options are the manager flags of the chaosagent controller; BindFlags says what each means.
type Options struct {
	MaxConcurrentReconciles int
	ProtectedNamespaces     string // comma-separated
	GuardAllowedCIDRs       string // comma-separated
}

// DefaultOptions returns the flags' defaults, the only place they are written (docs/STYLE.md).
func DefaultOptions() Options {
	return Options{
		MaxConcurrentReconciles: 2,
		// ProtectedNamespaces and GuardAllowedCIDRs: none beyond the built-in ones.
	}
}

// BindFlags registers the controller's flags, with DefaultOptions as their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	d := DefaultOptions()
	fs.IntVar(&o.MaxConcurrentReconciles, "chaosagent-workers", d.MaxConcurrentReconciles, "Parallel workers of the chaosagent controller.")
	fs.StringVar(&o.ProtectedNamespaces, "chaos-protected-namespaces", d.ProtectedNamespaces,
		"Comma-separated namespaces no ChaosAgent ever touches, whatever its spec says, in addition to kube-system, "+
			"kube-public, kube-node-lease and the operator's own namespace, which are always protected.")
	fs.StringVar(&o.GuardAllowedCIDRs, "chaosagent-guard-allowed-cidrs", d.GuardAllowedCIDRs,
		"Comma-separated CIDRs a ChaosAgent's HTTP guards may connect to although they are loopback, link-local, unspecified, multicast or a cloud metadata address "+
			"(169.254.169.254, fd00:ec2::254, 100.100.100.200); private ranges need no entry. Example: 127.0.0.0/8 for a service on the manager's own host.")
}

func (o *Options) guardAllowedPrefixes() ([]netip.Prefix, error) {
	return egress.ParseCIDRs("chaosagent-guard-allowed-cidrs", o.GuardAllowedCIDRs)
}

// protected returns the system namespaces, the flag's and the operator's own.
func (o *Options) protected(operatorNamespace string) sets.Set[string] {
	return scope.Namespaces{Operator: operatorNamespace}.Protected(scope.ParseList(o.ProtectedNamespaces)...)
}

// complete fills zero fields (workers: below 1) from DefaultOptions and checks them, naming the flag.
func (o *Options) complete() error {
	d := DefaultOptions()
	if o.MaxConcurrentReconciles < 1 {
		o.MaxConcurrentReconciles = d.MaxConcurrentReconciles
	}
	_, err := o.guardAllowedPrefixes()
	return err
}
