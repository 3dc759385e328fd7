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

// FieldOwner is the field manager of every write and the reporting controller of every Event.
const FieldOwner = "quartet-chaosagent"

// conflictBackoff spaces the attempts of a write that lost a race, so that a burst can settle.
var conflictBackoff = wait.Backoff{Steps: 5, Duration: 20 * time.Millisecond, Factor: 2, Jitter: 0.1}

// maxDetail bounds the error text kept in a ChaosAction and an Event note.
const maxDetail = 200

// newRecord starts the record of an action or restore of kind on target (namespace/name).
func (r *Reconciler) newRecord(kind blackadderv1beta1.ActionKind, target string) *record {
	return &record{ChaosAction: blackadderv1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: kind, Target: target}}
}

// applyAction carries out one action of a round (in dry-run only records it).
func (r *Reconciler) applyAction(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, scope Scope, a Action, rng *rand.Rand) record {
	rec := r.newRecord(a.Kind, a.Target.Key())
	rec.DryRun = spec.DryRun
	switch {
	case !scope.Allows(a.Target.Namespace):
		// decide never proposes this; the guard keeps a future bug from touching a protected namespace.
		rec.set("namespace is protected, excluded or not watched", failed("ProtectedNamespace"))
		return *rec
	case a.Kind == blackadderv1beta1.ActionKillPod:
		rec.set(r.killPod(ctx, spec, a.Target))
	case a.Kind == blackadderv1beta1.ActionScaleDeployment:
		rec.set(r.scaleDeployment(ctx, agent.Name, spec, a))
	case a.Kind == blackadderv1beta1.ActionIpsumConfigMap:
		rec.set(r.ipsumConfigMap(ctx, agent.Name, spec, a.Target, rng))
	default:
		rec.set("", failed("UnknownAction"))
	}
	ctrl.LoggerFrom(ctx).Info("Acted", "chaosAgent", klog.KObj(agent), "action", a.Kind,
		"target", a.Target.Key(), "result", rec.Result, "detail", rec.Detail, "dryRun", spec.DryRun)
	return *rec
}

// killPod evicts (default) or deletes a pod by UID, never its replacement; a PDB's refusal is a skip.
func (r *Reconciler) killPod(ctx context.Context, spec blackadderv1beta1.ChaosAgentSpec, t Candidate) (detail string, res result) {
	del, verb, done := spec.KillMethod == blackadderv1beta1.KillMethodDelete, "evict", "evicted"
	if del {
		verb, done = "delete", "deleted"
	}
	if spec.DryRun {
		return "would " + verb, dryRun
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name}}
	byUID := metav1.Preconditions{UID: &t.UID}
	var err error
	if del {
		err = r.Client.Delete(ctx, pod, client.Preconditions(byUID))
	} else {
		err = r.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{ObjectMeta: pod.ObjectMeta, DeleteOptions: &metav1.DeleteOptions{Preconditions: &byUID}})
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

// scaleDeployment doubles a Deployment's replicas and records the original in the same patch.
func (r *Reconciler) scaleDeployment(ctx context.Context, agent string, spec blackadderv1beta1.ChaosAgentSpec, a Action) (detail string, res result) {
	if spec.DryRun {
		return fmt.Sprintf("would scale replicas %d → %d", a.Target.Replicas, a.Replicas), dryRun
	}
	e, err := writeGuarded(ctx, r, r.Client, a.Target.objectKey(), func(dep *appsv1.Deployment) *edit {
		if dep.UID != a.Target.UID {
			return nil
		}
		out, from, to, skip := cancerDeployment(dep, agent)
		if skip != "" {
			return &edit{detail: fmt.Sprintf("replicas %d", from), res: skipped(skip)}
		}
		return &edit{obj: out, patch: mergeGuarded(dep), detail: fmt.Sprintf("scaled replicas %d → %d", from, to), res: succeeded}
	})
	return actionResult("deployment", e, err)
}

// ipsumConfigMap overwrites a ConfigMap's data and records the original in the same patch.
func (r *Reconciler) ipsumConfigMap(ctx context.Context, agent string, spec blackadderv1beta1.ChaosAgentSpec, t Candidate, rng *rand.Rand) (detail string, res result) {
	if spec.DryRun {
		return "would overwrite every value with lorem ipsum", dryRun
	}
	e, err := writeGuarded(ctx, r, r.APIReader, t.objectKey(), func(cm *corev1.ConfigMap) *edit {
		if cm.UID != t.UID {
			return nil
		}
		out, skip := ipsumConfigMap(cm, agent, rng)
		if skip != "" {
			return &edit{detail: fmt.Sprintf("%d value(s) left alone", len(cm.Data)), res: skipped(skip)}
		}
		return &edit{obj: out, patch: mergeGuarded(cm), detail: fmt.Sprintf("overwrote %d value(s) with lorem ipsum", len(cm.Data)), res: succeeded}
	})
	return actionResult("configmap", e, err)
}

// actionResult is how an action's guarded write ended; no edit: another object has the name.
func actionResult(what string, e *edit, err error) (detail string, res result) {
	switch {
	case apierrors.IsNotFound(err), err == nil && e == nil:
		return what + " gone or replaced", skipped(SkipGone)
	case err != nil:
		return short(err), failed(reasonOf(err))
	}
	return e.detail, e.res
}

// restoreOneDeployment puts a Deployment's original replicas back and removes the marks.
func (r *Reconciler) restoreOneDeployment(ctx context.Context, agent string, dep *appsv1.Deployment) (*edit, error) {
	return writeGuarded(ctx, r, r.Client, client.ObjectKeyFromObject(dep), func(d *appsv1.Deployment) *edit {
		if d.Labels[LabelAgent] != agent {
			return nil // restored already (the cache was stale) or taken over by hand
		}
		out, readErr := restoreDeployment(d)
		if readErr != nil {
			return &edit{obj: out, patch: mergeGuarded(d), detail: short(readErr) + "; marks removed", res: failed("OriginalUnreadable")}
		}
		return &edit{obj: out, patch: mergeGuarded(d), detail: fmt.Sprintf("replicas back to %d", *out.Spec.Replicas), res: succeeded}
	})
}

// restoreOneConfigMap puts a ConfigMap's original data back and removes the marks in one merge
// patch; an immutable one, or one outside scope (a second guard), is a Skipped record and no
// error: retrying could never succeed.
func (r *Reconciler) restoreOneConfigMap(ctx context.Context, agent string, scope Scope, key types.NamespacedName) (*edit, error) {
	return writeGuarded(ctx, r, r.APIReader, key, func(cm *corev1.ConfigMap) *edit {
		if cm.Labels[LabelAgent] != agent {
			return nil // restored already (the cache was stale) or taken over by hand
		}
		if reason, detail := restoreSkip(scope, cm.Namespace, ptr.Deref(cm.Immutable, false)); reason != "" {
			return &edit{detail: detail, res: skipped(reason)}
		}
		patch, readErr := restoreConfigMapPatch(cm)
		e := &edit{obj: cm, patch: client.RawPatch(types.MergePatchType, patch), detail: fmt.Sprintf("data back (%d value(s))", len(cm.Data)), res: succeeded}
		if readErr != nil {
			e.detail, e.res = short(readErr)+"; marks removed", failed("OriginalUnreadable") // retrying cannot help
		}
		return e
	})
}

// edit is what a guarded write makes of the object it read: a patch (none: obj nil), and a record.
type edit struct {
	obj    client.Object
	patch  client.Patch
	detail string
	res    result
}

// writeGuarded reads the object at key through first (after a lost race, from the API server),
// lets change decide on it and sends the patch of its edit, which carries the resourceVersion
// read; a conflict starts over (conflictBackoff). A nil edit is nothing to do. It returns the
// last edit, or the error of the last read or write.
func writeGuarded[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r *Reconciler, first client.Reader, key types.NamespacedName, change func(PT) *edit) (*edit, error) {
	var e *edit
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		obj := PT(new(T))
		if err := first.Get(ctx, key, obj); err != nil {
			return err
		}
		first = r.APIReader
		if e = change(obj); e == nil || e.obj == nil {
			return nil
		}
		return r.Client.Patch(ctx, e.obj, e.patch)
	})
	return e, err
}

func mergeGuarded(base client.Object) client.Patch {
	return client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
}

func reasonOf(err error) string {
	if reason := apierrors.ReasonForError(err); reason != "" {
		return string(reason)
	}
	return "Error"
}

func short(err error) string { return truncate(err.Error(), maxDetail) }
