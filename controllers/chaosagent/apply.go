package chaosagent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// FieldOwner names this controller in the API server: the field manager of every write it
// makes (managedFields) and the reporting controller of its Events. Each controller's is
// quartet-<controller>.
const FieldOwner = "quartet-chaosagent"

// conflictBackoff spaces the attempts of a write that lost a race (a Deployment's controller
// updates its status often, a cache may lag): five attempts in all, each after a fresh read from
// the API server, waiting a little longer after each lost race so that a burst of status updates
// by another controller can settle.
var conflictBackoff = wait.Backoff{Steps: 5, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.1}

// maxDetail bounds the error text kept in a ChaosAction and an Event note.
const maxDetail = 200

// applyAction carries out one action of a round (or only records it in dry-run) and returns
// its record.
func (r *Reconciler) applyAction(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, scope Scope, a Action, rng *rand.Rand) record {
	rec := record{ChaosAction: blackadderv1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: a.Kind, Target: a.Target.Key(), DryRun: spec.DryRun}}
	if !scope.Allows(a.Target.Namespace) {
		// decide never proposes this; the guard keeps a future bug from touching a protected namespace.
		rec.set("namespace is protected, excluded or not watched", failed("ProtectedNamespace"))
		return rec
	}
	switch a.Kind {
	case blackadderv1beta1.ActionKillPod:
		rec.set(r.killPod(ctx, spec, a.Target))
	case blackadderv1beta1.ActionScaleDeployment:
		rec.set(r.scaleDeployment(ctx, agent.Name, spec, a))
	case blackadderv1beta1.ActionIpsumConfigMap:
		rec.set(r.ipsumConfigMap(ctx, agent.Name, spec, a.Target, rng))
	default:
		rec.set("", failed("UnknownAction"))
	}
	ctrl.LoggerFrom(ctx).Info("Acted", "chaosAgent", klog.KObj(agent), "action", a.Kind,
		"target", a.Target.Key(), "result", rec.Result, "detail", rec.Detail, "dryRun", spec.DryRun)
	return rec
}

// killPod evicts (default) or deletes a pod, guarded by its UID so that a replacement with the
// same name is never hit by mistake. An eviction refused by a PodDisruptionBudget is a skip.
func (r *Reconciler) killPod(ctx context.Context, spec blackadderv1beta1.ChaosAgentSpec, t Candidate) (detail string, res result) {
	verb, done := "evict", "evicted"
	if spec.KillMethod == blackadderv1beta1.KillMethodDelete {
		verb, done = "delete", "deleted"
	}
	if spec.DryRun {
		return "would " + verb, dryRun
	}
	uid := t.UID
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
	var err error
	if spec.KillMethod == blackadderv1beta1.KillMethodDelete {
		err = r.Client.Delete(ctx, pod, client.Preconditions{UID: &uid})
	} else {
		err = r.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name},
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
		})
	}
	switch {
	case err == nil:
		return done, succeeded
	case apierrors.IsTooManyRequests(err):
		return "eviction refused: " + short(err), skipped(SkipDisruptionBudget)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return "pod already gone or replaced", skipped(SkipGone)
	default:
		return short(err), failed(reasonOf(err))
	}
}

// scaleDeployment doubles a Deployment's replicas and records the original in the same patch,
// guarded by resourceVersion. The first read is from the cache; after a conflict (stale cache,
// or a status update in between) the Deployment is read again from the API server.
func (r *Reconciler) scaleDeployment(ctx context.Context, agent string, spec blackadderv1beta1.ChaosAgentSpec, a Action) (detail string, res result) {
	if spec.DryRun {
		return fmt.Sprintf("would scale replicas %d → %d", a.Target.Replicas, a.Replicas), dryRun
	}
	key := types.NamespacedName{Namespace: a.Target.Namespace, Name: a.Target.Name}
	var reader client.Reader = r.Client
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		dep := &appsv1.Deployment{}
		err := reader.Get(ctx, key, dep)
		reader = r.APIReader
		switch {
		case apierrors.IsNotFound(err) || (err == nil && dep.UID != a.Target.UID):
			detail, res = "deployment gone or replaced", skipped(SkipGone)
			return nil
		case err != nil:
			detail, res = short(err), failed(reasonOf(err))
			return nil
		}
		out, from, to, skip := cancerDeployment(dep, agent)
		if skip != "" {
			detail, res = fmt.Sprintf("replicas %d", from), skipped(skip)
			return nil
		}
		if err := r.Client.Patch(ctx, out, client.MergeFromWithOptions(dep, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		detail, res = fmt.Sprintf("scaled replicas %d → %d", from, to), succeeded
		return nil
	})
	switch {
	case err == nil:
		return detail, res
	case apierrors.IsNotFound(err):
		return "deployment gone", skipped(SkipGone)
	default:
		return short(err), failed(reasonOf(err))
	}
}

// ipsumConfigMap reads a ConfigMap's body from the API server (the cache holds metadata only),
// overwrites every value with lorem ipsum and records the original data in the same patch,
// guarded by resourceVersion; a conflict reads the ConfigMap again.
func (r *Reconciler) ipsumConfigMap(ctx context.Context, agent string, spec blackadderv1beta1.ChaosAgentSpec, t Candidate, rng *rand.Rand) (detail string, res result) {
	if spec.DryRun {
		return "would overwrite every value with lorem ipsum", dryRun
	}
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		cm := &corev1.ConfigMap{}
		err := r.APIReader.Get(ctx, key, cm)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && cm.UID != t.UID):
			detail, res = "configmap gone or replaced", skipped(SkipGone)
			return nil
		case err != nil:
			detail, res = short(err), failed(reasonOf(err))
			return nil
		}
		out, skip := ipsumConfigMap(cm, agent, rng)
		if skip == SkipImmutable {
			r.rememberImmutable(cm.UID)
		}
		if skip != "" {
			detail, res = fmt.Sprintf("%d value(s) left alone", len(cm.Data)), skipped(skip)
			return nil
		}
		if err := r.Client.Patch(ctx, out, client.MergeFromWithOptions(cm, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		detail, res = fmt.Sprintf("overwrote %d value(s) with lorem ipsum", len(cm.Data)), succeeded
		return nil
	})
	switch {
	case err == nil:
		return detail, res
	case apierrors.IsNotFound(err):
		return "configmap gone", skipped(SkipGone)
	default:
		return short(err), failed(reasonOf(err))
	}
}

// restoreOneDeployment puts a Deployment's original replicas back and removes the agent's marks
// in one patch, guarded by resourceVersion; dep comes from the cache, and after a conflict it is
// read again from the API server. It returns no record when there was nothing to restore (the
// marks are gone, or so is the Deployment), and an error when the restore must be retried.
func (r *Reconciler) restoreOneDeployment(ctx context.Context, agent string, dep *appsv1.Deployment) (*record, error) {
	rec := &record{ChaosAction: blackadderv1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: blackadderv1beta1.ActionRestoreDeployment,
		Target: dep.Namespace + "/" + dep.Name}}
	key := client.ObjectKeyFromObject(dep)
	var retried, nothingToDo bool
	var rereadErr error
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		if retried {
			fresh := &appsv1.Deployment{}
			if err := r.APIReader.Get(ctx, key, fresh); err != nil {
				rereadErr = err
				return nil
			}
			dep = fresh
		}
		retried = true
		if dep.Labels[LabelAgent] != agent {
			nothingToDo = true // restored already (the cache was stale) or taken over by hand
			return nil
		}
		out, readErr := restoreDeployment(dep)
		if err := r.Client.Patch(ctx, out, client.MergeFromWithOptions(dep, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		if readErr != nil {
			rec.set(short(readErr)+"; marks removed", failed("OriginalUnreadable")) // retrying cannot help
			return nil
		}
		rec.set(fmt.Sprintf("replicas back to %d", *out.Spec.Replicas), succeeded)
		return nil
	})
	switch {
	case rereadErr != nil:
		return nil, client.IgnoreNotFound(rereadErr)
	case nothingToDo, apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		rec.set(short(err), failed(reasonOf(err)))
		return rec, fmt.Errorf("deployment %s: %w", rec.Target, err)
	}
	return rec, nil
}

// restoreOneConfigMap reads a ConfigMap from the API server (the cache holds metadata only,
// and cannot tell an immutable one), puts its original data back and removes the agent's marks
// in one merge patch (restoreConfigMapPatch), guarded by the resourceVersion read; a conflict
// reads it again. An immutable ConfigMap, or one outside scope (checked again on the fresh
// object, as a second guard), is left as it is with a Skipped record and no error: retrying
// could never succeed. It returns like restoreOneDeployment.
func (r *Reconciler) restoreOneConfigMap(ctx context.Context, agent string, scope Scope, key types.NamespacedName) (*record, error) {
	rec := &record{ChaosAction: blackadderv1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: blackadderv1beta1.ActionRestoreConfigMap, Target: key.String()}}
	var nothingToDo bool
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		cm := &corev1.ConfigMap{}
		if err := r.APIReader.Get(ctx, key, cm); err != nil {
			return err
		}
		if cm.Labels[LabelAgent] != agent {
			nothingToDo = true // restored already (the cache was stale) or taken over by hand
			return nil
		}
		if reason, detail := restoreSkip(scope, cm.Namespace, ptr.Deref(cm.Immutable, false)); reason != "" {
			if reason == SkipImmutable {
				r.rememberImmutable(cm.UID)
			}
			rec.set(detail, skipped(reason))
			return nil
		}
		patch, readErr := restoreConfigMapPatch(cm)
		if err := r.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
		if readErr != nil {
			rec.set(short(readErr)+"; marks removed", failed("OriginalUnreadable"))
			return nil
		}
		rec.set(fmt.Sprintf("data back (%d value(s))", len(cm.Data)), succeeded)
		return nil
	})
	switch {
	case nothingToDo, apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		rec.set(short(err), failed(reasonOf(err)))
		return rec, fmt.Errorf("configmap %s: %w", rec.Target, err)
	}
	return rec, nil
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
