package copyratorrule

import (
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// namespaceFilter decides which namespaces a rule selects, and which of those are
// protected (they receive copies only when a cluster admin labelled them, see consent.go).
type namespaceFilter struct {
	rule      *flantv1.CopyratorRule
	selector  labels.Selector // nil when the rule has no namespaceSelector
	watches   func(string) bool
	protected sets.Set[string]
}

// newNamespaceFilter compiles the rule's namespace choice. An invalid namespaceSelector is
// the user's mistake and returned as an error.
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

// selects reports whether the rule wants copies in namespace ns (its metadata): it is not
// the rule's own namespace, it is watched, active (not terminating), not opted out, and
// chosen by spec.namespaces or spec.namespaceSelector when either is set. Whether it
// consents is decided afterwards (refusedAsProtected, then RBAC).
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

// refusedAsProtected reports whether namespace ns is protected and not opted in.
func (f namespaceFilter) refusedAsProtected(ns metav1.Object) bool {
	return f.protected.Has(ns.GetName()) && !accepts(ns)
}

// scope is the part of the namespaces one step of a pass plans: the named namespaces, or
// (rest) every namespace but the named ones. A pass plans namespaces that just appeared
// first and the rest after; planCopies treats namespaces independently, so the two steps
// together plan what one step over every namespace would.
type scope struct {
	namespaces map[string]bool
	rest       bool
}

// everyNamespace is the scope of a pass in one step.
var everyNamespace = scope{rest: true}

// freshOnly reports whether a pass writes only the copies of the namespaces that just
// appeared (or whose labels changed) and leaves every other namespace, the status and the
// gauges to a full pass echoDelay later. That holds when such namespaces are all that woke
// the rule: there are some, the spec is the one the last successful pass acted on, and
// nothing asked for a full pass (fullPasses). A pass over every namespace reads all of the
// cluster's namespace metadata and writes the status; done for every new namespace, it
// held up the next one (measured: 16–47 ms per pass with more than 22,000 namespaces).
// Whatever else happened meanwhile (a namespace deleted, a conflict's recheck due, the
// echo of a write) is seen by that full pass, at most echoDelay later.
func freshOnly(fresh []string, generation, observedGeneration int64, fullWanted bool) bool {
	return len(fresh) > 0 && generation == observedGeneration && !fullWanted
}

// nextPass says when a rule's next pass is due without any event: when its earliest
// foreign conflict is due for a recheck (conflictRecheck, 0 for none); when refusing
// namespaces are asked again (recheck), so that a new RoleBinding takes effect; when the
// consent of the namespaces it writes to is asked again (refresh), so that a revoked one
// takes effect. 0: no pass is due.
func nextPass(conflictRecheck time.Duration, o outcome, recheck, refresh time.Duration) time.Duration {
	next := conflictRecheck
	sooner := func(d time.Duration) {
		if next == 0 || d < next {
			next = d
		}
	}
	if len(o.Refused) > 0 {
		sooner(recheck)
	}
	if o.Targets > 0 {
		sooner(refresh)
	}
	return next
}

// passScopes returns the steps of a pass: the fresh namespaces first, then the rest; or one
// step over every namespace when there are none.
func passScopes(fresh []string) []scope {
	if len(fresh) == 0 {
		return []scope{everyNamespace}
	}
	named := make(map[string]bool, len(fresh))
	for _, ns := range fresh {
		named[ns] = true
	}
	return []scope{{namespaces: named}, {namespaces: named, rest: true}}
}

// covers reports whether namespace ns is in the scope.
func (s scope) covers(ns string) bool { return s.namespaces[ns] != s.rest }

// selectTargets returns the namespaces in scope that the rule selects and that are not
// protected (sorted: candidates for copies, if RBAC agrees), the protected ones it selects
// (refused), and the terminating ones (whose copies the namespace deletion removes;
// Copyrator leaves them alone).
func selectTargets(f namespaceFilter, s scope, namespaces []metav1.PartialObjectMetadata) (candidates []string, protected []refusal, terminating map[string]bool) {
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
		case f.refusedAsProtected(ns):
			protected = append(protected, protectedRefusal(ns.Name))
		default:
			candidates = append(candidates, ns.Name)
		}
	}
	sort.Strings(candidates)
	sort.Slice(protected, func(i, j int) bool { return protected[i].Namespace < protected[j].Namespace })
	return candidates, protected, terminating
}

// copyState is what the copy cache knows about an existing copy.
type copyState struct {
	Key copyKey
	UID types.UID
	// ResourceVersion of the copy as read: deletes are conditional on it.
	ResourceVersion string
	Rule            types.NamespacedName // from the copy's labels
	Source          string               // AnnotationSource
	WrittenAs       string               // AnnotationContentHash
	Hash            string               // hash of the content the copy really has
	Size            int64                // bytes of content the copy really has
	Type            corev1.SecretType
	Immutable       bool
	// HasAnnotations says whether the copy has an annotations map (JSON patches differ).
	HasAnnotations bool
	// Carried is the fingerprint of the labels and annotations the copy carries from its
	// source (copyCarriedFingerprint).
	Carried string
	// Labels and Annotations are the copy's, as read (from the cache: never to be changed).
	Labels      map[string]string
	Annotations map[string]string
}

// op is what the planner decides for one copy.
type op string

const (
	opCreate   op = "create"
	opUpdate   op = "update"
	opRecreate op = "recreate" // delete and create: Secret type or an immutable copy changed
	opDelete   op = "delete"
	opRelease  op = "release" // strip Copyrator's labels (deletionPolicy Retain)
)

// action is one write.
type action struct {
	Op       op
	Key      copyKey
	Source   *source    // nil for opDelete
	Existing *copyState // nil for opCreate
}

// conflict is a target object left alone.
type conflict struct {
	Key    copyKey
	Reason string
	// Foreign is true for objects Copyrator did not create (found by a failed create and
	// rechecked after a while), false for another rule's copy (seen in the copy cache).
	Foreign bool
}

// planInput is everything the planner looks at.
type planInput struct {
	Rule        types.NamespacedName
	Kind        string // kind the rule copies
	Sources     []source
	Targets     []string
	Terminating map[string]bool
	// Frozen are selected namespaces that RBAC refuses: copies already there (made before
	// consent was withdrawn, or by Quartet 0.2) are left as they are, neither updated nor
	// removed, except copies of a Secret type that is never copied.
	Frozen map[string]bool
	// Owned are the copies labelled with this rule, of any kind and namespace.
	Owned []copyState
	// Occupied are copies of other rules found at keys this rule wants.
	Occupied map[copyKey]copyState
	// KnownForeign are keys where a recent create failed because an object Copyrator did
	// not create has the name.
	KnownForeign map[copyKey]bool
}

// plan is the planner's answer.
type plan struct {
	Actions   []action
	Conflicts []conflict
	// Desired is the number of copies the rule wants (sources × targets).
	Desired int
	// InSync is the number of copies that already match their source.
	InSync int
	// Frozen is the number of copies left as they are in Frozen namespaces.
	Frozen int
}

// planCopies compares sources × targets with the existing copies and returns the writes
// that make them equal, and the conflicts to report. It never plans a write to an object
// this rule does not own.
func planCopies(in planInput) plan {
	var p plan
	owned := make(map[copyKey]*copyState, len(in.Owned))
	for i := range in.Owned {
		owned[in.Owned[i].Key] = &in.Owned[i]
	}
	wanted := make(map[copyKey]bool, len(in.Sources)*len(in.Targets))
	for _, ns := range in.Targets {
		for i := range in.Sources {
			src := &in.Sources[i]
			key := copyKey{Kind: in.Kind, Namespace: ns, Name: src.Name}
			wanted[key] = true
			p.Desired++
			if existing, ok := owned[key]; ok {
				switch {
				case copyInSync(in.Rule, existing, src):
					p.InSync++
				case needsRecreate(existing, src):
					p.Actions = append(p.Actions, action{Op: opRecreate, Key: key, Source: src, Existing: existing})
				default:
					p.Actions = append(p.Actions, action{Op: opUpdate, Key: key, Source: src, Existing: existing})
				}
				continue
			}
			if other, ok := in.Occupied[key]; ok {
				p.Conflicts = append(p.Conflicts, conflict{Key: key, Foreign: false,
					Reason: fmt.Sprintf("%s: copy of CopyratorRule %s", flantv1.ConflictReasonManagedByOtherRule, other.Rule)})
				continue
			}
			if in.KnownForeign[key] {
				p.Conflicts = append(p.Conflicts, conflict{Key: key, Foreign: true,
					Reason: flantv1.ConflictReasonExistsNotManaged + ": an object Copyrator did not create has this name"})
				continue
			}
			p.Actions = append(p.Actions, action{Op: opCreate, Key: key, Source: src})
		}
	}
	for i := range in.Owned {
		c := &in.Owned[i]
		switch {
		case wanted[c.Key], in.Terminating[c.Key.Namespace]:
		case in.Frozen[c.Key.Namespace] && !forbiddenType(c.Type):
			p.Frozen++
		default:
			p.Actions = append(p.Actions, action{Op: opDelete, Key: c.Key, Existing: c})
		}
	}
	sort.SliceStable(p.Actions, func(i, j int) bool { return lessKey(p.Actions[i].Key, p.Actions[j].Key) })
	sort.Slice(p.Conflicts, func(i, j int) bool { return lessKey(p.Conflicts[i].Key, p.Conflicts[j].Key) })
	return p
}

// merge returns the plan of two steps of a pass over disjoint namespaces.
func (p plan) merge(q plan) plan {
	m := plan{Desired: p.Desired + q.Desired, InSync: p.InSync + q.InSync, Frozen: p.Frozen + q.Frozen}
	m.Actions = append(slices.Clone(p.Actions), q.Actions...)
	m.Conflicts = append(slices.Clone(p.Conflicts), q.Conflicts...)
	sort.SliceStable(m.Actions, func(i, j int) bool { return lessKey(m.Actions[i].Key, m.Actions[j].Key) })
	sort.Slice(m.Conflicts, func(i, j int) bool { return lessKey(m.Conflicts[i].Key, m.Conflicts[j].Key) })
	return m
}

// cleanupActions returns the writes that clean up a deleted rule's copies: release the
// copies whose "<kind>/<namespace>" is in retainIn (deletionPolicy Retain: the namespaces
// that still consent to that kind), delete every other one. A copy of a Secret type that is never copied is
// always deleted.
func cleanupActions(copies []copyState, retainIn map[string]bool) []action {
	actions := make([]action, 0, len(copies))
	for i := range copies {
		o := opDelete
		if retainIn[copies[i].Key.Kind+"/"+copies[i].Key.Namespace] && !forbiddenType(copies[i].Type) {
			o = opRelease
		}
		actions = append(actions, action{Op: o, Key: copies[i].Key, Existing: &copies[i]})
	}
	return actions
}

// copyInSync reports whether a copy has the content the rule's view of its source keeps,
// Copyrator's annotations, and the labels and annotations it carries from the source.
func copyInSync(rule types.NamespacedName, c *copyState, src *source) bool {
	return c.Hash == src.Hash && c.WrittenAs == src.Hash && c.Source == rule.Namespace+"/"+src.Name &&
		c.Carried == src.Carried.fingerprint()
}

// needsRecreate reports whether a copy cannot be patched into the desired one: a Secret's
// type never changes, and an immutable copy's content never does.
func needsRecreate(c *copyState, src *source) bool {
	if c.Key.Kind == kindSecret && c.Type != src.Type {
		return true
	}
	return c.Immutable && c.Hash != src.Hash
}

func lessKey(a, b copyKey) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.Kind < b.Kind
}
