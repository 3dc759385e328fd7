package exchangerate

import (
	"math/rand/v2"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
)

// notOurWrite lets ConfigMap events through unless they echo our own create or patch.
var notOurWrite = predicate.TypedFuncs[*corev1.ConfigMap]{
	CreateFunc: func(e event.TypedCreateEvent[*corev1.ConfigMap]) bool { return !lastWriteOurs(e.Object) },
	UpdateFunc: func(e event.TypedUpdateEvent[*corev1.ConfigMap]) bool { return !lastWriteOurs(e.ObjectNew) },
}

// Setup checks the flag values and registers the controller with the manager.
func (o *Options) Setup(mgr ctrl.Manager, shared scope.Namespaces) error {
	if err := o.complete(); err != nil {
		return err
	}
	sources, err := o.newSources(clock.RealClock{}, &http.Client{Transport: http.DefaultTransport})
	if err != nil {
		return err
	}
	return o.register(mgr, o.newReconciler(sources, shared))
}

// register adds r to mgr; its caches hold the watched namespaces only (no filter needed).
func (o *Options) register(mgr ctrl.Manager, r *Reconciler) error {
	r.Client = client.WithFieldOwner(mgr.GetClient(), FieldOwner)
	r.APIReader = mgr.GetAPIReader()
	r.Recorder = mgr.GetEventRecorder(FieldOwner)
	r.Status = status.NewWriter(r.Client, r.APIReader, func(x *operatorsv1.ExchangeRate) *int64 { return &x.Status.ObservedGeneration })
	// Ours only, by label; with managedFields, which tell our writes from other people's edits.
	cmCache, err := scope.NewCache(mgr, r.Namespaces, "ConfigMap", map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue})},
	}, false)
	if err != nil {
		return err
	}
	r.ConfigMaps = cmCache
	for _, c := range r.Sources.Defaults() {
		mgr.GetLogger().WithName("exchangerate").Info("Using exchange rate source by default", "source", c.Name(), "url", sourceURL(c.source))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("exchangerate").
		// Status writes do not change the generation, so our own writes do not wake us.
		For(&operatorsv1.ExchangeRate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Someone else's edit or deletion of a ConfigMap wakes its owner; our own writes do not.
		WatchesRawSource(source.Kind(cmCache, &corev1.ConfigMap{},
			handler.TypedEnqueueRequestForOwner[*corev1.ConfigMap](mgr.GetScheme(), mgr.GetRESTMapper(), &operatorsv1.ExchangeRate{}, handler.OnlyControllerOwner()),
			notOurWrite)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}

// newSources is the set of sources o calls for, each reading through client on clk.
func (o *Options) newSources(clk clock.PassiveClock, client *http.Client) (*Sources, error) {
	defaults, err := o.defaultSources()
	if err != nil {
		return nil, err
	}
	return NewSources(defaults, o.MaxSources, func(ref SourceRef) (*RateCache, error) {
		src, err := NewSource(ref.String(), o.urlFor(ref.Type), client)
		if err != nil {
			return nil, err
		}
		return NewRateCache(src, clk, exponentialBackoff(o.BackoffBase, o.BackoffMax), o.FetchTimeout), nil
	})
}

// newReconciler is the reconciler o calls for; a test may change it before register.
func (o *Options) newReconciler(sources *Sources, shared scope.Namespaces) *Reconciler {
	return &Reconciler{
		Clock:           clock.RealClock{},
		Rand:            rand.Float64,
		Namespaces:      shared,
		Sources:         sources,
		DefaultInterval: o.RefreshInterval,
		StaleAfterDays:  o.StaleAfterDays,
	}
}
