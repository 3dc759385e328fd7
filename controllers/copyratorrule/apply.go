package copyratorrule

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the field manager of every write and the reporting controller of Events.
const FieldOwner = "quartet-copyratorrule"

// writer carries out writes in parallel. client never reads ConfigMaps or Secrets (that
// would cache all of them); apiReader reads metadata past the caches. Removals (deletes and
// releases: what a rule no longer wants) go at most removalsPerSecond per pass: nothing
// waits on them, and a tenant starts a thousand of them with two requests per rule (remove
// its finalizer, delete it). A namespace's rules take one worker at a time (ruleStates), so
// that is the namespace's budget; creates and updates, which someone waits on, are not paced.
type writer struct {
	client            client.Client
	apiReader         client.Reader
	clock             clock.PassiveClock // when a copy's write ended (observePropagation)
	parallelism       int
	removalsPerSecond int
}

// writeResult is an action's outcome: Done; Conflict, the name is someone else's; Found, a
// create found the rule's own copy of the content, not yet in the copy cache.
type writeResult struct {
	Action   action
	Done     bool
	Conflict *conflict
	Found    bool
	Err      error
}

// execute runs the actions in parallel and returns their results, in their order. The
// removals start after the other writes, so that none of those waits behind their pace.
func (w writer) execute(ctx context.Context, rule ruleID, actions []action) []writeResult {
	results := make([]writeResult, len(actions))
	unpaced, removals := rate.NewLimiter(rate.Inf, 0), rate.NewLimiter(rate.Inf, 0)
	if w.removalsPerSecond > 0 {
		removals = rate.NewLimiter(rate.Limit(w.removalsPerSecond), 1)
	}
	var g errgroup.Group
	g.SetLimit(max(w.parallelism, 1))
	for _, pace := range []*rate.Limiter{unpaced, removals} {
		for i, a := range actions {
			if paced(a.Op) != (pace == removals) {
				continue
			}
			g.Go(func() error {
				if err := pace.Wait(ctx); err != nil {
					results[i] = writeResult{Action: a, Err: err}
					return nil
				}
				results[i] = w.do(ctx, rule, a)
				observePropagation(results[i], w.clock)
				return nil
			})
		}
	}
	_ = g.Wait() // every function returns nil
	return results
}

// paced tells the removals, which go at most removalsPerSecond.
func paced(o op) bool { return o == opDelete || o == opRelease }

func (w writer) do(ctx context.Context, rule ruleID, a action) writeResult {
	if err := ctx.Err(); err != nil {
		return writeResult{Action: a, Err: err}
	}
	var err error
	switch a.Op {
	case opCreate:
		return w.create(ctx, rule, a)
	case opRecreate:
		if err := w.delete(ctx, a.Existing); err != nil {
			return writeResult{Action: a, Err: fmt.Errorf("deleting %s to re-create it: %w", a.Key, err)}
		}
		return w.create(ctx, rule, a)
	case opUpdate:
		err = w.patch(ctx, a.Key, updatePatch(rule, desiredCopy(rule, *a.Source, a.Key.Namespace), a.Existing))
		if apierrors.IsNotFound(err) {
			return writeResult{Action: a} // deleted meanwhile: the copy cache reports it, the next pass creates it
		}
	case opRelease:
		err = client.IgnoreNotFound(w.patch(ctx, a.Key, releasePatch(rule, a.Existing.Labels, a.Existing.Annotations, rule.Namespace+"/"+a.Key.Name)))
	case opDelete:
		err = w.delete(ctx, a.Existing)
	default:
		err = fmt.Errorf("unknown action %q", a.Op)
	}
	if err != nil {
		return writeResult{Action: a, Err: fmt.Errorf("%s %s: %w", map[op]string{opUpdate: "updating", opRelease: "releasing", opDelete: "deleting"}[a.Op], a.Key, err)}
	}
	return writeResult{Action: a, Done: true}
}

func (w writer) patch(ctx context.Context, key copyKey, patch []byte) error {
	return w.client.Patch(ctx, objectAt(key), client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(FieldOwner))
}

func objectAt(key copyKey) client.Object {
	obj := newObject(key.Kind)
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	return obj
}

// create POSTs the copy: a write that fails when the name is taken, never merges into it.
func (w writer) create(ctx context.Context, rule ruleID, a action) writeResult {
	res := writeResult{Action: a}
	switch err := w.client.Create(ctx, desiredCopy(rule, *a.Source, a.Key.Namespace), client.FieldOwner(FieldOwner)); {
	case err == nil:
		res.Done = true
	case apierrors.IsAlreadyExists(err):
		if meta, err := w.live(ctx, a.Key); err != nil {
			res.Err = fmt.Errorf("reading %s after its create failed: %w", a.Key, err)
		} else {
			res.Conflict, res.Found = blockedBy(rule, a, meta)
		}
	default:
		res.Err = fmt.Errorf("creating %s: %w", a.Key, err)
	}
	return res
}

func (w writer) live(ctx context.Context, key copyKey) (*metav1.PartialObjectMetadata, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(key.Kind))
	return meta, w.apiReader.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, meta)
}

// blockedBy tells what blocked the create of action a: the rule's own copy the copy cache
// has not reported yet (found when it has the source's content; else its event brings a
// pass), another rule's copy, or a foreign object.
func blockedBy(rule ruleID, a action, obj client.Object) (c *conflict, found bool) {
	st := stateOf(obj)
	st.Hash = st.WrittenAs // read live, without its body: taken to hold what it was written from
	switch _, managed := ruleOfCopy(obj); {
	case managed && st.Rule != rule.NamespacedName:
		return ptr.To(otherRuleConflict(a.Key, st.Rule)), false
	case !managed || st.RuleUID == "": // of its name and no UID: not written by it
		return ptr.To(foreignConflict(a.Key)), false
	}
	return nil, copyInSync(rule, &st, a.Source)
}

// delete removes a copy only while it is the rule's: the object and version the cache saw
// (preconditions), or, when it changed since, the same object still labelled with the rule;
// an object someone else took over or re-created under the name survives.
func (w writer) delete(ctx context.Context, c *copyState) error {
	err := w.deleteExact(ctx, c.Key, c.UID, c.ResourceVersion)
	if !apierrors.IsConflict(err) {
		return client.IgnoreNotFound(err)
	}
	meta, err := w.live(ctx, c.Key)
	switch {
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
	pre := client.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	return w.client.Delete(ctx, objectAt(key), pre)
}

// withWrites adds a plan and the results of its writes (in any order) to what the pass found.
func (o outcome) withWrites(p plan, results []writeResult) outcome {
	o.Desired, o.InSync, o.Frozen, o.Unadopted = p.Desired, p.InSync, p.Frozen, p.Unadopted
	o.Conflicts = slices.Clone(p.Conflicts)
	o.Checked = map[copyKey]bool{}
	o.Written = map[op][]copyKey{}
	for _, wr := range results {
		switch {
		case wr.Err != nil:
			o.WriteErrs = append(o.WriteErrs, wr.Err.Error())
		case wr.Conflict != nil:
			o.Conflicts = append(o.Conflicts, *wr.Conflict)
			o.Checked[wr.Conflict.Key] = true
		case wr.Found:
			o.InSync++
		case wr.Done:
			o.Written[wr.Action.Op] = append(o.Written[wr.Action.Op], wr.Action.Key)
			if wr.Action.Op != opDelete {
				o.InSync++
			}
		}
	}
	sort.Slice(o.Conflicts, func(i, j int) bool { return lessKey(o.Conflicts[i].Key, o.Conflicts[j].Key) })
	sort.Slice(o.Refused, func(i, j int) bool { return o.Refused[i].Namespace < o.Refused[j].Namespace })
	for _, keys := range o.Written {
		sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	}
	return o
}
