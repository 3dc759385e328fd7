package copyratorrule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	ctrlsource "sigs.k8s.io/controller-runtime/pkg/source"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// Setup registers the controller with the manager. Besides the rule watch it adds:
//   - a metadata-only watch of Namespaces (new namespaces get their copies at once);
//   - a cache of Copyrator's own copies only (label-selected, bodies dropped);
//   - one metadata-only informer per namespace and kind that rules copy from, shared by
//     the rules there (sourceWatcher, started by the first reconcile that needs it).
//
// It never starts a watch of all ConfigMaps or Secrets.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	if err := o.complete(); err != nil {
		return err
	}
	lim, err := o.limits()
	if err != nil {
		return err
	}
	copies := newLedger()
	copyCache, err := newCopyCache(mgr, shared.WatchNamespaces, copies)
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
	md, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating a metadata client: %w", err)
	}
	full := newFullPasses()
	sources := newSourceWatcher(cs, md, full)
	if err := mgr.Add(sources); err != nil {
		return fmt.Errorf("adding the source watcher: %w", err)
	}
	clk := clock.RealClock{}
	c := client.WithFieldOwner(mgr.GetClient(), FieldOwner)
	r := &Reconciler{
		Client:    c,
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(FieldOwner),
		Clock:     clk,
		Shared:    shared,
		Protected: protectedNamespaces(shared.OperatorNamespace, operator.ParseNamespaces(o.ProtectedNamespaces)),
		Limits:    lim,
		access:    newAccessReviewer(c, clk, o.ConsentRecheck, o.ConsentRefresh, o.WriteParallelism),
		ledger:    copies,
		copies:    copyReader{cache: copyCache},
		sources:   sources,
		memo:      newConflictMemo(o.ConflictRecheck),
		fresh:     newFreshNamespaces(),
		full:      full,
		writer: writer{client: c, apiReader: mgr.GetAPIReader(), parallelism: o.WriteParallelism,
			own: newOwnWrites()},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("copyratorrule").
		For(&flantv1.CopyratorRule{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, operator.DeletionStarted()))).
		WatchesMetadata(&corev1.Namespace{}, r.namespaceEvents(),
			builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, operator.DeletionStarted()))).
		WatchesRawSource(ctrlsource.Kind[client.Object](copyCache, &corev1.Secret{}, r.copyEvents())).
		WatchesRawSource(ctrlsource.Kind[client.Object](copyCache, &corev1.ConfigMap{}, r.copyEvents())).
		WatchesRawSource(ctrlsource.Func(sources.setQueue)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}

// newCopyCache builds the cache of Copyrator's copies: only ConfigMaps and Secrets labelled
// managed-by=copyrator, in the watched namespaces, without their bodies (the transform
// keeps the metadata, the Secret type, immutability and a hash of the content). Memory thus
// follows the number of copies, never the cluster's ConfigMaps and Secrets.
func newCopyCache(mgr ctrl.Manager, watchNamespaces []string, copies *ledger) (cache.Cache, error) {
	managed := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue})
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(),
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:    {Label: managed, Transform: stripBody},
			&corev1.ConfigMap{}: {Label: managed, Transform: stripBody},
		},
		DefaultNamespaces: operator.CacheNamespaces(watchNamespaces),
		// Reading any other kind through this cache is a bug, not a reason to start a watch.
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the copy cache: %w", err)
	}
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		if err := c.IndexField(context.Background(), obj, ruleIndex, indexByRule); err != nil {
			return nil, fmt.Errorf("indexing copies by rule: %w", err)
		}
		inf, err := c.GetInformer(context.Background(), obj)
		if err != nil {
			return nil, fmt.Errorf("the copy cache's informer: %w", err)
		}
		// The ledger of copies and their bytes follows the cache (see limits.go).
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { copies.setFrom(o) },
			UpdateFunc: func(_, o any) { copies.setFrom(o) },
			DeleteFunc: func(o any) { copies.removeFrom(o) },
		}); err != nil {
			return nil, fmt.Errorf("following the copy cache: %w", err)
		}
	}
	return c, nil
}

// rulesTargeting maps a namespace event to the rules that copy into that namespace, so a
// new namespace gets its copies at once.
func (r *Reconciler) rulesTargeting(ctx context.Context, ns client.Object) []reconcile.Request {
	var rules flantv1.CopyratorRuleList
	if err := r.Client.List(ctx, &rules); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list CopyratorRules for a namespace event", "namespace", ns.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range rules.Items {
		f, err := newNamespaceFilter(&rules.Items[i], r.Shared.Watches, r.Protected)
		if err == nil && f.selects(ns) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rules.Items[i])})
		}
	}
	return out
}

// namespaceEvents maps namespace events to the rules that copy into the namespace (before
// or after the event) and notes the namespace as fresh for those rules, so their next pass
// writes its copies first. Namespaces of the informer's first list are not fresh: the first
// passes look at every namespace anyway, and they wait behind other work (low priority).
func (r *Reconciler) namespaceEvents() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	mapped := handler.EnqueueRequestsFromMapFunc(r.rulesTargeting)
	enqueue := func(ctx context.Context, q queue, namespaces ...client.Object) {
		added := map[reconcile.Request]bool{}
		for _, ns := range namespaces {
			for _, req := range r.rulesTargeting(ctx, ns) {
				r.fresh.add(req.NamespacedName, ns.GetName())
				if !added[req] {
					added[req] = true
					q.Add(req)
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) {
			if e.IsInInitialList {
				mapped.Create(ctx, e, q)
				return
			}
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc:  func(ctx context.Context, e event.UpdateEvent, q queue) { enqueue(ctx, q, e.ObjectOld, e.ObjectNew) },
		DeleteFunc:  mapped.Delete,
		GenericFunc: mapped.Generic,
	}
}

// echoDelay is how long the echo of the controller's own copy write waits before it wakes
// the rule. The pass that wrote the copy counted it already; the echo's pass only matters
// when a pass in between planned without the copy (its cache was behind) and reported it
// pending. Delayed, the echoes of a burst of writes cost one pass, and they never hold up
// a pass that has work: any other event wakes the rule at once and the echo joins it.
const echoDelay = time.Second

// copyEvents maps copy events to the rule that owns the copy and, when a copy goes away,
// to the rules that could not write its name. A copy event that is only the echo of the
// controller's own write wakes the owner after echoDelay.
func (r *Reconciler) copyEvents() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	owner := func(obj client.Object, q queue, echo bool) {
		rule, ok := ruleOfCopy(obj)
		switch {
		case !ok:
		case echo:
			q.AddAfter(reconcile.Request{NamespacedName: rule}, echoDelay)
		default:
			r.full.mark(rule)
			q.Add(reconcile.Request{NamespacedName: rule})
		}
	}
	echo := func(obj client.Object) bool { return r.writer.own.echo(stateOf(obj)) }
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { owner(e.Object, q, echo(e.Object)) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			isEcho := echo(e.ObjectNew)
			owner(e.ObjectOld, q, isEcho)
			owner(e.ObjectNew, q, isEcho)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			key := keyOf(e.Object)
			r.writer.own.forget(key)
			owner(e.Object, q, false)
			for _, rule := range r.memo.rulesWanting(key) {
				r.full.mark(rule)
				q.Add(reconcile.Request{NamespacedName: rule})
			}
		},
	}
}

// keyOf returns the key of a copy the copy cache reports.
func keyOf(obj client.Object) copyKey {
	return copyKey{Kind: kindOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// kindOf returns the kind of a copy the copy cache reports.
func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return kindSecret
	}
	return kindConfigMap
}
