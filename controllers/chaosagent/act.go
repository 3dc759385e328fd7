package chaosagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// conflictRetries is how many times a write that lost a race (a Deployment's controller updates
// its status often, a cache may lag) is tried again on a fresh read from the API server.
const conflictRetries = 4

// retryPause waits a little longer after each lost race, so that a burst of status updates
// by another controller can settle.
func retryPause(attempt int) {
	time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
}

// maxDetail bounds the error text kept in a ChaosAction and an Event note.
const maxDetail = 200

// act carries out one action of a round (or only records it in dry-run) and returns its record.
func (r *Reconciler) act(ctx context.Context, agent *v1beta1.ChaosAgent, spec v1beta1.ChaosAgentSpec, scope Scope, a Action, rng *rand.Rand) v1beta1.ChaosAction {
	rec := v1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: a.Kind, Target: a.Target.Key(), DryRun: spec.DryRun}
	if !scope.Allows(a.Target.Namespace) {
		// decide never proposes this; the guard keeps a future bug from touching a protected namespace.
		rec.Detail, rec.Result = "namespace is protected, excluded or not watched", failed("ProtectedNamespace")
		return rec
	}
	switch a.Kind {
	case v1beta1.ActionKillPod:
		rec.Detail, rec.Result = r.killPod(ctx, spec, a.Target)
	case v1beta1.ActionScaleDeployment:
		rec.Detail, rec.Result = r.scaleDeployment(ctx, agent.Name, spec, a)
	case v1beta1.ActionIpsumConfigMap:
		rec.Detail, rec.Result = r.ipsumConfigMap(ctx, agent.Name, spec, a.Target, rng)
	default:
		rec.Result = failed("UnknownAction")
	}
	log.FromContext(ctx).Info("Acted", "chaosAgent", klog.KObj(agent), "action", a.Kind,
		"target", a.Target.Key(), "result", rec.Result, "detail", rec.Detail, "dryRun", spec.DryRun)
	return rec
}

// killPod evicts (default) or deletes a pod, guarded by its UID so that a replacement with the
// same name is never hit by mistake. An eviction refused by a PodDisruptionBudget is a skip.
func (r *Reconciler) killPod(ctx context.Context, spec v1beta1.ChaosAgentSpec, t Candidate) (detail, result string) {
	verb, done := "evict", "evicted"
	if spec.KillMethod == v1beta1.KillMethodDelete {
		verb, done = "delete", "deleted"
	}
	if spec.DryRun {
		return "would " + verb, ResultDryRun
	}
	uid := t.UID
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
	var err error
	if spec.KillMethod == v1beta1.KillMethodDelete {
		err = r.Delete(ctx, pod, client.Preconditions{UID: &uid})
	} else {
		err = r.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
		})
	}
	switch {
	case err == nil:
		return done, ResultSucceeded
	case apierrors.IsTooManyRequests(err):
		return "eviction refused: " + short(err), skipped(SkipDisruptionBudget)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return "pod already gone or replaced", skipped(SkipGone)
	default:
		return short(err), failed(reasonOf(err))
	}
}

// scaleDeployment doubles a Deployment's replicas and records the original in the same patch,
// guarded by resourceVersion; a conflict (stale cache) is retried once on a fresh read.
func (r *Reconciler) scaleDeployment(ctx context.Context, agent string, spec v1beta1.ChaosAgentSpec, a Action) (detail, result string) {
	if spec.DryRun {
		return fmt.Sprintf("would scale replicas %d → %d", a.Target.Replicas, a.Replicas), ResultDryRun
	}
	dep := &appsv1.Deployment{}
	err := r.Get(ctx, types.NamespacedName{Namespace: a.Target.Namespace, Name: a.Target.Name}, dep)
	for attempt := 0; ; attempt++ {
		if apierrors.IsNotFound(err) || (err == nil && dep.UID != a.Target.UID) {
			return "deployment gone or replaced", skipped(SkipGone)
		}
		if err != nil {
			return short(err), failed(reasonOf(err))
		}
		out, from, to, skip := cancerDeployment(dep, agent)
		if skip != "" {
			return fmt.Sprintf("replicas %d", from), skipped(skip)
		}
		err = r.Patch(ctx, out, client.MergeFromWithOptions(dep, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return fmt.Sprintf("scaled replicas %d → %d", from, to), ResultSucceeded
		case apierrors.IsConflict(err) && attempt < conflictRetries:
			retryPause(attempt)
			dep = &appsv1.Deployment{}
			err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(out), dep)
		case apierrors.IsNotFound(err):
			return "deployment gone", skipped(SkipGone)
		default:
			return short(err), failed(reasonOf(err))
		}
	}
}

// ipsumConfigMap reads a ConfigMap's body from the API server (the cache holds metadata only),
// overwrites every value with lorem ipsum and records the original data in the same patch.
func (r *Reconciler) ipsumConfigMap(ctx context.Context, agent string, spec v1beta1.ChaosAgentSpec, t Candidate, rng *rand.Rand) (detail, result string) {
	if spec.DryRun {
		return "would overwrite every value with lorem ipsum", ResultDryRun
	}
	for attempt := 0; ; attempt++ {
		cm := &corev1.ConfigMap{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.Name}, cm)
		if apierrors.IsNotFound(err) || (err == nil && cm.UID != t.UID) {
			return "configmap gone or replaced", skipped(SkipGone)
		}
		if err != nil {
			return short(err), failed(reasonOf(err))
		}
		out, skip := ipsumConfigMap(cm, agent, rng)
		if skip == SkipImmutable {
			r.rememberImmutable(cm.UID)
		}
		if skip != "" {
			return fmt.Sprintf("%d value(s) left alone", len(cm.Data)), skipped(skip)
		}
		err = r.Patch(ctx, out, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return fmt.Sprintf("overwrote %d value(s) with lorem ipsum", len(cm.Data)), ResultSucceeded
		}
		if apierrors.IsConflict(err) && attempt < conflictRetries {
			retryPause(attempt)
			continue
		}
		if apierrors.IsNotFound(err) {
			return "configmap gone", skipped(SkipGone)
		}
		return short(err), failed(reasonOf(err))
	}
}

// reconcileRestore puts back every Deployment and ConfigMap that carries the agent's label, and
// removes the marks in the same request. It records what it did in p.
func (r *Reconciler) reconcileRestore(ctx context.Context, agent *v1beta1.ChaosAgent, p *pass) error {
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	deps := &appsv1.DeploymentList{}
	if err := r.List(ctx, deps, marksSelector(agent.Name)); err != nil {
		return fmt.Errorf("listing changed deployments from cache: %w", err)
	}
	cms := metadataList("ConfigMap")
	if err := r.List(ctx, cms, marksSelector(agent.Name)); err != nil {
		return fmt.Errorf("listing changed configmaps from cache: %w", err)
	}
	var errs []error
	note := func(rec *v1beta1.ChaosAction, victim client.Object, err error) {
		if rec != nil {
			p.Records = append(p.Records, *rec)
			r.recordEventsFor(agent, victim, *rec)
			recordActionMetric(agent.Name, *rec)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i := range deps.Items {
		rec, err := r.restoreOneDeployment(ctx, agent.Name, &deps.Items[i])
		note(rec, &deps.Items[i], err)
	}
	for i := range cms.Items {
		meta := cms.Items[i].ObjectMeta
		rec, err := r.restoreOneConfigMap(ctx, agent.Name, &meta)
		note(rec, &corev1.ConfigMap{ObjectMeta: meta}, err)
	}
	left := int32(len(errs))
	p.ChangedObjects = &left
	p.RestoreFailed = len(errs)
	changedObjects.WithLabelValues(agent.Name).Set(float64(left))
	if len(errs) > 0 {
		return fmt.Errorf("restoring %d object(s): %w", len(errs), errors.Join(errs...))
	}
	return nil
}

func (r *Reconciler) restoreOneDeployment(ctx context.Context, agent string, dep *appsv1.Deployment) (*v1beta1.ChaosAction, error) {
	rec := &v1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: v1beta1.ActionRestoreDeployment,
		Target: dep.Namespace + "/" + dep.Name}
	for attempt := 0; ; attempt++ {
		if dep.Labels[LabelAgent] != agent {
			return nil, nil // restored already (the cache was stale) or taken over by hand
		}
		out, readErr := restoreDeployment(dep)
		err := r.Patch(ctx, out, client.MergeFromWithOptions(dep, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil && readErr != nil:
			rec.Detail, rec.Result = short(readErr)+"; marks removed", failed("OriginalUnreadable")
			return rec, nil // retrying cannot help
		case err == nil:
			rec.Detail, rec.Result = fmt.Sprintf("replicas back to %d", *out.Spec.Replicas), ResultSucceeded
			return rec, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsConflict(err) && attempt < conflictRetries:
			retryPause(attempt)
			fresh := &appsv1.Deployment{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(dep), fresh); err != nil {
				return nil, client.IgnoreNotFound(err)
			}
			dep = fresh
		default:
			rec.Detail, rec.Result = short(err), failed(reasonOf(err))
			return rec, fmt.Errorf("deployment %s: %w", rec.Target, err)
		}
	}
}

func (r *Reconciler) restoreOneConfigMap(ctx context.Context, agent string, meta *metav1.ObjectMeta) (*v1beta1.ChaosAction, error) {
	rec := &v1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: v1beta1.ActionRestoreConfigMap,
		Target: meta.Namespace + "/" + meta.Name}
	for attempt := 0; ; attempt++ {
		if meta.Labels[LabelAgent] != agent {
			return nil, nil
		}
		patch, readErr := restoreConfigMapPatch(meta)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: meta.Namespace, Name: meta.Name}}
		err := r.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
		switch {
		case err == nil && readErr != nil:
			rec.Detail, rec.Result = short(readErr)+"; marks removed", failed("OriginalUnreadable")
			return rec, nil
		case err == nil:
			rec.Detail, rec.Result = fmt.Sprintf("data back (%d value(s))", len(cm.Data)), ResultSucceeded
			return rec, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsConflict(err) && attempt < conflictRetries:
			retryPause(attempt)
			fresh := &corev1.ConfigMap{}
			if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: meta.Namespace, Name: meta.Name}, fresh); err != nil {
				return nil, client.IgnoreNotFound(err)
			}
			meta = &fresh.ObjectMeta
		default:
			rec.Detail, rec.Result = short(err), failed(reasonOf(err))
			return rec, fmt.Errorf("configmap %s: %w", rec.Target, err)
		}
	}
}

// recordEvents writes an Event on the victim of an action and one on the agent.
func (r *Reconciler) recordEvents(agent *v1beta1.ChaosAgent, t Candidate, rec v1beta1.ChaosAction) {
	meta := metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name, UID: t.UID}
	var victim client.Object
	switch rec.Kind {
	case v1beta1.ActionKillPod:
		victim = &corev1.Pod{ObjectMeta: meta}
	case v1beta1.ActionScaleDeployment:
		victim = &appsv1.Deployment{ObjectMeta: meta}
	default:
		victim = &corev1.ConfigMap{ObjectMeta: meta}
	}
	r.recordEventsFor(agent, victim, rec)
}

func (r *Reconciler) recordEventsFor(agent *v1beta1.ChaosAgent, victim client.Object, rec v1beta1.ChaosAction) {
	if r.Recorder == nil {
		return
	}
	eventType := corev1.EventTypeNormal
	if isFailed(rec.Result) {
		eventType = corev1.EventTypeWarning
	}
	reason, action := eventReason(rec), eventAction(rec.Kind)
	r.Recorder.Eventf(victim, agent, eventType, reason, action, "ChaosAgent %s: %s (%s)", agent.Name, rec.Detail, rec.Result)
	r.Recorder.Eventf(agent, victim, eventType, reason, action, "%s %s: %s (%s)", victimKind(rec.Kind), rec.Target, rec.Detail, rec.Result)
}

// eventReason is KilledPod, WouldKillPod, SkippedKillPod, FailedKillPod, and so on.
func eventReason(rec v1beta1.ChaosAction) string {
	verb, done := eventVerb(rec.Kind)
	switch {
	case rec.Result == ResultDryRun:
		return "Would" + verb
	case isSkipped(rec.Result):
		return "Skipped" + verb
	case isFailed(rec.Result):
		return "Failed" + verb
	default:
		return done
	}
}

// eventVerb returns the present and past forms of an action for Event reasons.
func eventVerb(k v1beta1.ActionKind) (verb, done string) {
	switch k {
	case v1beta1.ActionKillPod:
		return "KillPod", "KilledPod"
	case v1beta1.ActionScaleDeployment:
		return "ScaleDeployment", "ScaledDeployment"
	case v1beta1.ActionIpsumConfigMap:
		return "OverwriteConfigMap", "OverwroteConfigMap"
	case v1beta1.ActionRestoreDeployment:
		return "RestoreDeployment", "RestoredDeployment"
	default:
		return "RestoreConfigMap", "RestoredConfigMap"
	}
}

func eventAction(k v1beta1.ActionKind) string {
	switch k {
	case v1beta1.ActionKillPod:
		return "Kill"
	case v1beta1.ActionScaleDeployment:
		return "Scale"
	case v1beta1.ActionIpsumConfigMap:
		return "Overwrite"
	default:
		return "Restore"
	}
}

func victimKind(k v1beta1.ActionKind) string {
	switch k {
	case v1beta1.ActionKillPod:
		return "Pod"
	case v1beta1.ActionScaleDeployment, v1beta1.ActionRestoreDeployment:
		return "Deployment"
	default:
		return "ConfigMap"
	}
}

// reasonOf is the API status reason of err (CamelCase), or "Error".
func reasonOf(err error) string {
	if reason := apierrors.ReasonForError(err); reason != "" {
		return string(reason)
	}
	return "Error"
}

func short(err error) string {
	s := err.Error()
	if len(s) > maxDetail {
		s = s[:maxDetail] + "…"
	}
	return s
}
