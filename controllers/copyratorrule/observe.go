package copyratorrule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/scope"
)

// observe reads the namespaces a step of a pass plans, their consent and copies, in scope s.
func (r *Reconciler) observe(ctx context.Context, rule ruleID, adopting bool, kind string, sa types.NamespacedName,
	sources []source, f namespaceFilter, s passScope) (planInput, []refusal, error) {
	in := planInput{Rule: rule, Kind: kind, Sources: sources}
	namespaces, err := r.targetNamespaces(ctx, s)
	if err != nil {
		return in, nil, err
	}
	candidates, refused, terminating := selectTargets(f, s, namespaces)
	in.Terminating = terminating
	if in.Owned, err = r.copies.owned(ctx, rule.NamespacedName, s); err != nil {
		return in, nil, err
	}
	if !adopting {
		in.Owned = slices.DeleteFunc(in.Owned, func(c copyState) bool { return claimedBy(rule, &c) == claimedLegacy })
	}
	if len(sources) == 0 {
		// Nothing to copy: consent matters only where copies are (left as they are, or gone).
		candidates = slices.DeleteFunc(candidates, func(ns string) bool {
			return !slices.ContainsFunc(in.Owned, func(c copyState) bool { return c.Key.Namespace == ns })
		})
	}
	targets, denied, err := r.access.consenting(ctx, sa, resourceOf(kind), candidates)
	if err != nil {
		return in, nil, fmt.Errorf("checking consent: %w", err)
	}
	in.Targets, in.Frozen = targets, map[string]bool{}
	for _, d := range denied {
		in.Frozen[d.Namespace] = true
	}
	if in.Occupied, err = r.copies.occupied(ctx, rule.NamespacedName, kind, in.Targets, in.Sources, in.Owned); err != nil {
		return in, nil, err
	}
	return in, append(refused, denied...), nil
}

// targetNamespaces reads the metadata of the namespaces in scope from the cache.
func (r *Reconciler) targetNamespaces(ctx context.Context, s passScope) ([]metav1.PartialObjectMetadata, error) {
	if s.rest {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		// Read-only: the cached objects are not copied.
		if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		return list.Items, nil
	}
	var namespaces []metav1.PartialObjectMetadata
	for name := range s.namespaces {
		ns, err := r.namespace(ctx, name)
		if err != nil {
			return nil, err
		}
		if ns != nil { // gone: copies left in it are planned like those of any vanished namespace
			namespaces = append(namespaces, *ns)
		}
	}
	return namespaces, nil
}

// namespace reads the metadata of namespace name from the cache; nil when it is gone.
func (r *Reconciler) namespace(ctx context.Context, name string) (*metav1.PartialObjectMetadata, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, ns); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns, nil
}

// passScope is what a step of a pass reads: the named namespaces, or (rest) all others.
// Namespaces are planned independently: two steps plan what one over all would.
type passScope struct {
	namespaces sets.Set[string]
	rest       bool
}

var everyNamespace = passScope{rest: true}

// passScopes returns the steps of a pass: the fresh namespaces, then the rest; or one.
func passScopes(fresh []string) []passScope {
	if len(fresh) == 0 {
		return []passScope{everyNamespace}
	}
	named := sets.New(fresh...)
	return []passScope{{namespaces: named}, {namespaces: named, rest: true}}
}

func (s passScope) covers(ns string) bool { return s.namespaces.Has(ns) != s.rest }

// namespaceFilter is the rule's choice of namespaces, and the protected ones.
type namespaceFilter struct {
	rule      *flantv1.CopyratorRule
	selector  labels.Selector // nil when the rule has no namespaceSelector
	watches   func(string) bool
	protected sets.Set[string]
}

// newNamespaceFilter compiles the rule's namespace choice; an invalid namespaceSelector is
// the user's mistake. watches is needed: Namespaces are cluster-scoped, all cached.
func newNamespaceFilter(rule *flantv1.CopyratorRule, watches func(string) bool, protected sets.Set[string]) (namespaceFilter, error) {
	f := namespaceFilter{rule: rule, watches: watches, protected: protected}
	if rule.Spec.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(rule.Spec.NamespaceSelector)
		if err != nil {
			return f, fmt.Errorf("spec.namespaceSelector: %w", err)
		}
		f.selector = sel
	}
	return f, nil
}

// selects reports whether the rule wants copies in namespace ns: not its own, watched,
// active, not opted out, and chosen by spec.namespaces or spec.namespaceSelector when set.
func (f namespaceFilter) selects(ns metav1.Object) bool {
	name := ns.GetName()
	switch {
	case name == f.rule.Namespace, !f.watches(name), ns.GetDeletionTimestamp() != nil,
		ns.GetLabels()[LabelIgnore] == "true":
		return false
	case len(f.rule.Spec.Namespaces) > 0:
		return slices.Contains(f.rule.Spec.Namespaces, name)
	case f.selector != nil:
		return f.selector.Matches(labels.Set(ns.GetLabels()))
	}
	return true
}

// selectTargets returns the candidates in scope (sorted), the protected refused, the terminating.
func selectTargets(f namespaceFilter, s passScope, namespaces []metav1.PartialObjectMetadata) (candidates []string, protected []refusal, terminating map[string]bool) {
	terminating = map[string]bool{}
	for i := range namespaces {
		ns := &namespaces[i]
		if !s.covers(ns.Name) {
			continue
		}
		if ns.DeletionTimestamp != nil {
			terminating[ns.Name] = true
		}
		switch {
		case !f.selects(ns):
		case f.protected.Has(ns.Name) && !accepts(ns):
			protected = append(protected, protectedRefusal(ns.Name))
		default:
			candidates = append(candidates, ns.Name)
		}
	}
	slices.Sort(candidates)
	slices.SortFunc(protected, func(a, b refusal) int { return strings.Compare(a.Namespace, b.Namespace) })
	return candidates, protected, terminating
}

// ruleIndex is the copy cache index from a copy to its rule ("namespace/name").
const ruleIndex = "copyrator.rule"

func indexByRule(obj client.Object) []string {
	if rule, ok := ruleOfCopy(obj); ok {
		return []string{rule.String()}
	}
	return nil
}

func ruleOfCopy(obj client.Object) (types.NamespacedName, bool) {
	l := obj.GetLabels()
	if l[LabelManagedBy] != ManagedByValue || l[LabelRule] == "" || l[LabelRuleNamespace] == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: l[LabelRuleNamespace], Name: l[LabelRule]}, true
}

// stateOf turns a cached copy (stripBody keeps its hash and size) into a copyState.
func stateOf(obj client.Object) copyState {
	ann := obj.GetAnnotations()
	s := copyState{
		Key:             keyOf(obj),
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
		Source:          ann[AnnotationSource],
		WrittenAs:       ann[AnnotationContentHash],
		Hash:            ann[cachedHashAnnotation],
		Carried:         copyCarriedFingerprint(obj.GetLabels(), ann),
		Labels:          obj.GetLabels(),
		Annotations:     ann,
	}
	s.Rule, _ = ruleOfCopy(obj)
	s.RuleUID = obj.GetLabels()[LabelRuleUID]
	s.Size, _ = strconv.ParseInt(ann[cachedSizeAnnotation], 10, 64)
	// Annotations besides the two only the cache has (a copy read live has neither).
	s.HasAnnotations = len(ann) > 2 || len(ann) > 0 && !has(ann, cachedHashAnnotation)
	s.Type, s.Immutable = typeOf(obj)
	return s
}

func keyOf(obj client.Object) copyKey {
	return copyKey{Kind: kindOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Secret); ok {
		return kindSecret
	}
	return kindConfigMap
}

func newObject(kind string) client.Object {
	if kind == kindSecret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}

// copyReader reads the copy cache in place (stateOf only reads), rules the manager's cache.
type copyReader struct {
	cache client.Reader
	rules client.Reader
}

// list calls each for every cached copy of both kinds that opts select.
func (r copyReader) list(ctx context.Context, each func(client.Object), opts ...client.ListOption) error {
	for _, l := range []client.ObjectList{&corev1.SecretList{}, &corev1.ConfigMapList{}} {
		if err := r.cache.List(ctx, l, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
			return fmt.Errorf("listing copies: %w", err)
		}
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			each(o.(client.Object))
			return nil
		})
	}
	return nil
}

// owned returns the rule's copies of both kinds in scope.
func (r copyReader) owned(ctx context.Context, rule types.NamespacedName, s passScope) ([]copyState, error) {
	var out []copyState
	keep := func(obj client.Object) {
		if s.covers(obj.GetNamespace()) {
			out = append(out, stateOf(obj))
		}
	}
	byRule := client.MatchingFields{ruleIndex: rule.String()}
	if s.rest {
		return out, r.list(ctx, keep, byRule)
	}
	for ns := range s.namespaces {
		if err := r.list(ctx, keep, byRule, client.InNamespace(ns)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// occupied returns the copies of other rules at the keys the rule wants and does not own.
func (r copyReader) occupied(ctx context.Context, rule types.NamespacedName, kind string, targets []string, sources []source, owned []copyState) (map[copyKey]copyState, error) {
	have := make(map[copyKey]bool, len(owned))
	for _, c := range owned {
		have[c.Key] = true
	}
	out := map[copyKey]copyState{}
	for _, ns := range targets {
		for _, src := range sources {
			key := copyKey{Kind: kind, Namespace: ns, Name: src.Name}
			if have[key] {
				continue
			}
			obj := newObject(kind)
			err := r.cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.Name}, obj)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("reading %s from the copy cache: %w", key, err)
			}
			if st := stateOf(obj); st.Rule != rule || st.RuleUID == "" {
				out[key] = st // another rule's, or of this rule's name and no UID (not owned)
			}
		}
	}
	return out, nil
}

// tallies counts the copies the copy cache holds and their bytes: the rule's, its
// namespace's rules' and all; look-alikes (no UID of an existing rule) count nowhere.
func (r copyReader) tallies(ctx context.Context, rule types.NamespacedName) (ruleCopies, namespace, all tally, err error) {
	var rules flantv1.CopyratorRuleList
	if err := r.rules.List(ctx, &rules, client.UnsafeDisableDeepCopy); err != nil {
		return tally{}, tally{}, tally{}, fmt.Errorf("listing CopyratorRules: %w", err)
	}
	uids := make(map[types.NamespacedName]string, len(rules.Items))
	for i := range rules.Items {
		uids[client.ObjectKeyFromObject(&rules.Items[i])] = string(rules.Items[i].UID)
	}
	err = r.list(ctx, func(obj client.Object) {
		owner, _ := ruleOfCopy(obj)
		if uid := obj.GetLabels()[LabelRuleUID]; uid == "" || uids[owner] != uid {
			return
		}
		size, _ := strconv.ParseInt(obj.GetAnnotations()[cachedSizeAnnotation], 10, 64)
		one := tally{1, size}
		all = all.plus(one)
		if owner.Namespace == rule.Namespace {
			namespace = namespace.plus(one)
		}
		if owner == rule {
			ruleCopies = ruleCopies.plus(one)
		}
	})
	return ruleCopies, namespace, all, err
}

// sourceSyncTimeout bounds the wait for the first list of a namespace's sources.
const sourceSyncTimeout = 30 * time.Second

// sourceKey names one source informer: the ConfigMaps or the Secrets of one namespace.
type sourceKey struct{ namespace, kind string }

// sourceWatcher follows what rules copy from, at a cost that follows their namespaces and
// sources, not their number: a metadata-only informer per namespace and kind (copies
// excluded on the API server) shared by the rules there, and the version last read of each
// source picked, body included (docs/copyratorrule.md, "Source bodies in memory"). A change
// to a source wakes the rules that pick it. A manager Runnable: its informers stop with it.
type sourceWatcher struct {
	reader    client.Reader
	metadata  metadata.Interface
	ctx       context.Context
	cancel    context.CancelFunc
	mu        sync.Mutex
	queue     queue
	rules     map[types.NamespacedName]ruleSelection
	informers map[sourceKey]*namespaceSources
}

// namespaceSources is the informer of one sourceKey and the versions held, by UID.
type namespaceSources struct {
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
	versions map[types.UID]*sourceVersion
}

// sourceVersion is a source as read (never changed) and its content by view id. Its body
// keeps only the annotations the rules here carried when it was read (kept): a Secret's
// last-applied-configuration holds its data.
type sourceVersion struct {
	resourceVersion string
	changed         time.Time // lastChange, read before the managed fields are dropped
	body            client.Object
	kept            sets.Set[string]
	views           map[string]source
}

// ruleSelection is where a rule's sources are, how they are picked, and how it sees them.
type ruleSelection struct {
	key    sourceKey
	picker picker
	view   view
}

// picker picks a rule's sources by label (spec.selector) or name (spec.sourceNames).
type picker struct {
	selector labels.Selector
	names    sets.Set[string]
}

func pickerOf(rule *flantv1.CopyratorRule) (picker, error) {
	if len(rule.Spec.SourceNames) > 0 {
		return picker{names: sets.New(rule.Spec.SourceNames...)}, nil
	}
	sel, err := sourceSelector(rule)
	return picker{selector: sel}, err
}

func (p picker) picks(m metav1.Object) bool {
	if p.names != nil {
		return p.names.Has(m.GetName())
	}
	return p.selector.Matches(labels.Set(m.GetLabels()))
}

// notCopies selects objects that are not Copyrator's copies (a copy is never a source).
var notCopies, _ = labels.Parse(LabelManagedBy + "!=" + ManagedByValue)

// sourceSelector picks a rule's sources: the rule's selector, excluding Copyrator's own copies.
func sourceSelector(rule *flantv1.CopyratorRule) (labels.Selector, error) {
	sel, err := labels.ValidatedSelectorFromSet(rule.Spec.SelectorLabels())
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	reqs, _ := notCopies.Requirements()
	return sel.Add(reqs...), nil
}

func newSourceWatcher(reader client.Reader, md metadata.Interface) *sourceWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &sourceWatcher{reader: reader, metadata: md, ctx: ctx, cancel: cancel,
		rules: map[types.NamespacedName]ruleSelection{}, informers: map[sourceKey]*namespaceSources{}}
}

// Start implements manager.Runnable: it waits for the manager to stop, then stops every informer.
func (w *sourceWatcher) Start(ctx context.Context) error {
	<-ctx.Done()
	w.cancel()
	return nil
}

// setQueue is the controller source (source.Func) that hands the watcher the work queue.
func (w *sourceWatcher) setQueue(_ context.Context, q queue) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = q
	return nil
}

// changed handles the informer of key: an object added, changed or deleted (dropVersion:
// the version held is no longer its) wakes the rules that pick it.
func (w *sourceWatcher) changed(key sourceKey, dropVersion bool, objs ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for rule, sel := range w.rules {
		if sel.key == key && w.queue != nil && slices.ContainsFunc(objs, func(o any) bool {
			m, ok := metaOf(o)
			return ok && sel.picker.picks(m)
		}) {
			w.queue.Add(reconcile.Request{NamespacedName: rule})
		}
	}
	if m, ok := metaOf(objs[len(objs)-1]); ok && dropVersion && w.informers[key] != nil {
		delete(w.informers[key].versions, m.GetUID())
	}
}

func metaOf(o any) (metav1.Object, bool) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	m, ok := o.(metav1.Object)
	return m, ok
}

// sourceSet is what a rule picks: sources it copies, skipped (forbiddenType) and missing.
type sourceSet struct {
	copyable []source
	skipped  []string
	missing  []string
}

// picked returns the rule's sources as its view sees them, from its informer (ensure).
func (w *sourceWatcher) picked(ctx context.Context, rule *flantv1.CopyratorRule, parallelism int) (sourceSet, error) {
	p, err := pickerOf(rule)
	if err != nil {
		return sourceSet{}, err
	}
	key := sourceKey{namespace: rule.Namespace, kind: ruleKind(rule.Spec.RuleType)}
	v := viewOf(rule.Spec)
	inf := w.ensure(client.ObjectKeyFromObject(rule), ruleSelection{key: key, picker: p, view: v})
	waitCtx, cancel := context.WithTimeout(ctx, sourceSyncTimeout)
	defer cancel()
	if !toolscache.WaitFor(waitCtx, "", inf.HasSyncedChecker()) {
		return sourceSet{}, fmt.Errorf("the list of %ss in namespace %s did not arrive within %s", key.kind, key.namespace, sourceSyncTimeout)
	}
	var picked []metav1.Object
	for _, item := range inf.GetStore().List() {
		if m, ok := item.(metav1.Object); ok && p.picks(m) {
			picked = append(picked, m)
		}
	}
	srcs := make([]*source, len(picked))
	var g errgroup.Group
	g.SetLimit(max(parallelism, 1))
	for i, m := range picked {
		g.Go(func() error {
			s, err := w.sourceOf(ctx, key, m, v)
			if apierrors.IsNotFound(err) {
				return nil // deleted since the informer saw it: its delete event brings another pass
			}
			srcs[i] = &s
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return sourceSet{}, err
	}
	return setOf(srcs, picked, p), nil
}

// setOf sorts the sources read (nil: gone) into a sourceSet.
func setOf(srcs []*source, picked []metav1.Object, p picker) sourceSet {
	var out sourceSet
	found := sets.New[string]()
	for i, s := range srcs {
		found.Insert(picked[i].GetName())
		switch {
		case s == nil:
		case forbiddenType(s.Type):
			out.skipped = append(out.skipped, s.Name)
		default:
			out.copyable = append(out.copyable, *s)
		}
	}
	slices.SortFunc(out.copyable, func(a, b source) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(out.skipped)
	if p.names != nil {
		out.missing = sets.List(p.names.Difference(found))
	}
	return out
}

// sourceOf returns the source m as view v sees it, from the version held or read now.
func (w *sourceWatcher) sourceOf(ctx context.Context, key sourceKey, m metav1.Object, v view) (source, error) {
	ver := w.held(key, m, v)
	if ver == nil {
		// One GET from the API server (the manager's API reader speaks protobuf).
		obj := newObject(key.kind)
		if err := w.reader.Get(ctx, types.NamespacedName{Namespace: key.namespace, Name: m.GetName()}, obj); err != nil {
			return source{}, err
		}
		changed := lastChange(obj)
		obj.SetManagedFields(nil)
		kept := w.carriedAnnotations(key).Insert(v.annotations...)
		obj.SetAnnotations(pick(obj.GetAnnotations(), kept.UnsortedList()))
		ver = &sourceVersion{resourceVersion: obj.GetResourceVersion(), changed: changed, body: obj, kept: kept, views: map[string]source{}}
		w.mu.Lock()
		if s, ok := w.informers[key]; ok {
			s.versions[obj.GetUID()] = ver
		}
		w.mu.Unlock()
	}
	return w.as(ver, v), nil
}

// held returns the version of m held, when it is m's and kept the annotations v carries.
func (w *sourceWatcher) held(key sourceKey, m metav1.Object, v view) *sourceVersion {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.informers[key]; ok {
		if ver := s.versions[m.GetUID()]; ver != nil && ver.resourceVersion == m.GetResourceVersion() && ver.kept.HasAll(v.annotations...) {
			return ver
		}
	}
	return nil
}

// carriedAnnotations returns the annotation keys the rules reading key carry.
func (w *sourceWatcher) carriedAnnotations(key sourceKey) sets.Set[string] {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := sets.New[string]()
	for _, sel := range w.rules {
		if sel.key == key {
			out.Insert(sel.view.annotations...)
		}
	}
	return out
}

// as returns ver as view v sees it, its content computed once per view id.
func (w *sourceWatcher) as(ver *sourceVersion, v view) source {
	w.mu.Lock()
	s, ok := ver.views[v.id]
	w.mu.Unlock()
	if !ok {
		s = v.source(ver.body)
		w.mu.Lock()
		ver.views[v.id] = s
		w.mu.Unlock()
	}
	s.Carried, s.Changed = v.carried(ver.body), ver.changed
	return s
}

// wanted returns what the rule wants its copy of kind and name to be, from the version held.
func (w *sourceWatcher) wanted(rule types.NamespacedName, kind, name string) (source, bool) {
	w.mu.Lock()
	sel, ok := w.rules[rule]
	m, picks := w.picksNamed(sel, kind, name)
	w.mu.Unlock()
	if ok && picks {
		if ver := w.held(sel.key, m, sel.view); ver != nil {
			return w.as(ver, sel.view), true
		}
	}
	return source{}, false
}

// rulesPicking returns the rules that pick a source of this kind and name, in any namespace.
func (w *sourceWatcher) rulesPicking(kind, name string) []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []types.NamespacedName
	for rule, sel := range w.rules {
		if _, ok := w.picksNamed(sel, kind, name); ok {
			out = append(out, rule)
		}
	}
	return out
}

// picksNamed returns sel's source of kind and name, when sel picks it. w.mu is held.
func (w *sourceWatcher) picksNamed(sel ruleSelection, kind, name string) (metav1.Object, bool) {
	s := w.informers[sel.key]
	if s == nil || sel.key.kind != kind {
		return nil, false
	}
	item, _, _ := s.informer.GetStore().GetByKey(sel.key.namespace + "/" + name)
	m, ok := item.(metav1.Object)
	return m, ok && sel.picker.picks(m)
}

// ensure notes sel as the rule's and returns the informer of sel.key, started if need be.
func (w *sourceWatcher) ensure(rule types.NamespacedName, sel ruleSelection) toolscache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := sel.key
	old, had := w.rules[rule]
	w.rules[rule] = sel
	if had && old.key != key {
		w.stopUnused(old.key)
	}
	if s, ok := w.informers[key]; ok {
		return s.informer
	}
	inf := metadatainformer.NewFilteredMetadataInformer(w.metadata, corev1.SchemeGroupVersion.WithResource(resourceOf(key.kind)), key.namespace, 0,
		toolscache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = notCopies.String() }).Informer()
	// Sources are picked by labels and name: no annotation is kept (a Secret's
	// last-applied-configuration holds its data).
	_ = inf.SetTransform(func(in any) (any, error) {
		if m, ok := in.(metav1.Object); ok {
			m.SetManagedFields(nil)
			m.SetAnnotations(nil)
		}
		return in, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		// The first list is read by the pass that started the informer.
		AddFunc: func(o any, initial bool) {
			if !initial {
				w.changed(key, false, o)
			}
		},
		UpdateFunc: func(old, o any) { w.changed(key, true, old, o) },
		DeleteFunc: func(o any) { w.changed(key, true, o) },
	})
	ctx, stop := context.WithCancel(w.ctx)
	go inf.RunWithContext(ctx)
	w.informers[key] = &namespaceSources{informer: inf, stop: stop, versions: map[types.UID]*sourceVersion{}}
	return inf
}

// stopUnused stops the informer of key when no rule uses it. w.mu is held.
func (w *sourceWatcher) stopUnused(key sourceKey) {
	for _, sel := range w.rules {
		if sel.key == key {
			return
		}
	}
	if s, ok := w.informers[key]; ok {
		s.stop()
		delete(w.informers, key)
	}
}

func (w *sourceWatcher) forget(rule types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sel, ok := w.rules[rule]; ok {
		delete(w.rules, rule)
		w.stopUnused(sel.key)
	}
}

// A rule writes copies only where RBAC lets its ServiceAccount create the copied kind (a
// SubjectAccessReview); protected namespaces also need LabelAcceptCopies=true, which only a
// cluster admin can set (docs/copyratorrule.md, "Who may copy where").

// DefaultServiceAccountName is spec.serviceAccountName's default (the CRD sets it too).
const DefaultServiceAccountName = "copyrator"

// TargetClusterRole is the ClusterRole the installs ship for consenting to copies.
const TargetClusterRole = "quartet-copyrator-target"

func serviceAccountOf(rule *flantv1.CopyratorRule) types.NamespacedName {
	return types.NamespacedName{Namespace: rule.Namespace, Name: cmp.Or(rule.Spec.ServiceAccountName, DefaultServiceAccountName)}
}

func resourceOf(kind string) string {
	return map[string]string{kindSecret: "secrets", kindConfigMap: "configmaps"}[kind]
}

// refusal is a namespace the rule selects that receives no copies, and why.
type refusal struct {
	Namespace string
	Reason    string
	// Protected: refused because the namespace is protected (its copies are removed);
	// otherwise RBAC refused, or (Deferred) not asked yet: existing copies are left as they
	// are, no longer updated.
	Protected, Deferred bool
}

func protectedRefusal(ns string) refusal {
	return refusal{Namespace: ns, Protected: true,
		Reason: fmt.Sprintf("namespace %s is protected: it receives copies only when a cluster admin labels it %s=true", ns, LabelAcceptCopies)}
}

func rbacRefusal(ns string, sa types.NamespacedName, resource string) refusal {
	return refusal{Namespace: ns,
		Reason: fmt.Sprintf("ServiceAccount %s may not create %s in namespace %s", sa, resource, ns)}
}

// accessKey is one question; Namespace "" asks about every namespace.
type accessKey struct{ SA, Resource, Namespace string }

// accessReviewer asks the authorizer whether a ServiceAccount may create a kind in a
// namespace and remembers the answers (nextAnswer). Answers and a budget of reviews are kept
// per namespace of the rules that ask: one namespace's questions neither push another's
// answers out nor use its budget.
type accessReviewer struct {
	client           client.Client
	clock            kcache.Clock
	recheck, refresh time.Duration
	parallelism      int
	perSecond        int
	mu               sync.Mutex
	namespaces       map[string]*namespaceAccess
}

// namespaceAccess is what one namespace's rules asked, and the reviews they may still ask.
type namespaceAccess struct {
	answers *kcache.LRUExpireCache // accessKey → answer
	budget  *rate.Limiter
}

// answer is a review remembered: granted, or refused refusals times in a row; due is when
// it is asked again.
type answer struct {
	allowed  bool
	refusals int
	due      time.Time
}

// maxAccessAnswersPerNamespace bounds the answers remembered for one namespace's rules
// (about 200 bytes each): 2 ServiceAccounts on both kinds in 5,000 namespaces fit.
const maxAccessAnswersPerNamespace = 20_000

// reviewBurst is how many reviews a namespace's rules may ask at once, in seconds of its
// rate: a pass that asks many holds a worker for no longer than that.
const reviewBurst = 2

// deferredRetry is how long a pass whose reviews were deferred waits before the next (recheck at most).
const deferredRetry = 10 * time.Second

func newAccessReviewer(c client.Client, clk kcache.Clock, recheck, refresh time.Duration, parallelism, perSecond int) *accessReviewer {
	return &accessReviewer{client: c, clock: clk, recheck: recheck, refresh: refresh, parallelism: max(parallelism, 1),
		perSecond: max(perSecond, 1), namespaces: map[string]*namespaceAccess{}}
}

// of returns the answers and budget of namespace ns's rules, made on first use.
func (a *accessReviewer) of(ns string) *namespaceAccess {
	a.mu.Lock()
	defer a.mu.Unlock()
	na := a.namespaces[ns]
	if na == nil {
		na = &namespaceAccess{answers: kcache.NewLRUExpireCacheWithClock(maxAccessAnswersPerNamespace, a.clock),
			budget: rate.NewLimiter(rate.Limit(a.perSecond), reviewBurst*a.perSecond)}
		a.namespaces[ns] = na
	}
	return na
}

// forget drops what namespace ns's rules asked, when it has no rule left.
func (a *accessReviewer) forget(ns string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.namespaces, ns)
}

// errDeferred: the namespace's rules spent their budget of reviews; asked at a later pass.
var errDeferred = errors.New("review budget spent")

// mayCreate reports whether sa may create resource objects in namespace ns ("" for every
// namespace), from an answer not yet due or a SubjectAccessReview; errDeferred when the
// budget of sa's namespace is spent.
func (a *accessReviewer) mayCreate(ctx context.Context, sa types.NamespacedName, resource, ns string) (bool, error) {
	na := a.of(sa.Namespace)
	key := accessKey{SA: sa.String(), Resource: resource, Namespace: ns}
	now := a.clock.Now()
	var prev answer
	if v, ok := na.answers.Get(key); ok {
		if prev = v.(answer); now.Before(prev.due) {
			return prev.allowed, nil
		}
	}
	if !na.budget.AllowN(now, 1) {
		return false, errDeferred
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   serviceaccount.MakeUsername(sa.Namespace, sa.Name),
		Groups: append(serviceaccount.MakeGroupNames(sa.Namespace), user.AllAuthenticated),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: resource, Version: "v1",
		},
	}}
	if err := a.client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether ServiceAccount %s may create %s in namespace %q: %w", sa, resource, ns, err)
	}
	next := nextAnswer(prev, review.Status.Allowed, now, a.recheck, a.refresh)
	// Kept past due, so that the refusals in a row are still known when it is asked again.
	na.answers.Add(key, next, 2*next.due.Sub(now))
	return next.allowed, nil
}

// maxBackoffDoublings bounds the back-off of refusals: 8 × recheck (and refresh at most).
const maxBackoffDoublings = 3

// nextAnswer is the answer remembered after a review: a grant is asked again after
// refresh; a refusal after recheck, doubled for each refusal in a row before it
// (maxBackoffDoublings), and refresh at most.
func nextAnswer(prev answer, allowed bool, now time.Time, recheck, refresh time.Duration) answer {
	if allowed {
		return answer{allowed: true, due: now.Add(refresh)}
	}
	n := 1
	if !prev.allowed {
		n = prev.refusals + 1
	}
	wait := recheck << min(n-1, maxBackoffDoublings)
	return answer{refusals: n, due: now.Add(min(wait, max(refresh, recheck)))}
}

// consenting splits candidates into those where sa may create resource objects and the
// refusals: RBAC's, and those not asked for want of budget (Deferred). One question about
// every namespace answers for all when a cluster admin granted it; else each is asked.
func (a *accessReviewer) consenting(ctx context.Context, sa types.NamespacedName, resource string, candidates []string) ([]string, []refusal, error) {
	if len(candidates) == 0 {
		return nil, nil, nil
	}
	everywhere, err := a.mayCreate(ctx, sa, resource, metav1.NamespaceAll)
	switch {
	case errors.Is(err, errDeferred):
		return nil, deferredRefusals(candidates, sa), nil
	case err != nil || everywhere:
		return candidates, nil, err
	}
	allowed := make([]bool, len(candidates))
	deferred := make([]bool, len(candidates))
	var g errgroup.Group
	g.SetLimit(a.parallelism)
	for i, ns := range candidates {
		g.Go(func() error {
			ok, err := a.mayCreate(ctx, sa, resource, ns)
			if errors.Is(err, errDeferred) {
				deferred[i] = true
				return nil
			}
			allowed[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	var yes []string
	var no []refusal
	for i, ns := range candidates {
		switch {
		case deferred[i]:
			no = append(no, deferredRefusals([]string{ns}, sa)...)
		case allowed[i]:
			yes = append(yes, ns)
		default:
			no = append(no, rbacRefusal(ns, sa, resource))
		}
	}
	return yes, no, nil
}

func deferredRefusals(namespaces []string, sa types.NamespacedName) []refusal {
	out := make([]refusal, 0, len(namespaces))
	for _, ns := range namespaces {
		out = append(out, refusal{Namespace: ns, Deferred: true, Reason: fmt.Sprintf(
			"not asked yet: the CopyratorRules of namespace %s used their SubjectAccessReviews for now (--copyratorrule-consent-reviews-per-second); copies there are left as they are until a later pass", sa.Namespace)})
	}
	return out
}

// admittedServiceAccount refuses a rule that would make its namespace's rules act as more
// than most distinct ServiceAccounts: the namespace's rules, oldest first, claim theirs
// until most are claimed; a rule naming another is a spec mistake (no review is asked).
func admittedServiceAccount(rule *flantv1.CopyratorRule, rules []flantv1.CopyratorRule, most int) error {
	slices.SortFunc(rules, func(a, b flantv1.CopyratorRule) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	claimed := sets.New[string]()
	for i := range rules {
		sa := serviceAccountOf(&rules[i]).Name
		if claimed.Has(sa) || claimed.Len() < most {
			claimed.Insert(sa)
		}
	}
	if sa := serviceAccountOf(rule).Name; !claimed.Has(sa) {
		return fmt.Errorf("spec.serviceAccountName: the CopyratorRules of namespace %s already act as %d ServiceAccounts (%s), the most --%s allows; use one of them",
			rule.Namespace, claimed.Len(), strings.Join(sets.List(claimed), ", "), flagMaxSAsPerNS)
	}
	return nil
}

// protectedNamespaces are the cluster's own, the operator's and the flag's namespaces.
func protectedNamespaces(operatorNamespace string, extra []string) sets.Set[string] {
	return scope.Namespaces{Operator: operatorNamespace}.Protected(extra...)
}

func accepts(ns metav1.Object) bool { return ns.GetLabels()[LabelAcceptCopies] == "true" }

// forbiddenSecretTypes grant access to the cluster itself (a bootstrap token is a node
// login on kubeadm clusters): never copied.
var forbiddenSecretTypes = []corev1.SecretType{corev1.SecretTypeServiceAccountToken, corev1.SecretTypeBootstrapToken}

func forbiddenType(t corev1.SecretType) bool { return slices.Contains(forbiddenSecretTypes, t) }
