package copyratorrule

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/metadata"
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
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
)

// Setup registers the controller with the manager: the rule watch, a metadata-only watch of
// Namespaces, the copy cache and the source watcher; never a watch of all ConfigMaps or Secrets.
func (o *Options) Setup(mgr ctrl.Manager, shared scope.Namespaces) error {
	if err := o.complete(); err != nil {
		return err
	}
	lim, _ := o.limits() // complete checked them
	copyCache, err := newCopyCache(mgr, shared)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating a metadata client: %w", err)
	}
	sources := newSourceWatcher(mgr.GetAPIReader(), md)
	if err := mgr.Add(sources); err != nil { // its informers stop with the manager
		return fmt.Errorf("adding the source watcher: %w", err)
	}
	clk := clock.RealClock{}
	c := client.WithFieldOwner(mgr.GetClient(), FieldOwner)
	r := &Reconciler{
		Client:     c,
		APIReader:  mgr.GetAPIReader(),
		Recorder:   mgr.GetEventRecorder(FieldOwner),
		Clock:      clk,
		Namespaces: shared,
		Protected:  protectedNamespaces(shared.Operator, scope.ParseList(o.ProtectedNamespaces)),
		Limits:     lim,

		MaxServiceAccounts: o.MaxServiceAccountsPerNamespace,
		statuses: status.NewWriter(c, mgr.GetAPIReader(),
			func(x *flantv1.CopyratorRule) *int64 { return &x.Status.ObservedGeneration }),
		copies:  copyReader{cache: copyCache, rules: mgr.GetClient()},
		writer:  writer{client: c, apiReader: mgr.GetAPIReader(), clock: clk, parallelism: o.WriteParallelism, removalsPerSecond: o.RemovalsPerSecond},
		sources: sources,
		access:  newAccessReviewer(c, clk, o.ConsentRecheck, o.ConsentRefresh, o.WriteParallelism, o.ConsentReviewsPerSecond),
		rules:   newRuleStates(o.ConflictRecheck),
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("copyratorrule").
		For(&flantv1.CopyratorRule{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, scope.DeletionStarted()))).
		WatchesMetadata(&corev1.Namespace{}, r.namespaceEvents(),
			builder.WithPredicates(predicate.Or[client.Object](predicate.LabelChangedPredicate{}, scope.DeletionStarted()))).
		WatchesRawSource(ctrlsource.Kind[client.Object](copyCache, &corev1.Secret{}, r.copyEvents())).
		WatchesRawSource(ctrlsource.Kind[client.Object](copyCache, &corev1.ConfigMap{}, r.copyEvents())).
		WatchesRawSource(ctrlsource.Func(sources.setQueue)).
		WatchesRawSource(ctrlsource.Func(r.rules.setQueue)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}

// newCopyCache builds the cache of Copyrator's copies (scope.NewCache): ConfigMaps and
// Secrets labelled managed-by=copyrator, without bodies (stripBody), indexed by rule.
func newCopyCache(mgr ctrl.Manager, shared scope.Namespaces) (cache.Cache, error) {
	managed := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue})
	c, err := scope.NewCache(mgr, shared, "copy", map[client.Object]cache.ByObject{
		&corev1.Secret{}:    {Label: managed, Transform: stripBody},
		&corev1.ConfigMap{}: {Label: managed, Transform: stripBody},
	}, true)
	if err != nil {
		return nil, err
	}
	for _, obj := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		if err := c.IndexField(context.Background(), obj, ruleIndex, indexByRule); err != nil {
			return nil, fmt.Errorf("indexing copies by rule: %w", err)
		}
	}
	return c, nil
}

// stripBody is the copy cache's transform: it keeps the hash and size of the content in
// cache-only annotations and drops the body, managed fields and others' annotations.
// Idempotent, as client-go asks (else the first pass after a start saw every copy out of
// sync: TestRestartWritesNothing).
func stripBody(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil // a tombstone
	}
	if _, done := obj.GetAnnotations()[cachedHashAnnotation]; done {
		return obj, nil
	}
	hash, size := contentHash(obj), contentSize(obj)
	obj.SetManagedFields(nil)
	// Copyrator's annotations and the carried ones stay; anyone else's (kubectl's
	// last-applied-configuration, a look-alike's megabytes) go, their presence noted (a patch
	// of the annotations map differs when it exists).
	carried := sets.New(recordedKeys(obj.GetAnnotations()[AnnotationCarriedAnnotations])...)
	ann := make(map[string]string, len(carried)+5)
	for k, v := range obj.GetAnnotations() {
		switch {
		case ownMetadataKey(k), carried.Has(k):
			ann[k] = v
		default:
			ann[cachedOthersAnnotation] = "true"
		}
	}
	ann[cachedHashAnnotation] = hash
	ann[cachedSizeAnnotation] = strconv.FormatInt(size, 10)
	obj.SetAnnotations(ann)
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	}
	return obj, nil
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// rulesTargeting maps a namespace event to the rules that copy into that namespace, but
// for those whose spec is a mistake (InvalidSpec at their generation): they wait for an edit.
func (r *Reconciler) rulesTargeting(ctx context.Context, ns client.Object) []reconcile.Request {
	var rules flantv1.CopyratorRuleList
	// Read-only: the cached objects are not copied.
	if err := r.Client.List(ctx, &rules, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list CopyratorRules for a namespace event", "namespace", ns.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range rules.Items {
		if specMistake(&rules.Items[i]) {
			continue
		}
		f, err := newNamespaceFilter(&rules.Items[i], r.Namespaces.Watches, r.Protected)
		if err == nil && f.selects(ns) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rules.Items[i])})
		}
	}
	return out
}

// specMistake reports whether the rule's status says its current spec is a mistake.
func specMistake(rule *flantv1.CopyratorRule) bool {
	ready := meta.FindStatusCondition(rule.Status.Conditions, flantv1.ConditionReady)
	return rule.Status.ObservedGeneration == rule.Generation && ready != nil && ready.Reason == flantv1.ReasonInvalidSpec
}

// namespaceEvents maps namespace events to the rules that copy into the namespace (before
// or after the event) and notes it as fresh for them: their next pass writes its copies
// first. The informer's first list is not fresh.
func (r *Reconciler) namespaceEvents() handler.EventHandler {
	mapped := handler.EnqueueRequestsFromMapFunc(r.rulesTargeting)
	enqueue := func(ctx context.Context, q queue, namespaces ...client.Object) {
		for _, ns := range namespaces {
			for _, req := range r.rulesTargeting(ctx, ns) {
				r.rules.addFresh(req.NamespacedName, ns.GetName(), r.Clock.Now())
				q.Add(req) // the queue holds a request once
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

// echoDelay is how long the echo of the rule's own copy write waits before it wakes the
// rule (a pass in between may have planned without the copy), and a fresh-only pass for
// its full pass: a burst's echoes cost one pass; any other event wakes the rule at once.
const echoDelay = time.Second

// sweepDelay is how long an event on a copy of a rule gone, or of another UID, waits before
// it wakes the rule's key (a sweep, or the pass that replaces it): however many such events
// come, one pass per key and sweepDelay.
const sweepDelay = 10 * time.Second

// copyEvents wakes the rule that wrote a copy (the echo of its own write after echoDelay)
// and, when a copy goes, the rules whose sources have its name (they found it taken).
// Events on look-alikes (no rule of that name, or another UID) are counted in
// lookalikesTotal and wake the key only after sweepDelay, for the sweep or the pass that
// deletes them.
func (r *Reconciler) copyEvents() handler.EventHandler {
	owner := func(ctx context.Context, obj client.Object, q queue, echo bool) {
		rule, ok := ruleOfCopy(obj)
		if !ok {
			return
		}
		req := reconcile.Request{NamespacedName: rule}
		switch uid := obj.GetLabels()[LabelRuleUID]; {
		case uid == "" || uid != r.uidOf(ctx, rule):
			lookalikesTotal.WithLabelValues(obj.GetNamespace()).Inc()
			if uid != "" {
				q.AddAfter(req, sweepDelay)
			}
		case echo:
			q.AddAfter(req, echoDelay)
		default:
			q.Add(req)
		}
	}
	echo := func(obj client.Object) bool {
		st := stateOf(obj)
		src, ok := r.sources.wanted(st.Rule, st.Key.Kind, st.Key.Name)
		return ok && isEcho(st.Rule, src, st)
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { owner(ctx, e.Object, q, echo(e.Object)) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			isEcho := echo(e.ObjectNew)
			owner(ctx, e.ObjectOld, q, isEcho)
			owner(ctx, e.ObjectNew, q, isEcho)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			owner(ctx, e.Object, q, false)
			key := keyOf(e.Object)
			for _, rule := range r.sources.rulesPicking(key.Kind, key.Name) {
				q.Add(reconcile.Request{NamespacedName: rule})
			}
		},
	}
}

// uidOf returns the UID of the rule in the manager's cache; "" when it has none.
func (r *Reconciler) uidOf(ctx context.Context, rule types.NamespacedName) string {
	got := &flantv1.CopyratorRule{}
	if err := r.Client.Get(ctx, rule, got); err != nil {
		return ""
	}
	return string(got.UID)
}

// isEcho reports whether copy c is what rule wants, src as the rule sees it: its event is
// the echo of the controller's own write. Anyone else's change to what a copy holds (data,
// Copyrator's annotations, a carried label) makes it differ.
func isEcho(rule types.NamespacedName, src source, c copyState) bool {
	return c.Rule == rule && copyInSync(ruleID{NamespacedName: rule, UID: types.UID(c.RuleUID)}, &c, &src)
}
