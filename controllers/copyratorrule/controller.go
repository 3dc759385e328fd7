// Package copyratorrule implements the CopyratorRule controller: it copies the ConfigMaps
// or Secrets of a rule's namespace that match the rule's labels into other namespaces and
// keeps the copies equal to their sources.
package copyratorrule

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// +kubebuilder:rbac:groups=flant.com,resources=copyrators,verbs=list;watch;patch
// +kubebuilder:rbac:groups=flant.com,resources=copyrators/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// Reconciler reconciles CopyratorRules.
type Reconciler struct {
	// client reads rules and namespace metadata from the manager's cache and writes.
	client    client.Client
	apiReader client.Reader
	copies    copyReader
	sources   *sourceWatcher
	memo      *conflictMemo
	writer    writer
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	shared    operator.Shared
}

// Reconcile makes the copies of one rule equal to its sources.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	rule := &flantv1.CopyratorRule{}
	if err := r.client.Get(ctx, req.NamespacedName, rule); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !rule.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, rule)
	}
	if !controllerutil.ContainsFinalizer(rule, Finalizer) {
		// Added and carried on in the same pass: the finalizer update does not change the
		// generation, so it would not wake the controller again anyway.
		if err := r.patchFinalizer(ctx, rule, controllerutil.AddFinalizer); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}

	pass := r.sync(ctx, rule)
	defer func() {
		err = errors.Join(err, r.writeStatus(ctx, rule, pass))
	}()
	switch {
	case pass.SyncErr != nil:
		return ctrl.Result{}, pass.SyncErr
	case len(pass.WriteErrs) > 0:
		return ctrl.Result{}, fmt.Errorf("%d writes failed: %s", len(pass.WriteErrs), summarize(pass.WriteErrs))
	}
	return ctrl.Result{RequeueAfter: r.memo.nextRecheck(req.NamespacedName, r.clock.Now())}, nil
}

// sync reads the rule's sources, targets and copies, plans and writes.
func (r *Reconciler) sync(ctx context.Context, rule *flantv1.CopyratorRule) passResult {
	key := client.ObjectKeyFromObject(rule)
	kind := ruleKind(rule.Spec.RuleType)
	res := passResult{Kind: kind}
	filter, err := newNamespaceFilter(rule, r.shared.Watches)
	if err != nil {
		res.SpecErr = err
		return res
	}
	sources, err := r.sources.sources(ctx, rule)
	if err != nil {
		res.SyncErr = fmt.Errorf("reading sources: %w", err)
		return res
	}
	targets, terminating, err := r.targetNamespaces(ctx, filter)
	if err != nil {
		res.SyncErr = err
		return res
	}
	owned, err := r.copies.owned(ctx, key)
	if err != nil {
		res.SyncErr = err
		return res
	}
	occupied, err := r.copies.occupied(ctx, key, kind, targets, sources, owned)
	if err != nil {
		res.SyncErr = err
		return res
	}
	now := r.clock.Now()
	p := planCopies(planInput{Rule: key, Kind: kind, Sources: sources, Targets: targets, Terminating: terminating,
		Owned: owned, Occupied: occupied, KnownForeign: r.memo.knownForeign(key, now)})
	results := r.writer.execute(ctx, key, p.Actions)

	res.Sources, res.Targets, res.Desired, res.InSync = len(sources), len(targets), p.Desired, p.InSync
	res.Conflicts = p.Conflicts
	checked := map[copyKey]bool{}
	for _, wr := range results {
		switch {
		case wr.Err != nil:
			res.WriteErrs = append(res.WriteErrs, wr.Err.Error())
		case wr.Conflict != nil:
			res.Conflicts = append(res.Conflicts, *wr.Conflict)
			checked[wr.Conflict.Key] = true
		case wr.Done && wr.Action.Op != opDelete:
			res.InSync++
		}
	}
	sort.Slice(res.Conflicts, func(i, j int) bool { return lessKey(res.Conflicts[i].Key, res.Conflicts[j].Key) })
	fresh := r.memo.update(key, res.Conflicts, checked, now)
	r.report(ctx, rule, results, fresh)
	conflictsGauge.WithLabelValues(key.Namespace, key.Name).Set(float64(len(res.Conflicts)))
	copiesInSyncGauge.WithLabelValues(key.Namespace, key.Name).Set(float64(res.InSync))
	return res
}

// targetNamespaces lists namespace metadata from the cache and picks the rule's targets.
func (r *Reconciler) targetNamespaces(ctx context.Context, f namespaceFilter) ([]string, map[string]bool, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.client.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("listing namespaces: %w", err)
	}
	targets, terminating := selectTargets(f, list.Items)
	return targets, terminating, nil
}

// writeStatus patches the status when the pass changed it.
func (r *Reconciler) writeStatus(ctx context.Context, rule *flantv1.CopyratorRule, pass passResult) error {
	status := computeStatus(rule, pass, metav1.NewTime(r.clock.Now()))
	if equality.Semantic.DeepEqual(status, rule.Status) {
		return nil
	}
	patch := client.MergeFrom(rule.DeepCopy())
	rule.Status = status
	if err := r.client.Status().Patch(ctx, rule, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// report sends Events, counts metrics and logs what a pass did. Copy writes are summed up
// in one Event per kind of action; each new conflict gets a Warning Event of its own.
func (r *Reconciler) report(ctx context.Context, rule *flantv1.CopyratorRule, results []writeResult, fresh []conflict) {
	log := ctrl.LoggerFrom(ctx)
	key := client.ObjectKeyFromObject(rule)
	done := map[op][]copyKey{}
	var failed int
	for _, wr := range results {
		switch {
		case wr.Err != nil:
			failed++
		case wr.Done:
			done[wr.Action.Op] = append(done[wr.Action.Op], wr.Action.Key)
		}
	}
	for _, x := range []struct {
		op             op
		metric, reason string
		action, verb   string
	}{
		{opCreate, actionCreated, "CopiesCreated", "Create", "Created"},
		{opUpdate, actionUpdated, "CopiesUpdated", "Update", "Updated"},
		{opRecreate, actionRecreated, "CopiesRecreated", "Recreate", "Re-created"},
		{opDelete, actionDeleted, "CopiesDeleted", "Delete", "Deleted"},
	} {
		keys := done[x.op]
		if len(keys) == 0 {
			continue
		}
		countCopies(key, x.metric, len(keys))
		note := fmt.Sprintf("%s %d %s: %s", x.verb, len(keys), plural(len(keys), "copy", "copies"), describeKeys(keys))
		r.recorder.Eventf(rule, nil, corev1.EventTypeNormal, x.reason, x.action, "%s", note)
		log.Info(x.verb+" copies", "copyratorRule", klog.KObj(rule), "count", len(keys), "first", keys[0].String())
	}
	if failed > 0 {
		countCopies(key, actionFailed, failed)
	}
	const maxConflictEvents = 10
	for i, c := range fresh {
		if i == maxConflictEvents {
			r.recorder.Eventf(rule, nil, corev1.EventTypeWarning, "CopyConflicts", "Skip",
				"%d more target objects are not this rule's copies and are left alone", len(fresh)-maxConflictEvents)
			break
		}
		related := &corev1.ObjectReference{APIVersion: "v1", Kind: c.Key.Kind, Namespace: c.Key.Namespace, Name: c.Key.Name}
		r.recorder.Eventf(rule, related, corev1.EventTypeWarning, "CopyConflict", "Skip",
			"Left %s alone: %s", c.Key, c.Reason)
		log.Info("Left a conflicting object alone", "copyratorRule", klog.KObj(rule), "object", c.Key.String(), "reason", c.Reason)
	}
}

func describeKeys(keys []copyKey) string {
	const shown = 3
	parts := make([]string, 0, shown)
	for _, k := range keys[:min(len(keys), shown)] {
		parts = append(parts, k.String())
	}
	s := strings.Join(parts, ", ")
	if len(keys) > shown {
		s += fmt.Sprintf(" and %d more", len(keys)-shown)
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// reconcileDelete deletes (deletionPolicy Delete) or releases (Retain) every copy of the
// rule, then removes the finalizer. Copies are listed live from the API server (metadata
// only, selected by the rule's labels), so a copy the cache has not reported yet is not
// left behind.
func (r *Reconciler) reconcileDelete(ctx context.Context, rule *flantv1.CopyratorRule) error {
	key := client.ObjectKeyFromObject(rule)
	if !controllerutil.ContainsFinalizer(rule, Finalizer) {
		r.forget(key)
		return nil
	}
	copies, err := r.liveCopies(ctx, key)
	if err != nil {
		return err
	}
	retain := rule.Spec.DeletionPolicy == flantv1.DeletionPolicyRetain
	actions := make([]action, 0, len(copies))
	for i := range copies {
		a := action{Op: opDelete, Key: copies[i].Key, Existing: &copies[i]}
		if retain {
			a.Op = opRelease
		}
		actions = append(actions, a)
	}
	results := r.writer.execute(ctx, key, actions)
	var errs []string
	for _, wr := range results {
		if wr.Err != nil {
			errs = append(errs, wr.Err.Error())
		}
	}
	if n := len(results) - len(errs); n > 0 {
		verb, reason, metric := "Deleted", "CopiesDeleted", actionDeleted
		if retain {
			verb, reason, metric = "Released", "CopiesReleased", actionReleased
		}
		countCopies(key, metric, n)
		r.recorder.Eventf(rule, nil, corev1.EventTypeNormal, reason, strings.TrimSuffix(verb, "d"),
			"%s %d %s (deletionPolicy %s)", verb, n, plural(n, "copy", "copies"), rule.Spec.DeletionPolicy)
		ctrl.LoggerFrom(ctx).Info(verb+" copies of a deleted rule", "copyratorRule", klog.KObj(rule), "count", n)
	}
	if len(errs) > 0 {
		return fmt.Errorf("cleaning up %d copies failed: %s", len(errs), summarize(errs))
	}
	if err := r.patchFinalizer(ctx, rule, controllerutil.RemoveFinalizer); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	r.forget(key)
	return nil
}

// liveCopies lists the metadata of every copy labelled with the rule, in the watched namespaces.
func (r *Reconciler) liveCopies(ctx context.Context, rule types.NamespacedName) ([]copyState, error) {
	namespaces := r.shared.WatchNamespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var out []copyState
	for _, kind := range []string{kindConfigMap, kindSecret} {
		for _, ns := range namespaces {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
			if err := r.apiReader.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(copyLabels(rule))); err != nil {
				return nil, fmt.Errorf("listing %s copies: %w", kind, err)
			}
			for _, m := range list.Items {
				out = append(out, copyState{Key: copyKey{Kind: kind, Namespace: m.Namespace, Name: m.Name},
					UID: m.UID, Rule: rule, Annotations: m.Annotations})
			}
		}
	}
	return out, nil
}

type finalizerFunc func(client.Object, string) bool

// patchFinalizer adds or removes the finalizer with an optimistic lock, so a finalizer
// someone else changes at the same moment is not lost.
func (r *Reconciler) patchFinalizer(ctx context.Context, rule *flantv1.CopyratorRule, change finalizerFunc) error {
	patch := client.MergeFromWithOptions(rule.DeepCopy(), client.MergeFromWithOptimisticLock{})
	change(rule, Finalizer)
	return r.client.Patch(ctx, rule, patch)
}

// forget drops what the controller keeps in memory about a rule that is gone.
func (r *Reconciler) forget(rule types.NamespacedName) {
	r.sources.forget(rule)
	r.memo.forget(rule)
	forgetMetrics(rule)
}

// rulesTargeting maps a namespace event to the rules that copy into that namespace, so a
// new namespace gets its copies at once.
func (r *Reconciler) rulesTargeting(ctx context.Context, ns client.Object) []reconcile.Request {
	var rules flantv1.CopyratorRuleList
	if err := r.client.List(ctx, &rules); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list CopyratorRules for a namespace event", "namespace", ns.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range rules.Items {
		f, err := newNamespaceFilter(&rules.Items[i], r.shared.Watches)
		if err == nil && f.targets(ns) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&rules.Items[i])})
		}
	}
	return out
}

// copyEvents maps copy events to the rule that owns the copy and, when a copy goes away,
// to the rules that could not write its name.
func (r *Reconciler) copyEvents() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	owner := func(obj client.Object, q queue) {
		if rule, ok := ruleOfCopy(obj); ok {
			q.Add(reconcile.Request{NamespacedName: rule})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { owner(e.Object, q) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			owner(e.ObjectOld, q)
			owner(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			owner(e.Object, q)
			key := copyKey{Kind: kindOf(e.Object), Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}
			for _, rule := range r.memo.rulesWanting(key) {
				q.Add(reconcile.Request{NamespacedName: rule})
			}
		},
	}
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return kindSecret
	}
	return kindConfigMap
}
