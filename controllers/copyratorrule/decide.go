package copyratorrule

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// copyState is what the copy cache knows about an existing copy.
type copyState struct {
	Key             copyKey
	UID             types.UID
	ResourceVersion string               // as read: deletes are conditional on it
	Rule            types.NamespacedName // from the copy's labels
	RuleUID         string               // LabelRuleUID; "" on copies written before it
	Source          string               // AnnotationSource
	WrittenAs       string               // AnnotationContentHash
	Hash            string               // hash of the content the copy really has
	Size            int64                // bytes of content the copy really has
	Type            corev1.SecretType
	Immutable       bool
	HasAnnotations  bool   // an annotations map (JSON patches differ)
	Carried         string // copyCarriedFingerprint
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

// conflict is a target object left alone: another rule's copy, or Foreign (not Copyrator's).
type conflict struct {
	Key     copyKey
	Reason  string
	Foreign bool
}

// planInput is everything the planner looks at.
type planInput struct {
	Rule        ruleID
	Kind        string // kind the rule copies
	Sources     []source
	Targets     []string
	Terminating map[string]bool
	// Frozen are selected namespaces RBAC refuses: copies there are left as they are, unless
	// of a Secret type never copied.
	Frozen map[string]bool
	// Owned are the copies labelled with this rule's name, of any kind and namespace
	// (claimedBy says what each is to it).
	Owned []copyState
	// Occupied are copies of other rules found at keys this rule wants.
	Occupied map[copyKey]copyState
	// KnownForeign are keys a recent create found held by an object Copyrator did not create.
	KnownForeign map[copyKey]bool
}

// plan is the writes, the conflicts, and how many copies are wanted, in sync and Frozen
// (Unadopted: of those, written before LabelRuleUID).
type plan struct {
	Actions                            []action
	Conflicts                          []conflict
	Desired, InSync, Frozen, Unadopted int
}

// planCopies compares sources × targets with the existing copies and returns the writes
// that make them equal, and the conflicts; never a write to an object the rule does not own.
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
			existing, own := owned[key]
			other, occupied := in.Occupied[key]
			switch {
			case own && copyInSync(in.Rule, existing, src): // never a stale one: another UID
				p.InSync++
			case own && (claimedBy(in.Rule, existing) == claimedStale || needsRecreate(existing, src)):
				// A stale one (another rule's of this name, deleted since) is re-created as this rule's.
				p.Actions = append(p.Actions, action{Op: opRecreate, Key: key, Source: src, Existing: existing})
			case own:
				p.Actions = append(p.Actions, action{Op: opUpdate, Key: key, Source: src, Existing: existing})
			case occupied && other.Rule != in.Rule.NamespacedName:
				p.Conflicts = append(p.Conflicts, otherRuleConflict(key, other.Rule))
			case occupied || in.KnownForeign[key]: // occupied: of its name, no UID, not written by it
				p.Conflicts = append(p.Conflicts, foreignConflict(key))
			default:
				p.Actions = append(p.Actions, action{Op: opCreate, Key: key, Source: src})
			}
		}
	}
	for _, c := range owned {
		switch {
		case wanted[c.Key], in.Terminating[c.Key.Namespace]:
		case in.Frozen[c.Key.Namespace] && !forbiddenType(c.Type) && claimedBy(in.Rule, c) != claimedStale:
			p.Frozen++
			if claimedBy(in.Rule, c) == claimedLegacy {
				p.Unadopted++
			}
		default:
			p.Actions = append(p.Actions, action{Op: opDelete, Key: c.Key, Existing: c})
		}
	}
	return p.sorted()
}

// claim is what a copy labelled with a rule's name is to that rule.
type claim int

const (
	// claimedOwn: the rule's UID: its copy.
	claimedOwn claim = iota
	// claimedLegacy: no UID label: written before LabelRuleUID, the rule's own until its
	// first full pass adopted them (the update adds its UID; AnnotationCopiesCarryUID);
	// afterwards a look-alike, which observe leaves out.
	claimedLegacy
	// claimedStale: another UID: written for a rule of this name that is gone; re-created
	// where the rule wants a copy, deleted elsewhere (the sweep of a rule's earlier life).
	claimedStale
)

// claimedBy says what copy c, labelled with rule's name, is to the rule.
func claimedBy(rule ruleID, c *copyState) claim {
	switch c.RuleUID {
	case string(rule.UID):
		return claimedOwn
	case "":
		return claimedLegacy
	}
	return claimedStale
}

func (p plan) sorted() plan {
	sort.SliceStable(p.Actions, func(i, j int) bool { return lessKey(p.Actions[i].Key, p.Actions[j].Key) })
	sort.Slice(p.Conflicts, func(i, j int) bool { return lessKey(p.Conflicts[i].Key, p.Conflicts[j].Key) })
	return p
}

func otherRuleConflict(key copyKey, owner types.NamespacedName) conflict {
	return conflict{Key: key, Reason: fmt.Sprintf("%s: copy of CopyratorRule %s", flantv1.ConflictReasonManagedByOtherRule, owner)}
}

func foreignConflict(key copyKey) conflict {
	return conflict{Key: key, Foreign: true, Reason: flantv1.ConflictReasonExistsNotManaged + ": an object Copyrator did not create has this name"}
}

// merge returns the plan of two steps of a pass over disjoint namespaces.
func (p plan) merge(q plan) plan {
	return plan{Actions: slices.Concat(p.Actions, q.Actions), Conflicts: slices.Concat(p.Conflicts, q.Conflicts),
		Desired: p.Desired + q.Desired, InSync: p.InSync + q.InSync,
		Frozen: p.Frozen + q.Frozen, Unadopted: p.Unadopted + q.Unadopted}.sorted()
}

// cleanupActions returns the writes that clean up a deleted rule's copies: release those
// whose "<kind>/<namespace>" is in retainIn, unless of a Secret type never copied, delete
// the others.
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

// copyInSync reports whether a copy has its source's content, annotations and carried metadata.
func copyInSync(rule ruleID, c *copyState, src *source) bool {
	return c.RuleUID == string(rule.UID) && c.Hash == src.Hash && c.WrittenAs == src.Hash && c.Source == rule.Namespace+"/"+src.Name &&
		c.Carried == src.Carried.fingerprint()
}

// needsRecreate reports whether a copy cannot be patched into the desired one: a Secret's
// type never changes, and an immutable copy's content never does.
func needsRecreate(c *copyState, src *source) bool {
	return c.Key.Kind == kindSecret && c.Type != src.Type || c.Immutable && c.Hash != src.Hash
}

func lessKey(a, b copyKey) bool {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind)) < 0
}

// limits bound the copies, per rule and in all, in number and bytes (--copyratorrule-max-*;
// 0: none), so that no rule, nor all together, fill etcd or the namespaces they copy into.
type limits struct {
	perRuleCopies, perRuleBytes           int64
	perNamespaceCopies, perNamespaceBytes int64 // of all the rules of one namespace
	copies, bytes                         int64
}

type tally struct{ copies, bytes int64 }

func (t tally) plus(d tally) tally { return tally{t.copies + d.copies, t.bytes + d.bytes} }

// exceeds names the first bound t is over, "" when none.
func (t tally) exceeds(maxCopies, maxBytes int64, copiesFlag, bytesFlag string) string {
	switch {
	case maxCopies > 0 && t.copies > maxCopies:
		return fmt.Sprintf("--%s=%d", copiesFlag, maxCopies)
	case maxBytes > 0 && t.bytes > maxBytes:
		return fmt.Sprintf("--%s=%s", bytesFlag, resource.NewQuantity(maxBytes, resource.BinarySI))
	}
	return ""
}

// grows reports whether an action adds a copy or bytes: something admit may refuse.
func grows(actions []action) bool {
	return slices.ContainsFunc(actions, func(a action) bool {
		return a.Op == opCreate || a.Source != nil && a.Existing != nil && a.Source.Size > a.Existing.Size
	})
}

// admitted is what admit let through, how many did not fit, the first bound, the growth.
type admitted struct {
	Actions []action
	Dropped int
	Limit   string
	Grew    tally
}

// admit keeps the actions that fit the limits, given the rule's, its namespace's rules' and
// all copies: deletes (counted first), then updates and creates in order while no bound is
// passed; a write that does not grow what is over a bound is kept.
func admit(actions []action, rule, namespace, all tally, l limits) admitted {
	delta := func(a action) tally {
		switch a.Op {
		case opCreate:
			return tally{1, a.Source.Size}
		case opUpdate, opRecreate:
			return tally{0, a.Source.Size - a.Existing.Size}
		case opDelete:
			return tally{-1, -a.Existing.Size}
		}
		return tally{}
	}
	var out admitted
	before := rule
	defer func() { out.Grew = tally{rule.copies - before.copies, rule.bytes - before.bytes} }()
	for _, a := range actions {
		if a.Op == opDelete {
			rule, namespace, all = rule.plus(delta(a)), namespace.plus(delta(a)), all.plus(delta(a))
		}
	}
	for _, a := range actions {
		if a.Op == opDelete {
			out.Actions = append(out.Actions, a)
			continue
		}
		d := delta(a)
		r, n, c := rule.plus(d), namespace.plus(d), all.plus(d)
		over := cmp.Or(r.exceeds(l.perRuleCopies, l.perRuleBytes, flagMaxCopiesPerRule, flagMaxBytesPerRule),
			n.exceeds(l.perNamespaceCopies, l.perNamespaceBytes, flagMaxCopiesPerNS, flagMaxBytesPerNS),
			c.exceeds(l.copies, l.bytes, flagMaxCopies, flagMaxBytes))
		if over != "" && (d.copies > 0 || d.bytes > 0) {
			out.Dropped++
			if out.Limit == "" {
				out.Limit = over
			}
			continue
		}
		rule, namespace, all = r, n, c
		out.Actions = append(out.Actions, a)
	}
	return out
}
