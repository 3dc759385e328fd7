package registrymirror

import (
	"context"
	"flag"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// Options are the manager flags of the registrymirror controller.
type Options struct {
	// MaxConcurrentReconciles is the number of parallel workers.
	MaxConcurrentReconciles int
	// HostsRoot is the nodes' containerd registry config_path.
	HostsRoot string
	// Probes turns the manager's probes of registries and upstreams on.
	Probes bool
	// Prober replaces the HTTP prober (tests).
	Prober Prober
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "registrymirror-workers", 2, "Parallel workers of the registrymirror controller.")
	fs.StringVar(&o.HostsRoot, "registrymirror-containerd-hosts-dir", DefaultHostsRoot,
		"The nodes' containerd registry config_path, where node agents of mirrors with configureNodes write <upstream host>/hosts.toml (k3s: /var/lib/rancher/k3s/agent/etc/containerd/certs.d).")
	fs.BoolVar(&o.Probes, "registrymirror-probes", true,
		"Probe each mirror's registry (GET /v2/ through its Service) and its upstream from the manager: Ready then means the registry answers and the upstream has answered once, "+
			"and UpstreamReachable follows the upstream. Turn off when the manager cannot reach the pod network (Ready then rests on the workloads alone).")
}

// ImagesFromEnv reads the operand images from RELATED_IMAGE_REGISTRY and
// RELATED_IMAGE_NODE_AGENT (OLM's convention for disconnected installs), with defaults.
func ImagesFromEnv() Images {
	img := Images{Registry: defaultRegImage, NodeAgent: defaultNodeImage}
	if v := strings.TrimSpace(os.Getenv("RELATED_IMAGE_REGISTRY")); v != "" {
		img.Registry = v
	}
	if v := strings.TrimSpace(os.Getenv("RELATED_IMAGE_NODE_AGENT")); v != "" {
		img.NodeAgent = v
	}
	return img
}

// Setup registers the controller with the manager.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	workers := o.MaxConcurrentReconciles
	if workers < 1 {
		workers = 2
	}
	r := &Reconciler{
		Client:    mgr.GetClient(),
		Recorder:  mgr.GetEventRecorder("registrymirror"),
		Clock:     clock.RealClock{},
		Images:    ImagesFromEnv(),
		Shared:    shared,
		HostsRoot: o.HostsRoot,
	}
	switch {
	case o.Prober != nil:
		r.Prober = o.Prober
	case o.Probes:
		r.Prober = NewHTTPProber(r.Clock)
	}
	inScope := predicate.NewPredicateFuncs(func(o client.Object) bool { return shared.Watches(o.GetNamespace()) })
	// Objects of a child's name that nobody controls: their creation or deletion may start
	// or end a conflict, which Owns() cannot see.
	uncontrolled := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return metav1.GetControllerOf(o) == nil && shared.Watches(o.GetNamespace())
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("registrymirror").
		// Generation changes only: the controller's own status writes do not wake it.
		For(&mirrorsv1alpha1.RegistryMirror{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, inScope)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		b = b.Owns(obj, builder.WithPredicates(inScope)).
			Watches(obj, handler.EnqueueRequestsFromMapFunc(mirrorsNamedAfter), builder.WithPredicates(uncontrolled))
	}
	return b.Complete(r)
}

// mirrorsNamedAfter maps an object to the mirrors whose child it would be by name.
func mirrorsNamedAfter(_ context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, suffix := range childSuffixes {
		if name, ok := strings.CutSuffix(o.GetName(), suffix); ok && name != "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
		}
	}
	return out
}
