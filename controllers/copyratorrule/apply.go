package copyratorrule

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// FieldOwner names this controller in the API server: the field manager of every write it
// makes (managedFields) and the reporting controller of its Events. Each controller's is
// quartet-<controller>.
const FieldOwner = "quartet-copyratorrule"

// legacyFieldOwner is the field manager copies were written under before FieldOwner.
// Copies are recognised by their labels (LabelManagedBy, LabelRule), never by the field
// manager, so copies written under this name are still ours; nothing compares it.
const legacyFieldOwner = "copyrator"

// writer carries out a plan's writes to the API server, in parallel.
type writer struct {
	// client writes (it never reads ConfigMaps or Secrets: that would start a cache of all of them).
	client client.Client
	// apiReader reads object metadata straight from the API server.
	apiReader client.Reader
	// parallelism bounds the writes in flight for one rule.
	parallelism int
	// own notes every copy it writes.
	own *ownWrites
}

// writeResult is the outcome of one action.
type writeResult struct {
	Action action
	// Done: the copy now equals its source (create, update, recreate) or is gone (delete).
	Done bool
	// Conflict: the name belongs to someone else; nothing was written.
	Conflict *conflict
	// Found: a create found the rule's own copy, written from the source's content by an
	// earlier pass, which the copy cache had not reported yet; nothing was written.
	Found bool
	Err   error
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
		patch := client.RawPatch(types.JSONPatchType, updatePatch(rule, desired, a.Existing))
		w.own.expect(a.Key, written(rule, a.Source))
		err := w.client.Patch(ctx, obj, patch, client.FieldOwner(FieldOwner))
		if err != nil {
			w.own.forget(a.Key)
		}
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
		patch := client.RawPatch(types.JSONPatchType, releasePatch(rule, a.Existing.Annotations, rule.Namespace+"/"+a.Key.Name))
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
	w.own.expect(a.Key, written(rule, a.Source))
	err := w.client.Create(ctx, desiredCopy(rule, *a.Source, a.Key.Namespace), client.FieldOwner(FieldOwner))
	if err != nil {
		w.own.forget(a.Key)
	}
	switch {
	case err == nil:
		res.Done = true
	case apierrors.IsAlreadyExists(err):
		res.Conflict, res.Found, res.Err = w.classify(ctx, rule, a)
	default:
		res.Err = fmt.Errorf("creating %s: %w", a.Key, err)
	}
	return res
}

// written is the state of a copy of src written for rule.
func written(rule types.NamespacedName, src *source) writtenState {
	return writtenState{Rule: rule, Source: rule.Namespace + "/" + src.Name, Hash: src.Hash, Carried: src.Carried.fingerprint()}
}

// classify reads the metadata of the object that blocked a create and tells what it is.
func (w writer) classify(ctx context.Context, rule types.NamespacedName, a action) (*conflict, bool, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(a.Key.Kind))
	if err := w.apiReader.Get(ctx, types.NamespacedName{Namespace: a.Key.Namespace, Name: a.Key.Name}, meta); err != nil {
		return nil, false, fmt.Errorf("reading %s after its create failed: %w", a.Key, err)
	}
	c, found := blockedBy(rule, a, meta)
	return c, found, nil
}

// blockedBy tells what blocked the create of action a: the rule's own copy that the copy
// cache has not reported yet (found: written from the source's current content; otherwise
// neither found nor a conflict, and the cache's event brings another pass), another rule's
// copy, or a foreign object.
func blockedBy(rule types.NamespacedName, a action, obj client.Object) (c *conflict, found bool) {
	owner, managed := ruleOfCopy(obj)
	switch {
	case managed && owner == rule:
		ann := obj.GetAnnotations()
		return nil, ann[AnnotationContentHash] == a.Source.Hash && ann[AnnotationSource] == rule.Namespace+"/"+a.Source.Name &&
			copyCarriedFingerprint(obj.GetLabels(), ann) == a.Source.Carried.fingerprint()
	case managed:
		return &conflict{Key: a.Key, Reason: fmt.Sprintf("%s: copy of CopyratorRule %s", flantv1.ConflictReasonManagedByOtherRule, owner)}, false
	default:
		return &conflict{Key: a.Key, Foreign: true, Reason: flantv1.ConflictReasonExistsNotManaged + ": an object Copyrator did not create has this name"}, false
	}
}

// delete removes a copy, but only while it is the rule's copy: the very object and version
// the cache saw (UID and resourceVersion preconditions). When it changed since (someone
// edited it, took it over by removing Copyrator's labels, or re-created the name), its
// metadata is read again, and it is deleted only if it is still the same object labelled
// with the rule; an object someone else now holds under the name survives.
func (w writer) delete(ctx context.Context, c *copyState) error {
	err := w.deleteExact(ctx, c.Key, c.UID, c.ResourceVersion)
	if !apierrors.IsConflict(err) {
		return client.IgnoreNotFound(err)
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(c.Key.Kind))
	switch err := w.apiReader.Get(ctx, types.NamespacedName{Namespace: c.Key.Namespace, Name: c.Key.Name}, meta); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading %s after it changed: %w", c.Key, err)
	}
	if owner, ours := ruleOfCopy(meta); meta.UID != c.UID || !ours || owner != c.Rule {
		return nil // re-created or taken over: no longer the rule's copy
	}
	err = w.deleteExact(ctx, c.Key, meta.UID, meta.ResourceVersion)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%s changed again while being deleted (retried)", c.Key)
	}
	return client.IgnoreNotFound(err)
}

// deleteExact deletes the object at key if it has this UID and, when rv is set, this resourceVersion.
func (w writer) deleteExact(ctx context.Context, key copyKey, uid types.UID, rv string) error {
	obj := newObject(key.Kind)
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	pre := client.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	return w.client.Delete(ctx, obj, pre)
}

// ownWrites remembers, per copy, the state the writer last wrote (or is writing) there,
// until the copy cache reports the copy again. An event that shows exactly that state is
// the echo of the controller's own write, which the pass that made it has already counted.
// The state is noted before the write: the cache's event may come before the write's answer.
type ownWrites struct {
	mu     sync.Mutex
	states map[copyKey]writtenState
}

// writtenState is what a copy looks like in the copy cache after Copyrator wrote it.
type writtenState struct {
	Rule   types.NamespacedName
	Source string // AnnotationSource
	Hash   string
	// Carried is the fingerprint of the carried labels and annotations.
	Carried string
}

func newOwnWrites() *ownWrites {
	return &ownWrites{states: map[copyKey]writtenState{}}
}

// expect notes that the copy at key is being written.
func (w *ownWrites) expect(key copyKey, s writtenState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states[key] = s
}

// forget drops the key of a copy that was not written or is gone.
func (w *ownWrites) forget(key copyKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.states, key)
}

// echo reports whether the cached copy c is in the state last written at its key, and
// forgets the key either way: the copy's next event is someone else's change.
func (w *ownWrites) echo(c copyState) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.states[c.Key]
	delete(w.states, c.Key)
	return ok && isEcho(s, c)
}

// isEcho reports whether copy c is in the written state s.
func isEcho(s writtenState, c copyState) bool {
	return c.Rule == s.Rule && c.Source == s.Source && c.Hash == s.Hash && c.WrittenAs == s.Hash && c.Carried == s.Carried
}
