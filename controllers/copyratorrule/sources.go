package copyratorrule

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// sourceSyncTimeout bounds the wait for the first list of a namespace's sources.
const sourceSyncTimeout = 30 * time.Second

// sourceKey names one source informer: the ConfigMaps or the Secrets of one namespace.
type sourceKey struct {
	namespace, kind string
}

// sourceWatcher follows the objects rules copy from, at a cost that follows the rules'
// namespaces and sources, never the size of the sources or the number of rules:
//   - one metadata-only informer per namespace and kind that rules copy from (Copyrator's
//     own copies excluded on the API server), shared by every rule there: the API server
//     holds at most two watches per such namespace, and a watch carries no bodies (a watch
//     of full objects keeps a buffer as large as the largest object it sent, per watch);
//   - a rule's sources are picked from it by the rule's selector or names, in the manager;
//   - the hash, size, type and immutability of the content a rule's copies carry (its
//     view: every key, or the keys it names), which planning needs, are read once per
//     version of a source and view (a GET; contents), and remembered by UID, resourceVersion
//     and view until the source goes, with that version's body, which later passes copy
//     without reading it again.
//
// A change to a source wakes the rules that pick it (before or after the change). It is a manager Runnable: the informers stop with the manager.
type sourceWatcher struct {
	clientset kubernetes.Interface
	metadata  metadata.Interface
	// contents of the sources, by UID (*sourceContents).
	contents sync.Map

	mu        sync.Mutex
	ctx       context.Context
	cancel    context.CancelFunc
	informers map[sourceKey]*namespaceSources
	rules     map[types.NamespacedName]ruleSelection
	queue     workqueue.TypedRateLimitingInterface[reconcile.Request]
	// full notes that a source change needs a pass over every namespace.
	full *fullPasses
}

// namespaceSources is the informer of one sourceKey and the rules that use it.
type namespaceSources struct {
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
	rules    map[types.NamespacedName]ruleSelection
}

// ruleSelection is where a rule's sources are, how they are picked, and how the rule sees them.
type ruleSelection struct {
	key    sourceKey
	picker picker
	view   view
}

// picker picks a rule's sources among the objects of its namespace and kind: by label
// (spec.selector) or by name (spec.sourceNames). Copyrator's copies are never among them
// (the informers leave them out).
type picker struct {
	selector labels.Selector
	names    sets.Set[string]
}

// pickerOf returns the picker of a rule.
func pickerOf(rule *flantv1.CopyratorRule) (picker, error) {
	if len(rule.Spec.SourceNames) > 0 {
		return picker{names: sets.New(rule.Spec.SourceNames...)}, nil
	}
	sel, err := sourceSelector(rule)
	return picker{selector: sel}, err
}

// picks reports whether m is one of the rule's sources.
func (p picker) picks(m metav1.Object) bool {
	if p.names != nil {
		return p.names.Has(m.GetName())
	}
	return p.selector.Matches(labels.Set(m.GetLabels()))
}

// sourceContent is what planning needs of one version of a source, as one view sees it,
// besides its metadata.
type sourceContent struct {
	hash      string
	size      int64
	typ       corev1.SecretType
	immutable bool
}

// sourceContents are the contents of one version of a source, by view, and its body as
// the API server sent it (managedFields dropped): a later pass that writes copies of that
// version, such as one for a new namespace, takes the body from here instead of reading it
// again. Only sources that rules pick have an entry, so what it holds follows the rules.
type sourceContents struct {
	mu              sync.Mutex
	resourceVersion string
	views           map[string]sourceContent
	body            client.Object
}

// get returns the content of version rv as view id sees it, if known.
func (c *sourceContents) get(rv, id string) (sourceContent, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc, ok := c.views[id]
	return sc, ok && c.resourceVersion == rv
}

// set remembers the content of version rv as view id sees it; the contents of another
// version are forgotten.
func (c *sourceContents) set(rv, id string, sc sourceContent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(rv)
	c.views[id] = sc
}

// at makes c the contents of version rv, forgetting another version's. c.mu is held.
func (c *sourceContents) at(rv string) {
	if c.resourceVersion != rv || c.views == nil {
		c.resourceVersion, c.views, c.body = rv, map[string]sourceContent{}, nil
	}
}

// setBody remembers obj, version rv of the source as read, without its managedFields.
// Nothing may change obj afterwards: desiredCopy gives every copy maps of its own.
func (c *sourceContents) setBody(rv string, obj client.Object) {
	obj.SetManagedFields(nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at(rv)
	c.body = obj
}

// bodyOf returns the body of version rv, if remembered.
func (c *sourceContents) bodyOf(rv string) client.Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resourceVersion != rv {
		return nil
	}
	return c.body
}

func newSourceWatcher(cs kubernetes.Interface, md metadata.Interface, full *fullPasses) *sourceWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &sourceWatcher{clientset: cs, metadata: md, ctx: ctx, cancel: cancel, informers: map[sourceKey]*namespaceSources{},
		rules: map[types.NamespacedName]ruleSelection{}, full: full}
}

// Start implements manager.Runnable: it waits for the manager to stop, then stops every informer.
func (w *sourceWatcher) Start(ctx context.Context) error {
	<-ctx.Done()
	w.cancel()
	return nil
}

// setQueue is the controller source (source.Func) that hands the watcher the work queue.
func (w *sourceWatcher) setQueue(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = q
	return nil
}

// changed wakes, for a full pass, every rule of key that picks one of objs.
func (w *sourceWatcher) changed(key sourceKey, objs ...any) {
	w.mu.Lock()
	q := w.queue
	var rules []types.NamespacedName
	if s, ok := w.informers[key]; ok {
		for rule, sel := range s.rules {
			for _, o := range objs {
				if m, ok := metaOf(o); ok && sel.picker.picks(m) {
					rules = append(rules, rule)
					break
				}
			}
		}
	}
	w.mu.Unlock()
	if q == nil {
		return
	}
	for _, r := range rules {
		w.full.mark(r)
		q.Add(reconcile.Request{NamespacedName: r})
	}
}

// metaOf returns the object of an informer event (or of a tombstone).
func metaOf(o any) (metav1.Object, bool) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	m, ok := o.(metav1.Object)
	return m, ok
}

// sourceSet is what a rule picks: the sources it copies, sorted by name, the names of
// those it never copies (forbiddenType), and the names in spec.sourceNames that no source
// has (missing).
type sourceSet struct {
	copyable []source
	skipped  []string
	missing  []string
}

// sources returns the rule's sources as its view sees them (a body only for those whose
// content had to be read now), starting the informer of its namespace and kind unless
// another rule already did, and waiting for its first list.
func (w *sourceWatcher) sources(ctx context.Context, rule *flantv1.CopyratorRule, v view, parallelism int) (sourceSet, error) {
	p, err := pickerOf(rule)
	if err != nil {
		return sourceSet{}, err
	}
	key := sourceKey{namespace: rule.Namespace, kind: ruleKind(rule.Spec.RuleType)}
	inf := w.ensure(client.ObjectKeyFromObject(rule), ruleSelection{key: key, picker: p, view: v})
	waitCtx, cancel := context.WithTimeout(ctx, sourceSyncTimeout)
	defer cancel()
	if !toolscache.WaitFor(waitCtx, "", inf.HasSyncedChecker()) {
		return sourceSet{}, fmt.Errorf("the list of %ss in namespace %s did not arrive within %s", key.kind, key.namespace, sourceSyncTimeout)
	}
	var picked []metav1.Object
	found := sets.New[string]()
	for _, item := range inf.GetStore().List() {
		if m, ok := item.(metav1.Object); ok && p.picks(m) {
			picked = append(picked, m)
			found.Insert(m.GetName())
		}
	}
	srcs := make([]source, len(picked))
	var g errgroup.Group
	g.SetLimit(max(parallelism, 1))
	gone := make([]bool, len(picked))
	for i, m := range picked {
		g.Go(func() error {
			s, err := w.sourceOf(ctx, key, m, v)
			if apierrors.IsNotFound(err) {
				gone[i] = true
				return nil
			}
			srcs[i] = s
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return sourceSet{}, err
	}
	out := sourceSet{copyable: make([]source, 0, len(srcs))}
	for i, s := range srcs {
		switch {
		case gone[i]:
			// Deleted since the informer saw it: its delete event brings another pass.
		case forbiddenType(s.Type):
			out.skipped = append(out.skipped, s.Name)
		default:
			out.copyable = append(out.copyable, s)
		}
	}
	sort.Slice(out.copyable, func(i, j int) bool { return out.copyable[i].Name < out.copyable[j].Name })
	sort.Strings(out.skipped)
	if p.names != nil {
		out.missing = sets.List(p.names.Difference(found))
	}
	return out, nil
}

// sourceOf returns the source of m as view v sees it: from the remembered content of its
// version, or read from the API server now (then with its body). The carried labels and
// annotations come from m. A read remembers the content as every rule that picks the
// source sees it, so rules with different key filters read one version once between them.
func (w *sourceWatcher) sourceOf(ctx context.Context, key sourceKey, m metav1.Object, v view) (source, error) {
	if e, ok := w.contents.Load(m.GetUID()); ok {
		if c, ok := e.(*sourceContents).get(m.GetResourceVersion(), v.id); ok {
			return source{Name: m.GetName(), UID: m.GetUID(), Version: m.GetResourceVersion(), Hash: c.hash, Size: c.size,
				Type: c.typ, Immutable: c.immutable, Carried: v.carried(m)}, nil
		}
	}
	obj, err := w.get(ctx, key.kind, key.namespace, m.GetName())
	if err != nil {
		return source{}, err
	}
	e, _ := w.contents.LoadOrStore(obj.GetUID(), &sourceContents{})
	contents := e.(*sourceContents)
	contents.setBody(obj.GetResourceVersion(), obj)
	for _, other := range w.viewsPicking(key, m) {
		if other.id != v.id {
			c := other.content(obj)
			contents.set(obj.GetResourceVersion(), other.id, contentOf(c))
		}
	}
	s := v.source(obj)
	contents.set(obj.GetResourceVersion(), v.id, contentOf(s.Object))
	return s, nil
}

// contentOf is what planning needs of content c.
func contentOf(c client.Object) sourceContent {
	s := sourceMeta(c)
	return sourceContent{hash: contentHash(c), size: contentSize(c), typ: s.Type, immutable: s.Immutable}
}

// viewsPicking returns the distinct views of the rules of key that pick m.
func (w *sourceWatcher) viewsPicking(key sourceKey, m metav1.Object) []view {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.informers[key]
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []view
	for _, sel := range s.rules {
		if !seen[sel.view.id] && sel.picker.picks(m) {
			seen[sel.view.id] = true
			out = append(out, sel.view)
		}
	}
	return out
}

// ensure returns the informer of sel.key, with rule among its rules, starting it when
// missing; a rule that copied from another namespace or kind before leaves it.
func (w *sourceWatcher) ensure(rule types.NamespacedName, sel ruleSelection) toolscache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := sel.key
	if old, ok := w.rules[rule]; ok && old.key != key {
		w.leave(rule, old.key)
	}
	w.rules[rule] = sel
	if s, ok := w.informers[key]; ok {
		s.rules[rule] = sel
		return s.informer
	}
	resource := "configmaps"
	if key.kind == kindSecret {
		resource = "secrets"
	}
	inf := metadatainformer.NewFilteredMetadataInformer(w.metadata, corev1.SchemeGroupVersion.WithResource(resource), key.namespace, 0,
		toolscache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = notCopies.String() }).Informer()
	_ = inf.SetTransform(func(in any) (any, error) {
		if m, ok := in.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return in, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		// The first list is read by the reconcile that started the informer.
		AddFunc: func(o any, initial bool) {
			if !initial {
				w.changed(key, o)
			}
		},
		UpdateFunc: func(old, o any) { w.changed(key, old, o) },
		DeleteFunc: func(o any) {
			if m, ok := metaOf(o); ok {
				w.contents.Delete(m.GetUID())
			}
			w.changed(key, o)
		},
	})
	ctx, stop := context.WithCancel(w.ctx)
	go inf.RunWithContext(ctx)
	w.informers[key] = &namespaceSources{informer: inf, stop: stop, rules: map[types.NamespacedName]ruleSelection{rule: sel}}
	return inf
}

// leave takes rule off the informer of key and stops it when no rule uses it. w.mu is held.
func (w *sourceWatcher) leave(rule types.NamespacedName, key sourceKey) {
	s, ok := w.informers[key]
	if !ok {
		return
	}
	delete(s.rules, rule)
	if len(s.rules) == 0 {
		s.stop()
		for _, item := range s.informer.GetStore().List() {
			if m, ok := item.(metav1.Object); ok {
				w.contents.Delete(m.GetUID())
			}
		}
		delete(w.informers, key)
	}
}

// forget takes a deleted rule off its informer.
func (w *sourceWatcher) forget(rule types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sel, ok := w.rules[rule]; ok {
		w.leave(rule, sel.key)
		delete(w.rules, rule)
	}
}

// loadBodies sets the bodies of the sources that actions create or update copies from and
// that the pass has not read yet: from the body remembered with the version the pass
// planned with, or else read from the API server (one GET per source, in parallel) and set
// from what it read, as view v sees it (a source may have changed since: the copy then gets
// the newer content, and the next pass finds it in sync). Actions whose source is gone
// meanwhile are dropped: the next pass deletes their copies.
func (w *sourceWatcher) loadBodies(ctx context.Context, namespace, kind string, v view, actions []action, parallelism int) ([]action, error) {
	need := map[*source]bool{}
	for _, a := range actions {
		if a.Source == nil || a.Source.Object != nil || need[a.Source] {
			continue
		}
		if e, ok := w.contents.Load(a.Source.UID); ok {
			if body := e.(*sourceContents).bodyOf(a.Source.Version); body != nil {
				a.Source.Object = v.content(body)
				continue
			}
		}
		need[a.Source] = true
	}
	if len(need) == 0 {
		return actions, nil
	}
	var mu sync.Mutex
	gone := map[*source]bool{}
	var g errgroup.Group
	g.SetLimit(max(parallelism, 1))
	for src := range need {
		g.Go(func() error {
			obj, err := w.get(ctx, kind, namespace, src.Name)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case apierrors.IsNotFound(err):
				gone[src] = true
				return nil
			case err != nil:
				return fmt.Errorf("reading %s %s/%s: %w", kind, namespace, src.Name, err)
			}
			*src = v.source(obj)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(gone) == 0 {
		return actions, nil
	}
	kept := actions[:0:0]
	for _, a := range actions {
		if a.Source == nil || !gone[a.Source] {
			kept = append(kept, a)
		}
	}
	return kept, nil
}

// get reads one source from the API server (the clientset speaks protobuf).
func (w *sourceWatcher) get(ctx context.Context, kind, namespace, name string) (client.Object, error) {
	if kind == kindSecret {
		return w.clientset.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	return w.clientset.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}
