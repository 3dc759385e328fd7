// Package copyratorrule implements the CopyratorRule controller: it copies the ConfigMaps
// or Secrets of a rule's namespace that match the rule's labels into other namespaces and
// keeps the copies equal to their sources. A pass: observe.go → decide.go → apply.go (with
// desired.go) → status.go (through status.Writer.Finish), events.go, metrics.go.
package copyratorrule

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
)

// +kubebuilder:rbac:groups=flant.com,resources=copyrators,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=flant.com,resources=copyrators/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// Reconciler reconciles CopyratorRules.
//
// # In-memory state
//
// What it keeps between passes (docs/STYLE.md, "In-memory state"), all lost on a restart
// or a change of leader; forget drops a deleted rule from each. Three hand-kept structures
// and a cache; the figures: docs/copyratorrule.md, "In-memory state and what it buys".
//
//	memory  | holds                          | written / read by           | restart        | protects, buys
//	--------+--------------------------------+-----------------------------+----------------+------------------------------
//	sources | per namespace and kind rules   | picked, informer handlers / | rebuilt: first | correctness: a changed source
//	        | copy from, a metadata-only     | picked (observe), changed   | passes start   | wakes its rules. Bodies: 0
//	        | informer; rules' selections;   | (wake rules), wanted (the   | informers and  | reads per new namespace (1
//	        | the version last read of each  | echo), rulesPicking (a      | read each      | without), Secrets included
//	        | picked source: body, view hash | freed name)                 | source once    | (docs/SECURITY.md)
//	access  | per namespace of the asking    | mayCreate / consenting      | asked again    | work: 1 request per new
//	        | rules: SubjectAccessReview     |                             |                | namespace, not 2; fairness:
//	        | answers (LRU with TTLs) and a  |                             |                | one namespace's questions
//	        | budget of reviews              |                             |                | evict no other's answers
//	rules   | per rule: fresh namespaces,    | namespaceEvents, the pass / | first passes   | a new namespace's copy in one
//	        | what the last full pass saw,   | the pass (shape, admit-     | are full       | request, no scan; one failed
//	        | copy counts, foreign names;    | Counted, foreign)           |                | create per ConflictRecheck
//	        | per namespace: copy counts,    | enter, leave                |                | fairness: a namespace's rules
//	        | busy, the rules waiting        |                             |                | take one worker at a time
//	copy    | Copyrator's copies, bodies     | its informers / observe,    | rebuilt from a | correctness: which copies
//	cache   | replaced by hash and size      | copyEvents                  | fresh list     | exist, what they hold
//
// Not in the table: the manager's cache (rules, Namespace metadata), the Prometheus series
// (forgetMetrics), the work queue's timers, configuration (Limits, Protected, Namespaces, Clock).
type Reconciler struct {
	// Client reads rules and namespace metadata from the manager's cache and writes;
	// APIReader reads past the caches: the copies of a rule being deleted (liveCopies).
	Client     client.Client
	APIReader  client.Reader
	Recorder   events.EventRecorder
	Clock      clock.PassiveClock
	Namespaces scope.Namespaces
	// Protected are the namespaces that need LabelAcceptCopies besides RBAC's consent;
	// MaxServiceAccounts bounds the distinct ServiceAccounts of one namespace's rules.
	Protected          sets.Set[string]
	Limits             limits
	MaxServiceAccounts int
	statuses           *status.Writer[*flantv1.CopyratorRule]
	copies             copyReader
	writer             writer
	sources            *sourceWatcher
	access             *accessReviewer
	rules              *ruleStates
}

// Reconcile makes the copies of one rule equal to its sources.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	// One worker per namespace of rules: the others' rules always find one free.
	if !r.rules.enter(req.NamespacedName) {
		return ctrl.Result{}, nil // its turn comes when the namespace's pass ends (leave)
	}
	defer r.rules.leave(req.Namespace)
	rule := &flantv1.CopyratorRule{}
	if err := r.Client.Get(ctx, req.NamespacedName, rule); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.sweep(ctx, req.NamespacedName)
	}
	if !rule.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, rule)
	}
	if !controllerutil.ContainsFinalizer(rule, Finalizer) {
		// Added and carried on: the finalizer patch would not wake the controller again. A
		// rule that had no finalizer wrote no copy: they all carry its UID.
		if err := r.patchMetadata(ctx, rule, func(x *flantv1.CopyratorRule) {
			controllerutil.AddFinalizer(x, Finalizer)
			metav1.SetMetaDataAnnotation(&x.ObjectMeta, AnnotationCopiesCarryUID, "true")
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	key, now := req.NamespacedName, r.Clock.Now()
	o := outcome{Generation: rule.Generation, Namespace: rule.Namespace, Kind: ruleKind(rule.Spec.RuleType)}
	defer func() {
		var prev *flantv1.CopyratorRule
		// The one pass without a status: a fresh-only pass's counts cover the fresh
		// namespaces alone; the full pass echoDelay later writes the status.
		if !o.FreshOnly {
			var werr error
			prev, werr = r.statuses.Finish(ctx, rule, err == nil, func(x *flantv1.CopyratorRule) {
				x.Status = computeStatus(x.Status, o, now)
			})
			if werr != nil {
				err = errors.Join(err, fmt.Errorf("writing status: %w", werr))
			}
		}
		r.report(ctx, rule, prev, o)
	}()
	seen := r.reconcileCopies(ctx, rule, &o, now)
	if !o.FreshOnly {
		r.rules.settle(key, o, seen, now)
	}
	// Adopted once a full pass wrote every copy it wanted and left none of no UID frozen.
	if adopting(rule) && !o.FreshOnly && o.err() == nil && o.SpecErr == nil && o.Dropped == 0 && o.Unadopted == 0 {
		if err := r.patchMetadata(ctx, rule, func(x *flantv1.CopyratorRule) {
			metav1.SetMetaDataAnnotation(&x.ObjectMeta, AnnotationCopiesCarryUID, "true")
		}); err != nil {
			return ctrl.Result{}, fmt.Errorf("noting that the rule's copies carry its UID: %w", err)
		}
	}
	switch err := o.err(); {
	case err != nil:
		return ctrl.Result{}, err
	case o.FreshOnly:
		// The full pass that writes the status, once no new namespace came for echoDelay.
		return ctrl.Result{RequeueAfter: echoDelay}, nil
	}
	_, recheck := r.rules.foreign(key, now)
	return ctrl.Result{RequeueAfter: nextPass(recheck, o, r.access.recheck, r.access.refresh,
		min(r.access.recheck, deferredRetry))}, nil
}

// reconcileCopies reads the rule's sources, chooses the pass's shape, then step by step
// (the fresh namespaces first, then the rest) observes, plans and writes. A spec mistake or
// a failed read ends the pass. It returns what the pass saw (sourcesSeen).
func (r *Reconciler) reconcileCopies(ctx context.Context, rule *flantv1.CopyratorRule, o *outcome, now time.Time) string {
	key, id := client.ObjectKeyFromObject(rule), idOf(rule)
	knownForeign, _ := r.rules.foreign(key, now)
	filter, err := newNamespaceFilter(rule, r.Namespaces.Watches, r.Protected)
	if err != nil {
		o.SpecErr = err
		return ""
	}
	var neighbours flantv1.CopyratorRuleList
	if err := r.Client.List(ctx, &neighbours, client.InNamespace(rule.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		o.SyncErr = fmt.Errorf("listing the CopyratorRules of namespace %s: %w", rule.Namespace, err)
		return ""
	}
	if o.SpecErr = admittedServiceAccount(rule, neighbours.Items, r.MaxServiceAccounts); o.SpecErr != nil {
		return ""
	}
	o.ServiceAccount = serviceAccountOf(rule)
	sources, err := r.sources.picked(ctx, rule, r.writer.parallelism)
	if err != nil {
		o.SyncErr = fmt.Errorf("reading sources: %w", err)
		return ""
	}
	o.Sources, o.Skipped, o.Missing = len(sources.copyable), sources.skipped, sources.missing
	seen := sourcesSeen(rule.Generation, sources)
	fresh, only := r.rules.shape(key, seen, now)
	scopes := passScopes(fresh)
	if o.FreshOnly = only; only {
		scopes = scopes[:1]
	}
	var p plan
	var results []writeResult
	counted := false
	for _, s := range scopes {
		in, refused, err := r.observe(ctx, id, adopting(rule), o.Kind, o.ServiceAccount, sources.copyable, filter, s)
		if err != nil {
			o.SyncErr = err
			break
		}
		in.KnownForeign = knownForeign
		step := planCopies(in)
		if grows(step.Actions) && !counted {
			if err := r.rules.recount(ctx, key, r.copies, !o.FreshOnly); err != nil {
				o.SyncErr = err
				break
			}
			counted = true
		}
		adm := r.rules.admitCounted(key, step.Actions, r.Limits)
		results = append(results, r.writer.execute(ctx, id, adm.Actions)...)
		p = p.merge(step)
		o.Targets, o.Refused, o.Dropped = o.Targets+len(in.Targets), append(o.Refused, refused...), o.Dropped+adm.Dropped
		o.Limit = cmp.Or(o.Limit, adm.Limit)
	}
	*o = o.withWrites(p, results)
	return seen
}

// nextPass says when a rule's next pass is due without an event (0: never): a foreign
// name's recheck, and consent asked again (recheck when some refuse, refresh when it writes,
// deferred when some were not asked for want of budget).
func nextPass(conflictRecheck time.Duration, o outcome, recheck, refresh, deferred time.Duration) time.Duration {
	due := []time.Duration{conflictRecheck}
	if len(o.Refused) > 0 {
		due = append(due, recheck)
	}
	if slices.ContainsFunc(o.Refused, func(r refusal) bool { return r.Deferred }) {
		due = append(due, deferred)
	}
	if o.Targets > 0 {
		due = append(due, refresh)
	}
	if due = slices.DeleteFunc(due, func(d time.Duration) bool { return d == 0 }); len(due) == 0 {
		return 0
	}
	return slices.Min(due)
}

// reconcileDelete deletes (Delete) or releases (Retain) every copy of the rule, listed live
// (none the cache missed is left behind), then removes the finalizer.
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
	// Its own and those of no UID (written before LabelRuleUID); another UID's are the sweep's.
	copies = slices.DeleteFunc(copies, func(c copyState) bool { return claimedBy(idOf(rule), &c) == claimedStale })
	var retainIn map[string]bool
	if rule.Spec.DeletionPolicy == flantv1.DeletionPolicyRetain {
		if retainIn, err = r.consentingNamespaces(ctx, rule, copies); err != nil {
			return err
		}
	}
	o := outcome{}.withWrites(plan{}, r.writer.execute(ctx, idOf(rule), cleanupActions(copies, retainIn)))
	recordPass(key, o, nil)
	r.recordWrites(ctx, rule, o.Written, fmt.Sprintf(" (deletionPolicy %s)", rule.Spec.DeletionPolicy))
	if len(o.WriteErrs) > 0 {
		return fmt.Errorf("cleaning up %d copies failed: %s", len(o.WriteErrs), summarize(o.WriteErrs))
	}
	err = r.patchMetadata(ctx, rule, func(x *flantv1.CopyratorRule) { controllerutil.RemoveFinalizer(x, Finalizer) })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	r.forget(key)
	return nil
}

// liveCopies lists the metadata of every copy labelled with the rule, in the watched namespaces.
func (r *Reconciler) liveCopies(ctx context.Context, rule types.NamespacedName) ([]copyState, error) {
	namespaces := r.Namespaces.Watched
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var out []copyState
	for _, kind := range []string{kindConfigMap, kindSecret} {
		for _, ns := range namespaces {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
			if err := r.APIReader.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(ruleLabels(rule))); err != nil {
				return nil, fmt.Errorf("listing %s copies: %w", kind, err)
			}
			for i := range list.Items {
				c := stateOf(&list.Items[i])
				c.Key.Kind = kind // metadata alone does not tell
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// sweep deletes the copies, in the copy cache, that carry the name and a UID of a rule that
// does not exist (deleted without its finalizer, or never created): what a rule's cleanup
// would have deleted, in every namespace, consenting or not. The rule is looked up live
// first (the manager's cache may not have a rule just created). Copies of no UID (written
// before LabelRuleUID, or look-alikes) are left alone.
func (r *Reconciler) sweep(ctx context.Context, key types.NamespacedName) error {
	switch err := r.APIReader.Get(ctx, key, &flantv1.CopyratorRule{}); {
	case err == nil:
		return nil // it exists: its own pass comes
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading CopyratorRule %s before sweeping its copies: %w", key, err)
	}
	copies, err := r.copies.owned(ctx, key, everyNamespace)
	if err != nil {
		return err
	}
	gone := ruleID{NamespacedName: key}
	copies = slices.DeleteFunc(copies, func(c copyState) bool { return claimedBy(gone, &c) != claimedStale })
	o := outcome{}.withWrites(plan{}, r.writer.execute(ctx, gone, cleanupActions(copies, nil)))
	sweptTotal.Add(float64(len(o.Written[opDelete])))
	if len(o.WriteErrs) > 0 {
		return fmt.Errorf("sweeping %d copies of the deleted CopyratorRule %s failed: %s", len(o.WriteErrs), key, summarize(o.WriteErrs))
	}
	if n := len(o.Written[opDelete]); n > 0 {
		ctrl.LoggerFrom(ctx).Info("Swept the copies of a deleted CopyratorRule", "copies", n)
	}
	return nil
}

// consentingNamespaces returns "<kind>/<namespace>" of the copies' namespaces that still
// consent: Retain releases copies there only; nothing unconsented outlives the rule.
func (r *Reconciler) consentingNamespaces(ctx context.Context, rule *flantv1.CopyratorRule, copies []copyState) (map[string]bool, error) {
	byKind := map[string]sets.Set[string]{kindConfigMap: {}, kindSecret: {}}
	for _, c := range copies {
		byKind[c.Key.Kind].Insert(c.Key.Namespace)
	}
	out := map[string]bool{}
	for kind, nss := range byKind {
		var candidates []string
		for _, name := range sets.List(nss) {
			ns, err := r.namespace(ctx, name)
			if err != nil {
				return nil, err
			}
			if ns != nil && (!r.Protected.Has(name) || accepts(ns)) {
				candidates = append(candidates, name)
			}
		}
		yes, _, err := r.access.consenting(ctx, serviceAccountOf(rule), resourceOf(kind), candidates)
		if err != nil {
			return nil, fmt.Errorf("checking consent: %w", err)
		}
		for _, ns := range yes {
			out[kind+"/"+ns] = true
		}
	}
	return out, nil
}

func (r *Reconciler) patchMetadata(ctx context.Context, rule *flantv1.CopyratorRule, change func(*flantv1.CopyratorRule)) error {
	patch := client.MergeFromWithOptions(rule.DeepCopy(), client.MergeFromWithOptimisticLock{})
	change(rule)
	return r.Client.Patch(ctx, rule, patch)
}

// adopting reports whether the rule's pass treats copies of its name without a UID as its
// own (written before LabelRuleUID): until AnnotationCopiesCarryUID says they carry it.
func adopting(rule *flantv1.CopyratorRule) bool {
	return rule.Annotations[AnnotationCopiesCarryUID] != "true"
}

// forget drops what the controller keeps in memory about a rule that is gone.
func (r *Reconciler) forget(rule types.NamespacedName) {
	r.sources.forget(rule)
	r.rules.forget(rule)
	forgetMetrics(rule)
	var left flantv1.CopyratorRuleList
	if err := r.Client.List(context.Background(), &left, client.InNamespace(rule.Namespace), client.Limit(1)); err == nil && len(left.Items) == 0 {
		r.access.forget(rule.Namespace)
	}
}

// maxFreshNamespaces bounds the namespaces a pass plans before the others (beyond it one
// step over all reads no more than reading them one by one); maxFreshWait bounds how long
// namespaces that keep coming hold off a rule's full pass.
const maxFreshNamespaces, maxFreshWait = 32, time.Minute

// ruleStates is what the controller keeps per rule between passes (the "rules" row).
type ruleStates struct {
	// recheck is how long a foreign name is left alone before a create tries it again.
	recheck time.Duration
	mu      sync.Mutex
	rules   map[types.NamespacedName]*ruleState
	// all counts every copy for the limits (admitCounted), namespaces those of each
	// namespace's rules.
	all        tally
	namespaces map[string]tally
	// busy are the namespaces one of whose rules is in a pass, waiting the rules of theirs
	// that came meanwhile (in order), queue the controller's work queue that takes them.
	busy    map[string]bool
	waiting map[string][]types.NamespacedName
	queue   queue
}

type ruleState struct {
	// fresh are the namespaces whose events woke the rule since its last pass; since is
	// when the first of them came after its last full pass.
	fresh map[string]bool
	since time.Time
	// settled is what the rule's last full pass without error saw (sourcesSeen).
	settled string
	// foreign are names objects Copyrator did not create hold, and when a create found each.
	foreign map[copyKey]time.Time
	// copies counts the rule's copies for the limits, once counted (admitCounted).
	copies  tally
	counted bool
}

func newRuleStates(recheck time.Duration) *ruleStates {
	return &ruleStates{recheck: recheck, rules: map[types.NamespacedName]*ruleState{}, namespaces: map[string]tally{},
		busy: map[string]bool{}, waiting: map[string][]types.NamespacedName{}}
}

// setQueue is the controller source (source.Func) that hands over the work queue.
func (s *ruleStates) setQueue(_ context.Context, q queue) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = q
	return nil
}

// enter takes the namespace of rule for its pass, or notes the rule as waiting for it: a
// namespace's rules take one worker at a time, so one namespace with many rules slows its
// own rules, not the others' (BenchmarkHostileTenant).
func (s *ruleStates) enter(rule types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.busy[rule.Namespace] {
		s.busy[rule.Namespace] = true
		return true
	}
	if !slices.Contains(s.waiting[rule.Namespace], rule) {
		s.waiting[rule.Namespace] = append(s.waiting[rule.Namespace], rule)
	}
	return false
}

// leave ends a pass in namespace ns and queues the first rule of ns that waited.
func (s *ruleStates) leave(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.busy, ns)
	w := s.waiting[ns]
	if len(w) == 0 {
		return
	}
	if s.waiting[ns] = w[1:]; len(w) == 1 {
		delete(s.waiting, ns)
	}
	if s.queue != nil {
		s.queue.Add(reconcile.Request{NamespacedName: w[0]})
	}
}

// state returns the rule's state, made when missing. s.mu is held.
func (s *ruleStates) state(rule types.NamespacedName) *ruleState {
	if s.rules[rule] == nil {
		s.rules[rule] = &ruleState{fresh: map[string]bool{}}
	}
	return s.rules[rule]
}

// addFresh notes namespace ns for the rule's next pass, up to maxFreshNamespaces+1.
func (s *ruleStates) addFresh(rule types.NamespacedName, ns string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(rule)
	if len(st.fresh) <= maxFreshNamespaces {
		st.fresh[ns] = true
	}
	if st.since.IsZero() {
		st.since = now
	}
}

// shape takes the namespaces noted for the rule's pass (sorted; none past
// maxFreshNamespaces), which saw seen, and says whether it is fresh-only.
func (s *ruleStates) shape(rule types.NamespacedName, seen string, now time.Time) (fresh []string, only bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(rule)
	if len(st.fresh) <= maxFreshNamespaces {
		fresh = slices.Sorted(maps.Keys(st.fresh))
	}
	clear(st.fresh)
	if only = freshOnly(len(fresh), st.settled, seen, now.Sub(st.since)); !only {
		st.since = time.Time{}
	}
	return fresh, only
}

// freshOnly reports whether a pass writes only the copies of namespaces that just
// appeared (or changed labels), leaving the rest and the status to a full pass once none
// came for echoDelay: when there are such namespaces, the pass sees what the last full pass
// without error saw (sourcesSeen), and the first came less than maxFreshWait ago. A pass
// over every namespace, for every new one, held up the next (16–47 ms with 22,000
// namespaces). A copy changed or a recheck due meanwhile waits for the full pass.
func freshOnly(fresh int, settled, seen string, waited time.Duration) bool {
	return fresh > 0 && seen != "" && settled == seen && waited < maxFreshWait
}

// sourcesSeen identifies the rule's generation and sources as a pass saw them.
func sourcesSeen(generation int64, s sourceSet) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s", generation, strings.Join(s.skipped, ","), strings.Join(s.missing, ","))
	for _, src := range s.copyable {
		fmt.Fprintf(h, "\x00%s=%s/%s", src.Name, src.Hash, src.Carried.fingerprint())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// settle notes what a full pass saw (when it ended without error), and its foreign names.
func (s *ruleStates) settle(rule types.NamespacedName, o outcome, seen string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(rule)
	if st.settled = seen; o.err() != nil {
		st.settled = ""
	}
	if o.SyncErr != nil {
		return
	}
	foreign := map[copyKey]time.Time{}
	for _, c := range o.Conflicts {
		if at, known := st.foreign[c.Key]; c.Foreign && (!known || o.Checked[c.Key]) {
			foreign[c.Key] = now
		} else if c.Foreign {
			foreign[c.Key] = at
		}
	}
	st.foreign = foreign
}

// foreign returns the rule's foreign names checked less than recheck ago (reported
// without a create), and how long until the next is due (a second at least; 0: none).
func (s *ruleStates) foreign(rule types.NamespacedName, now time.Time) (known map[copyKey]bool, next time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	known = map[copyKey]bool{}
	for k, at := range s.state(rule).foreign {
		if now.Sub(at) < s.recheck {
			known[k] = true
		}
		if d := max(at.Add(s.recheck).Sub(now), time.Second); next == 0 || d < next {
			next = d
		}
	}
	return known, next
}

// recount counts the copies the copy cache holds for a full pass (or a first count).
func (s *ruleStates) recount(ctx context.Context, rule types.NamespacedName, copies copyReader, full bool) error {
	s.mu.Lock()
	counted := s.state(rule).counted
	s.mu.Unlock()
	if counted && !full {
		return nil
	}
	ruleCopies, namespace, all, err := copies.tallies(ctx, rule)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		st := s.state(rule)
		st.copies, st.counted, s.all = ruleCopies, true, all
		s.namespaces[rule.Namespace] = namespace
	}
	return err
}

// admitCounted admits the actions that fit the limits (admit), counting the copies as the
// last recount did (a scan that passes which add no copy, and fresh-only ones, spare) plus
// what passes admitted since: copies others deleted count until then, erring on the safe side.
func (s *ruleStates) admitCounted(rule types.NamespacedName, actions []action, l limits) admitted {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state(rule)
	adm := admit(actions, st.copies, s.namespaces[rule.Namespace], s.all, l)
	st.copies, s.all = st.copies.plus(adm.Grew), s.all.plus(adm.Grew)
	s.namespaces[rule.Namespace] = s.namespaces[rule.Namespace].plus(adm.Grew)
	return adm
}

func (s *ruleStates) forget(rule types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rules, rule)
	for other := range s.rules {
		if other.Namespace == rule.Namespace {
			return
		}
	}
	delete(s.namespaces, rule.Namespace)
}
