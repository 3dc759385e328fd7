package exchangerate

import (
	"fmt"
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
	"github.com/quartet-operator/quartet/internal/operator"
)

// notOurWrite lets ConfigMap events through unless they echo our own create or patch.
var notOurWrite = predicate.TypedFuncs[*corev1.ConfigMap]{
	CreateFunc: func(e event.TypedCreateEvent[*corev1.ConfigMap]) bool { return !lastWriteOurs(e.Object) },
	UpdateFunc: func(e event.TypedUpdateEvent[*corev1.ConfigMap]) bool { return !lastWriteOurs(e.ObjectNew) },
}

// Setup checks the flag values and registers the controller with the manager: a
// ConfigMap cache of its own, the shared rate table, and the watches.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	if err := o.complete(); err != nil {
		return err
	}
	sources, err := o.newSources(clock.RealClock{}, &http.Client{Transport: http.DefaultTransport})
	if err != nil {
		return err
	}
	return o.register(mgr, o.newReconciler(sources, shared))
}

// register gives r the manager's clients, its recorder and a ConfigMap cache, and adds r to
// the manager as the exchangerate controller.
func (o *Options) register(mgr ctrl.Manager, r *Reconciler) error {
	r.Client = client.WithFieldOwner(mgr.GetClient(), FieldOwner)
	r.APIReader = mgr.GetAPIReader()
	r.Recorder = mgr.GetEventRecorder(FieldOwner)
	// A cache of our own for ConfigMaps, selected by our label: the manager's cache would
	// hold every ConfigMap of the cluster. It keeps managedFields (small for five keys):
	// they tell our own writes from other people's edits.
	cmCache, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue})},
		},
		DefaultNamespaces: operator.CacheNamespaces(r.Shared.WatchNamespaces),
	})
	if err != nil {
		return fmt.Errorf("creating ConfigMap cache: %w", err)
	}
	if err := mgr.Add(cmCache); err != nil {
		return err
	}
	r.ConfigMaps = cmCache

	watched := predicate.NewPredicateFuncs(func(obj client.Object) bool { return r.Shared.Watches(obj.GetNamespace()) })
	for _, c := range r.Sources.Defaults() {
		mgr.GetLogger().WithName("exchangerate").Info("Using exchange rate source by default", "source", c.Name(), "url", sourceURL(c.source))
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("exchangerate").
		// Status writes do not change the generation, so our own writes do not wake us.
		For(&operatorsv1.ExchangeRate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, watched)).
		// ConfigMap events wake the owner when someone else edits or deletes its ConfigMap;
		// the echo of our own writes does not.
		WatchesRawSource(source.Kind(cmCache, &corev1.ConfigMap{},
			handler.TypedEnqueueRequestForOwner[*corev1.ConfigMap](mgr.GetScheme(), mgr.GetRESTMapper(), &operatorsv1.ExchangeRate{}, handler.OnlyControllerOwner()),
			notOurWrite)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}

// newSources is the manager's set of sources the flag values in o (completed) call for:
// the defaults' caches built, the others built when an ExchangeRate first names them, each
// reading through client on clk.
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

// newReconciler is the reconciler the flag values in o (completed) call for, with the
// real clock and random source; register adds what comes from the manager. A test may
// replace a field before it registers it.
func (o *Options) newReconciler(sources *Sources, shared operator.Shared) *Reconciler {
	return &Reconciler{
		Clock:           clock.RealClock{},
		Rand:            rand.Float64,
		Shared:          shared,
		Sources:         sources,
		DefaultInterval: o.RefreshInterval,
		StaleAfterDays:  o.StaleAfterDays,
	}
}
