package copyratorrule

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writer carries out a plan's writes to the API server, in parallel.
type writer struct {
	// client writes (it never reads ConfigMaps or Secrets: that would start a cache of all of them).
	client client.Client
	// apiReader reads object metadata straight from the API server.
	apiReader client.Reader
	// parallelism bounds the writes in flight for one rule.
	parallelism int
}

// writeResult is the outcome of one action.
type writeResult struct {
	Action action
	// Done: the copy now equals its source (create, update, recreate) or is gone (delete).
	Done bool
	// Conflict: the name belongs to someone else; nothing was written.
	Conflict *conflict
	Err      error
}

// execute runs the actions with at most w.parallelism in flight and returns their results
// in the actions' order. A failed write does not stop the others: each result carries its
// own error.
func (w writer) execute(ctx context.Context, rule types.NamespacedName, actions []action) []writeResult {
	results := make([]writeResult, len(actions))
	var g errgroup.Group
	g.SetLimit(max(w.parallelism, 1))
	for i, a := range actions {
		g.Go(func() error {
			results[i] = w.do(ctx, rule, a)
			return nil
		})
	}
	_ = g.Wait() // every function returns nil
	return results
}

// writeErrors returns the message of every failed write.
func writeErrors(results []writeResult) []string {
	var errs []string
	for _, wr := range results {
		if wr.Err != nil {
			errs = append(errs, wr.Err.Error())
		}
	}
	return errs
}

func (w writer) do(ctx context.Context, rule types.NamespacedName, a action) writeResult {
	res := writeResult{Action: a}
	if err := ctx.Err(); err != nil {
		res.Err = err
		return res
	}
	switch a.Op {
	case opCreate:
		return w.create(ctx, rule, a)
	case opUpdate:
		desired := desiredCopy(rule, *a.Source, a.Key.Namespace)
		obj := newObject(a.Key.Kind)
		obj.SetNamespace(a.Key.Namespace)
		obj.SetName(a.Key.Name)
		patch := client.RawPatch(types.JSONPatchType, updatePatch(rule, desired, a.Existing.HasAnnotations))
		err := w.client.Patch(ctx, obj, patch, client.FieldOwner(FieldOwner))
		switch {
		case err == nil:
			res.Done = true
		case apierrors.IsNotFound(err):
			// Deleted meanwhile: the copy cache reports it and the next pass creates it.
		default:
			res.Err = fmt.Errorf("updating %s: %w", a.Key, err)
		}
		return res
	case opRecreate:
		if err := w.delete(ctx, a.Existing); err != nil {
			res.Err = fmt.Errorf("deleting %s to re-create it: %w", a.Key, err)
			return res
		}
		return w.create(ctx, rule, a)
	case opRelease:
		obj := newObject(a.Key.Kind)
		obj.SetNamespace(a.Key.Namespace)
		obj.SetName(a.Key.Name)
		patch := client.RawPatch(types.JSONPatchType, releasePatch(rule, a.Existing.Annotations))
		if err := w.client.Patch(ctx, obj, patch, client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsNotFound(err) {
			res.Err = fmt.Errorf("releasing %s: %w", a.Key, err)
			return res
		}
		res.Done = true
		return res
	case opDelete:
		if err := w.delete(ctx, a.Existing); err != nil {
			res.Err = fmt.Errorf("deleting %s: %w", a.Key, err)
			return res
		}
		res.Done = true
		return res
	}
	res.Err = fmt.Errorf("unknown action %q", a.Op)
	return res
}

// create POSTs the copy: the only write that fails, atomically, when an object of the same
// name exists, so an object someone else made is never merged into.
func (w writer) create(ctx context.Context, rule types.NamespacedName, a action) writeResult {
	res := writeResult{Action: a}
	err := w.client.Create(ctx, desiredCopy(rule, *a.Source, a.Key.Namespace), client.FieldOwner(FieldOwner))
	switch {
	case err == nil:
		res.Done = true
	case apierrors.IsAlreadyExists(err):
		res.Conflict, res.Err = w.classify(ctx, rule, a.Key)
	default:
		res.Err = fmt.Errorf("creating %s: %w", a.Key, err)
	}
	return res
}

// classify looks at an object that blocked a create: this rule's own copy that the copy
// cache has not reported yet (no conflict: the cache event brings another pass), another
// rule's copy, or a foreign object.
func (w writer) classify(ctx context.Context, rule types.NamespacedName, key copyKey) (*conflict, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(key.Kind))
	if err := w.apiReader.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, meta); err != nil {
		return nil, fmt.Errorf("reading %s after its create failed: %w", key, err)
	}
	owner, managed := ruleOfCopy(meta)
	switch {
	case managed && owner == rule:
		return nil, nil
	case managed:
		return &conflict{Key: key, Reason: fmt.Sprintf("%s: copy of CopyratorRule %s", ReasonOtherRule, owner)}, nil
	default:
		return &conflict{Key: key, Foreign: true, Reason: ReasonForeignObject + ": an object Copyrator did not create has this name"}, nil
	}
}

// delete removes a copy, but only the very object the cache saw (UID precondition), so an
// object someone re-created under the name in the meantime survives.
func (w writer) delete(ctx context.Context, c *copyState) error {
	obj := newObject(c.Key.Kind)
	obj.SetNamespace(c.Key.Namespace)
	obj.SetName(c.Key.Name)
	uid := c.UID
	err := w.client.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or the name now holds another object
	}
	return err
}
