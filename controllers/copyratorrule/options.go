package copyratorrule

import (
	"flag"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// Options are the manager flags of the copyratorrule controller.
type Options struct {
	// MaxConcurrentReconciles is the number of rules reconciled in parallel.
	MaxConcurrentReconciles int
	// WriteParallelism is the number of copy writes in flight for one rule.
	WriteParallelism int
	// ConflictRecheck is how often a name held by an object Copyrator did not create is
	// tried again.
	ConflictRecheck time.Duration

	// clock is replaced by tests.
	clock clock.PassiveClock
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "copyratorrule-workers", 2, "Rules the copyratorrule controller reconciles in parallel.")
	fs.IntVar(&o.WriteParallelism, "copyratorrule-write-parallelism", 32, "Copy writes in flight for one CopyratorRule (the fan-out of one source into many namespaces).")
	fs.DurationVar(&o.ConflictRecheck, "copyratorrule-conflict-recheck", 2*time.Minute, "How often a CopyratorRule retries a namespace where an object it did not create holds the copy's name.")
}

func (o *Options) defaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 2
	}
	if o.WriteParallelism <= 0 {
		o.WriteParallelism = 32
	}
	if o.ConflictRecheck <= 0 {
		o.ConflictRecheck = 2 * time.Minute
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
}

// Setup registers the controller with the manager. Besides the rule watch it adds:
//   - a metadata-only watch of Namespaces (new namespaces get their copies at once);
//   - a cache of Copyrator's own copies only (label-selected, bodies dropped);
//   - one label-selected informer per rule for its sources (started by the first reconcile).
//
// It never starts a watch of all ConfigMaps or Secrets.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	o.defaults()
	copyCache, err := newCopyCache(mgr, shared.WatchNamespaces)
	if err != nil {
		return err
	}
	if err := mgr.Add(copyCache); err != nil {
		return fmt.Errorf("adding the copy cache: %w", err)
	}
	// Sources are read in protobuf, like the manager's own client does for built-in kinds.
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating a clientset: %w", err)
	}
	sources := newSourceWatcher(cs)
	if err := mgr.Add(sources); err != nil {
		return fmt.Errorf("adding the source watcher: %w", err)
	}
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		copies:    copyReader{cache: copyCache},
		sources:   sources,
		memo:      newConflictMemo(o.ConflictRecheck),
		writer:    writer{client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), parallelism: o.WriteParallelism},
		recorder:  mgr.GetEventRecorder("copyratorrule-controller"),
		clock:     o.clock,
		shared:    shared,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("copyratorrule").
		For(&flantv1.CopyratorRule{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, deletionStarted()))).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.rulesTargeting),
			builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, deletionStarted()))).
		WatchesRawSource(ctrlsource.Kind[client.Object](copyCache, &corev1.Secret{}, r.copyEvents())).
		WatchesRawSource(ctrlsource.Kind[client.Object](copyCache, &corev1.ConfigMap{}, r.copyEvents())).
		WatchesRawSource(ctrlsource.Func(sources.setQueue)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}

// deletionStarted passes updates that set the deletion timestamp.
func deletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
}
