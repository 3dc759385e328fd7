package registrymirror

import (
	"cmp"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/quartet-operator/quartet/internal/egress"
)

// Options are the manager flags of the registrymirror controller (BindFlags says each).
type Options struct {
	MaxConcurrentReconciles int
	HostsRoot               string
	Probes                  bool
	ProbeAllowedCIDRs       string
	AssignedUIDs            string // auto, true or false (Images.AssignedUIDs)
	MaxPinnedImages         int
}

// DefaultOptions returns the flags' defaults, written only here. complete leaves Probes
// alone: false is a value of its flag, so Options built in code probe only when they say so.
func DefaultOptions() Options {
	return Options{
		// A mirror's first pass makes seven writes one after the other: the first passes of
		// 100 new mirrors took 4.4× as long as a raw create of their objects with 2 workers,
		// 1.35–3.4× with 8, 2.7× with 16 (BenchmarkMirrorsToReady,
		// x-raw-create-children-written, on a busy 2-core machine).
		MaxConcurrentReconciles: 8,
		HostsRoot:               DefaultHostsRoot,
		Probes:                  true,
		AssignedUIDs:            "auto",
		// As many as a ConfigMap holds safely; shared fairly among namespaces (pinFairly).
		MaxPinnedImages: maxPinnedImages,
		// ProbeAllowedCIDRs: none beyond the rule.
	}
}

// BindFlags registers the controller's flags, with DefaultOptions as their defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	d := DefaultOptions()
	fs.IntVar(&o.MaxConcurrentReconciles, "registrymirror-workers", d.MaxConcurrentReconciles, "Parallel workers of the registrymirror controller.")
	fs.StringVar(&o.HostsRoot, "registrymirror-containerd-hosts-dir", d.HostsRoot,
		"The nodes' containerd registry config_path, where node agents of mirrors with configureNodes write <upstream host>/hosts.toml (k3s: /var/lib/rancher/k3s/agent/etc/containerd/certs.d).")
	fs.BoolVar(&o.Probes, "registrymirror-probes", d.Probes,
		"Probe each mirror's registry (GET /v2/ through its Service) and its upstream from the manager: Ready then means the registry answers and the upstream has answered once, "+
			"and UpstreamReachable follows the upstream. Turn off when the manager cannot reach the pod network (Ready then rests on the workloads alone).")
	fs.StringVar(&o.AssignedUIDs, "registrymirror-assigned-uids", d.AssignedUIDs,
		"Whether the platform assigns every pod its UID and fsGroup (OpenShift's restricted-v2), so the registry pod names none: "+
			"auto (when the cluster serves security.openshift.io SecurityContextConstraints), true or false.")
	fs.StringVar(&o.ProbeAllowedCIDRs, "registrymirror-probe-allowed-cidrs", d.ProbeAllowedCIDRs,
		"Comma-separated CIDRs the probes may connect to although they are loopback, link-local, unspecified, multicast or a cloud metadata address "+
			"(169.254.169.254, fd00:ec2::254, 100.100.100.200), which a mirror's upstream otherwise may not resolve to; private ranges need no entry. "+
			"Example: 127.0.0.0/8 for an upstream on the manager's own host.")
	fs.IntVar(&o.MaxPinnedImages, "registrymirror-max-pinned-images", d.MaxPinnedImages,
		fmt.Sprintf("The most images a mirror with node access pins and warms, shared fairly among the namespaces whose pods run them, running pods' first (1 to %d).", maxPinnedImages))
}

// complete fills zero fields but Probes (workers: below 1) from DefaultOptions and checks them, naming the flag.
func (o *Options) complete() error {
	d := DefaultOptions()
	if o.MaxConcurrentReconciles < 1 {
		o.MaxConcurrentReconciles = d.MaxConcurrentReconciles
	}
	o.HostsRoot = cmp.Or(o.HostsRoot, d.HostsRoot)
	o.AssignedUIDs = cmp.Or(o.AssignedUIDs, d.AssignedUIDs)
	o.MaxPinnedImages = cmp.Or(o.MaxPinnedImages, d.MaxPinnedImages)
	if o.MaxPinnedImages < 1 || o.MaxPinnedImages > maxPinnedImages {
		return fmt.Errorf("--registrymirror-max-pinned-images must be between 1 and %d (the pinned list fits a ConfigMap), got %d", maxPinnedImages, o.MaxPinnedImages)
	}
	if _, err := o.probeAllowedPrefixes(); err != nil {
		return err
	}
	// Whether the platform assigns UIDs is asked later; the value is checked now.
	_, err := o.assignedUIDs(func() bool { return false })
	return err
}

func (o *Options) probeAllowedPrefixes() ([]netip.Prefix, error) {
	return egress.ParseCIDRs("registrymirror-probe-allowed-cidrs", o.ProbeAllowedCIDRs)
}

// assignedUIDs decides --registrymirror-assigned-uids (hasSCC: OpenShift's SCC API served).
func (o *Options) assignedUIDs(hasSCC func() bool) (bool, error) {
	switch o.AssignedUIDs {
	case "", "auto":
		return hasSCC(), nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("--registrymirror-assigned-uids: %q is not auto, true or false", o.AssignedUIDs)
}

// ImagesFromEnv reads RELATED_IMAGE_REGISTRY and RELATED_IMAGE_NODE_AGENT (OLM's convention).
func ImagesFromEnv() Images {
	return Images{
		Registry:  cmp.Or(strings.TrimSpace(os.Getenv("RELATED_IMAGE_REGISTRY")), defaultRegImage),
		NodeAgent: cmp.Or(strings.TrimSpace(os.Getenv("RELATED_IMAGE_NODE_AGENT")), defaultNodeImage),
	}
}
