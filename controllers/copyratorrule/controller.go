// Package copyratorrule implements the CopyratorRule controller: it copies the ConfigMaps
// or Secrets of a rule's namespace that match the rule's labels into other namespaces and
// keeps the copies equal to their sources.
package copyratorrule

import (
	"context"
	"errors"
	"fmt"

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

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// +kubebuilder:rbac:groups=flant.com,resources=copyrators,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=flant.com,resources=copyrators/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// Reconciler reconciles CopyratorRules.
//
// # In-memory state
//
// What the controller keeps in process memory from one pass to the next (docs/STYLE.md, "In-memory
// state"); everything else a pass reads from the API server or a cache of it. A restart or a change
// of leader loses all of it; the fifth column says what that costs and how the next passes recover.
// A new piece of such memory needs a row here.
//
//	memory             | holds                      | written by             | read by                  | restart, leader change           | protects
//	-------------------+----------------------------+------------------------+--------------------------+----------------------------------+-----------------------
//	sources            | one metadata-only informer | ensure, from           | sourceWatcher.sources (a | lost; the rules' first list      | correctness: a changed
//	(*sourceWatcher):  | per namespace and kind     | sourceWatcher.sources  | rule's sources come from | wakes every rule, and its first  | source must wake its
//	informers, rules   | that rules copy from, the  | in every pass; leave   | the informer's store);   | pass calls ensure, which starts  | rules; re-derived by
//	                   | rules that use each        | and forget             | changed (a source's      | the informer again and waits for | each rule's first pass
//	                   | (picker and view), and the | (Reconciler.forget)    | event marks full and     | its first list; sources changed  |
//	                   | work queue (setQueue)      |                        | wakes the rules that     | meanwhile are in that list       |
//	                   |                            |                        | pick it)                 |                                  |
//	                   |                            |                        |                          |                                  |
//	sources.contents   | per source UID: hash,      | sourceOf, after a GET; | sourceOf; loadBodies     | lost; the first pass reads each  | work; latency: a pass
//	(sync.Map)         | size, type and             | the informer's         | (the body)               | source once more (one GET each)  | for a new namespace
//	                   | immutability of one        | DeleteFunc and leave   |                          |                                  | writes its copies
//	                   | resourceVersion's content, | drop it                |                          |                                  | without reading the
//	                   | per view, and that         |                        |                          |                                  | source
//	                   | version's body             |                        |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	copies             | Copyrator's copies in the  | its informers (a       | copyReader.owned and     | rebuilt from a fresh list; the   | correctness: which
//	(copyReader, the   | watched namespaces         | manager Runnable,      | occupied (observe);      | workers start after the          | copies exist and what
//	copy cache of      | (label-selected), bodies   | Setup)                 | copyEvents, through the  | controller's watches of it have  | they hold; re-derived
//	newCopyCache)      | replaced by a hash and a   |                        | controller's watches     | synced                           | from the API server
//	                   | size (stripBody), indexed  |                        |                          |                                  |
//	                   | by rule                    |                        |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	ledger             | copies and their bytes,    | the copy cache's event | tallies, for admit       | rebuilt from the copy cache's    | correctness: the
//	                   | per rule and in all        | handlers (setFrom,     | (reconcileCopies)        | first list (its Add events); the | limits on copies
//	                   |                            | removeFrom;            |                          | workers wait for the             | (--copyratorrule-max-*
//	                   |                            | newCopyCache)          |                          | controller's own handlers of     | flags); re-derived
//	                   |                            |                        |                          | that cache to sync, not for      | from the copy cache
//	                   |                            |                        |                          | these                            |
//	                   |                            |                        |                          |                                  |
//	memo               | per rule, the names it     | update, after a pass   | knownForeign (no create  | lost; the first pass tries each  | work and Events;
//	(*conflictMemo)    | wants that someone else    | that was full and read | is tried again before    | foreign name again (one refused  | latency: without byKey
//	                   | holds (another rule's      | everything; forget     | conflictRecheck);        | create each) and sends each      | a freed name is taken
//	                   | copy, or a foreign object) |                        | nextRecheck (Reconcile's | conflict's Warning Event again;  | at the rule's next
//	                   | and when each foreign one  |                        | RequeueAfter); update's  | until a rule's first pass        | timed pass (consent
//	                   | was last checked; byKey,   |                        | result, for              | nothing wakes it when a wanted   | refresh)
//	                   | the rules wanting each     |                        | recordConflicts (one     | name is freed, and that pass     |
//	                   | name                       |                        | Warning Event per new    | comes after every start anyway   |
//	                   |                            |                        | conflict); rulesWanting  |                                  |
//	                   |                            |                        | (copyEvents wakes them   |                                  |
//	                   |                            |                        | when the name is freed)  |                                  |
//	                   |                            |                        |                          |                                  |
//	fresh              | per rule, up to            | namespaceEvents (add), | reconcileCopies (take):  | lost; each rule's first pass     | latency: a new
//	(*freshNamespaces) | maxFreshNamespaces         | not for the Namespace  | passScopes plans them    | then covers every namespace in   | namespace gets its
//	                   | namespaces whose creation  | informer's first list; | first; freshOnly         | one step                         | copies before the look
//	                   | or label change woke it    | forget                 |                          |                                  | at all the others
//	                   | since its last pass        |                        |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	full (*fullPasses) | rules whose next pass must | sourceWatcher.changed; | reconcileCopies (take),  | lost; a pass that would have     | latency
//	                   | cover every namespace      | copyEvents (someone    | for freshOnly            | been full can be fresh-only, and |
//	                   | although fresh namespaces  | else's change or       |                          | a fresh-only pass requeues the   |
//	                   | woke it                    | deletion of a copy, a  |                          | full one after echoDelay (1 s)   |
//	                   |                            | freed name);           |                          |                                  |
//	                   |                            | Reconcile, after a     |                          |                                  |
//	                   |                            | failed pass; forget    |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	statuses           | operator.StatusMemory:     | writeStatus (Wrote);   | Reconcile's deferred     | lost; a new process's cache      | work: no second write
//	                   | each rule as the API       | forget                 | status (Latest):         | starts from a fresh list; a      | of the same status, no
//	                   | server returned it from    |                        | computeStatus,           | stale read at worst costs a      | repeated Events
//	                   | this process's last status |                        | recordRefusals and       | conflict and a re-read           |
//	                   | write                      |                        | recordLimit compare with | (operator.WriteStatus)           |
//	                   |                            |                        | it                       |                                  |
//	                   |                            |                        |                          |                                  |
//	access             | SubjectAccessReview        | mayCreate              | mayCreate, from          | lost; the first passes ask again | work: fewer
//	(*accessReviewer): | answers per                |                        | consenting (observe,     |                                  | SubjectAccessReviews;
//	answers            | ServiceAccount, kind and   |                        | consentingNamespaces)    |                                  | the TTLs bound how
//	                   | namespace ("" for all),    |                        |                          |                                  | late a new or revoked
//	                   | granted ones for           |                        |                          |                                  | consent acts, and a
//	                   | ConsentRefresh, refused    |                        |                          |                                  | restart only shortens
//	                   | ones for ConsentRecheck    |                        |                          |                                  | that
//	                   | (LRU, maxAccessAnswers)    |                        |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	writer.own         | per copy, the state the    | writer.do (expect      | copyEvents (echo): the   | lost; the echo of a write made   | work
//	(*ownWrites)       | writer is writing or last  | before a create or     | event of the             | before the start looks like      |
//	                   | wrote there, until the     | update, forget when it | controller's own write   | someone else's change: a full    |
//	                   | copy cache reports the     | failed); copyEvents'   | wakes the owner after    | pass at once instead of a        |
//	                   | copy                       | DeleteFunc (forget)    | echoDelay, without a     | delayed one                      |
//	                   |                            |                        | full mark                |                                  |
//
// Not in the table: the rules and the Namespace metadata in the manager's shared cache; the
// Prometheus series (forgetMetrics); the work queue's timers (nextPass, echoDelay), which every
// pass sets again; configuration (Limits, Protected, Shared, Clock). forget drops a deleted rule
// from sources, memo, fresh, full and statuses; the ledger and writer.own follow the copy cache's
// events instead.
type Reconciler struct {
	// Client reads rules and namespace metadata from the manager's cache and writes.
	Client client.Client
	// APIReader reads past the caches: a rule again when a status write conflicts, and the
	// copies of a rule being deleted (liveCopies).
	APIReader client.Reader
	// Recorder sends the Events about rules.
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Shared   operator.Shared
	// Protected are the namespaces that need LabelAcceptCopies besides RBAC's consent.
	Protected sets.Set[string]
	// Limits bound the copies; ledger counts those that exist.
	Limits limits

	copies  copyReader
	sources *sourceWatcher
	memo    *conflictMemo
	// fresh are the namespaces each rule's next pass writes first.
	fresh *freshNamespaces
	// full are the rules whose next pass must look at every namespace.
	full *fullPasses
	// statuses is the rule as the API server returned it from this process's last status
	// write, for the passes whose cache does not show that write yet.
	statuses operator.StatusMemory[*flantv1.CopyratorRule]
	// access asks whether a rule's ServiceAccount may create copies in a namespace.
	access *accessReviewer
	ledger *ledger
	writer writer
}

// Reconcile makes the copies of one rule equal to its sources.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	rule := &flantv1.CopyratorRule{}
	if err := r.Client.Get(ctx, req.NamespacedName, rule); err != nil {
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

	var o outcome
	defer func() {
		if !o.FreshOnly {
			// The status as the API server has it, when the cache is behind this process's
			// last write of it: comparing with the older cached status would write it again.
			current := r.statuses.Latest(rule)
			now := metav1.NewTime(r.Clock.Now())
			status := computeStatus(current.Status, o, now)
			r.recordRefusals(ctx, rule, current.Status, status)
			r.recordLimit(rule, current.Status, status)
			err = errors.Join(err, r.writeStatus(ctx, current, o, now))
		}
		if err != nil {
			r.full.mark(req.NamespacedName)
		}
	}()
	o = r.reconcileCopies(ctx, rule)
	switch {
	case o.SyncErr != nil:
		return ctrl.Result{}, o.SyncErr
	case len(o.WriteErrs) > 0:
		return ctrl.Result{}, fmt.Errorf("%d writes failed: %s", len(o.WriteErrs), summarize(o.WriteErrs))
	case o.FreshOnly:
		// The full pass that looks at everything else and writes the status. Its time
		// replaces a later one already queued (a conflict's recheck), which it then sets again.
		return ctrl.Result{RequeueAfter: echoDelay}, nil
	}
	return ctrl.Result{RequeueAfter: nextPass(r.memo.nextRecheck(req.NamespacedName, r.Clock.Now()), o, r.access.recheck, r.access.refresh)}, nil
}

// reconcileCopies reads the rule's sources, targets and copies, plans and writes the
// copies, and reports what it did in Events and metrics. Namespaces that just appeared (or
// whose labels changed) are read, planned and written first, then every other namespace:
// a new namespace gets its copies without waiting for a look at thousands of others, and
// the pass still covers all of them, unless those namespaces were all that woke the rule
// (freshOnly): then the pass ends after them. A spec mistake or a failed read ends the
// pass (after the first step's writes, if any, which are reported).
func (r *Reconciler) reconcileCopies(ctx context.Context, rule *flantv1.CopyratorRule) outcome {
	key := client.ObjectKeyFromObject(rule)
	o := outcome{Generation: rule.Generation, Namespace: rule.Namespace, Kind: ruleKind(rule.Spec.RuleType)}
	filter, err := newNamespaceFilter(rule, r.Shared.Watches, r.Protected)
	if err != nil {
		o.SpecErr = err
		return o
	}
	o.ServiceAccount = serviceAccountOf(rule)
	v := viewOf(rule.Spec)
	sources, err := r.sources.sources(ctx, rule, v, r.writer.parallelism)
	if err != nil {
		o.SyncErr = fmt.Errorf("reading sources: %w", err)
		return o
	}
	now := r.Clock.Now()
	knownForeign := r.memo.knownForeign(key, now)
	var p plan
	var results []writeResult
	fresh := r.fresh.take(key)
	scopes := passScopes(fresh)
	if freshOnly(fresh, rule.Generation, rule.Status.ObservedGeneration, r.full.take(key)) {
		scopes, o.FreshOnly = scopes[:1], true
	}
	for _, s := range scopes {
		in, refused, err := r.observe(ctx, key, o.Kind, o.ServiceAccount, sources.copyable, filter, s)
		if err != nil {
			o.SyncErr = err
			break
		}
		in.KnownForeign = knownForeign
		step := planCopies(in)
		ruleTally, all := r.ledger.tallies(key)
		adm := admit(step.Actions, ruleTally, all, r.Limits)
		o.Dropped += adm.Dropped
		if o.Limit == "" {
			o.Limit = adm.Limit
		}
		actions, err := r.sources.loadBodies(ctx, rule.Namespace, o.Kind, v, adm.Actions, r.writer.parallelism)
		if err != nil {
			o.SyncErr = fmt.Errorf("reading sources: %w", err)
			break
		}
		results = append(results, r.writer.execute(ctx, key, actions)...)
		p = p.merge(step)
		o.Targets += len(in.Targets)
		o.Refused = append(o.Refused, refused...)
	}

	o.Sources = len(sources.copyable)
	o.Skipped = sources.skipped
	o.Missing = sources.missing
	o = o.withWrites(p, results)
	r.recordWrites(ctx, rule, o.Written)
	if o.SyncErr == nil && !o.FreshOnly {
		fresh := r.memo.update(key, o.Conflicts, o.Checked, now)
		r.recordConflicts(ctx, rule, fresh)
	}
	recordPass(key, o)
	return o
}

// observe reads what the planner looks at in the namespaces in scope: the namespaces
// that consent to the rule's copies (its targets) and those that refuse, its copies, and
// other rules' copies at the names it wants.
func (r *Reconciler) observe(ctx context.Context, rule types.NamespacedName, kind string, sa serviceAccountRef,
	sources []source, filter namespaceFilter, s scope) (planInput, []refusal, error) {
	in := planInput{Rule: rule, Kind: kind, Sources: sources}
	candidates, refused, terminating, err := r.targetNamespaces(ctx, filter, s)
	if err != nil {
		return in, nil, err
	}
	in.Terminating = terminating
	targets, denied, err := r.access.consenting(ctx, sa, resourceOf(kind), candidates)
	if err != nil {
		return in, nil, fmt.Errorf("checking consent: %w", err)
	}
	in.Targets = targets
	in.Frozen = map[string]bool{}
	for _, d := range denied {
		in.Frozen[d.Namespace] = true
	}
	refused = append(refused, denied...)
	if in.Owned, err = r.copies.owned(ctx, rule, s); err != nil {
		return in, nil, err
	}
	if in.Occupied, err = r.copies.occupied(ctx, rule, kind, in.Targets, in.Sources, in.Owned); err != nil {
		return in, nil, err
	}
	return in, refused, nil
}

// targetNamespaces reads namespace metadata from the cache, one by one when the scope
// names the namespaces, otherwise in a list, and picks the namespaces in scope the rule
// selects (see selectTargets).
func (r *Reconciler) targetNamespaces(ctx context.Context, f namespaceFilter, s scope) ([]string, []refusal, map[string]bool, error) {
	var namespaces []metav1.PartialObjectMetadata
	if s.rest {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		// Read-only: the cached objects are not copied (a pass reads every namespace).
		if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, nil, nil, fmt.Errorf("listing namespaces: %w", err)
		}
		namespaces = list.Items
	} else {
		for name := range s.namespaces {
			ns := metav1.PartialObjectMetadata{}
			ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
			switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &ns); {
			case apierrors.IsNotFound(err):
				continue // gone: copies left in it are planned like those of any vanished namespace
			case err != nil:
				return nil, nil, nil, fmt.Errorf("reading namespace %s: %w", name, err)
			}
			namespaces = append(namespaces, ns)
		}
	}
	candidates, protected, terminating := selectTargets(f, s, namespaces)
	return candidates, protected, terminating, nil
}

// writeStatus writes the status computeStatus makes of o, when it changed
// (operator.WriteStatus: a conflict applies o again to the rule read past the cache), and
// remembers the write for the next pass (r.statuses). A rule deleted meanwhile is not an
// error.
func (r *Reconciler) writeStatus(ctx context.Context, rule *flantv1.CopyratorRule, o outcome, now metav1.Time) error {
	written, err := operator.WriteStatus(ctx, r.Client, r.APIReader, rule, func(x *flantv1.CopyratorRule) {
		x.Status = computeStatus(x.Status, o, now)
	})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("writing status: %w", err)
	case written != "":
		r.statuses.Wrote(rule)
	}
	return nil
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
	var retainIn map[string]bool
	if rule.Spec.DeletionPolicy == flantv1.DeletionPolicyRetain {
		if retainIn, err = r.consentingNamespaces(ctx, rule, copies); err != nil {
			return err
		}
	}
	actions := cleanupActions(copies, retainIn)
	results := r.writer.execute(ctx, key, actions)
	errs := writeErrors(results)
	done := map[op]int{}
	for _, wr := range results {
		if wr.Err == nil {
			done[wr.Action.Op]++
		}
	}
	for o, n := range done {
		countCopies(key, writeActions[o], n)
	}
	r.recordCleanup(ctx, rule, done[opDelete], done[opRelease])
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
	namespaces := r.Shared.WatchNamespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var out []copyState
	for _, kind := range []string{kindConfigMap, kindSecret} {
		for _, ns := range namespaces {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
			if err := r.APIReader.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(copyLabels(rule))); err != nil {
				return nil, fmt.Errorf("listing %s copies: %w", kind, err)
			}
			for _, m := range list.Items {
				out = append(out, copyState{Key: copyKey{Kind: kind, Namespace: m.Namespace, Name: m.Name},
					UID: m.UID, ResourceVersion: m.ResourceVersion, Rule: rule, Annotations: m.Annotations})
			}
		}
	}
	return out, nil
}

// consentingNamespaces returns "<kind>/<namespace>" of the copies' namespaces where the
// rule may still write that kind:
// there a Retain policy releases its copies; elsewhere they are deleted, so that nothing a
// namespace did not consent to outlives the rule without a trace.
func (r *Reconciler) consentingNamespaces(ctx context.Context, rule *flantv1.CopyratorRule, copies []copyState) (map[string]bool, error) {
	byKind := map[string]sets.Set[string]{}
	for _, c := range copies {
		if byKind[c.Key.Kind] == nil {
			byKind[c.Key.Kind] = sets.New[string]()
		}
		byKind[c.Key.Kind].Insert(c.Key.Namespace)
	}
	out := map[string]bool{}
	for kind, nss := range byKind {
		var candidates []string
		for _, name := range sets.List(nss) {
			ns := metav1.PartialObjectMetadata{}
			ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
			switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &ns); {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("reading namespace %s: %w", name, err)
			}
			if r.Protected.Has(name) && !accepts(&ns) {
				continue
			}
			candidates = append(candidates, name)
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

type finalizerFunc func(client.Object, string) bool

// patchFinalizer adds or removes the finalizer with an optimistic lock, so a finalizer
// someone else changes at the same moment is not lost.
func (r *Reconciler) patchFinalizer(ctx context.Context, rule *flantv1.CopyratorRule, change finalizerFunc) error {
	patch := client.MergeFromWithOptions(rule.DeepCopy(), client.MergeFromWithOptimisticLock{})
	change(rule, Finalizer)
	return r.Client.Patch(ctx, rule, patch)
}

// forget drops what the controller keeps in memory about a rule that is gone.
func (r *Reconciler) forget(rule types.NamespacedName) {
	r.sources.forget(rule)
	r.memo.forget(rule)
	r.fresh.forget(rule)
	r.full.forget(rule)
	r.statuses.Forget(rule)
	forgetMetrics(rule)
}
