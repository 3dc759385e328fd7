package copyratorrule

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Copies are bounded per rule and in all, in number and in bytes, so that neither one rule
// nor all of them can fill etcd (every write of the cluster stops when it is full) or the
// namespaces they copy into: the --copyratorrule-max-* flags.

// limits are the bounds on copies; 0 means no bound.
type limits struct {
	perRuleCopies, perRuleBytes int64
	copies, bytes               int64
}

// tally counts copies and their bytes.
type tally struct{ copies, bytes int64 }

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

// admitted is what admit let through.
type admitted struct {
	// Actions are the writes that fit, in their order.
	Actions []action
	// Dropped is the number of writes that did not fit.
	Dropped int
	// Limit names the first bound a dropped write would have passed (a flag and its value).
	Limit string
}

// admit keeps the actions of a pass that fit the limits, given the rule's copies and all
// copies before the pass: deletes always (they free room, and count first), then updates
// and creates in order while neither the rule's nor all copies pass a bound. A write that
// does not grow what is over a bound is kept (an update that shrinks a copy, say).
func admit(actions []action, rule, all tally, l limits) admitted {
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
	for _, a := range actions {
		if a.Op == opDelete {
			d := delta(a)
			rule.copies, rule.bytes = rule.copies+d.copies, rule.bytes+d.bytes
			all.copies, all.bytes = all.copies+d.copies, all.bytes+d.bytes
		}
	}
	for _, a := range actions {
		if a.Op == opDelete {
			out.Actions = append(out.Actions, a)
			continue
		}
		d := delta(a)
		r := tally{rule.copies + d.copies, rule.bytes + d.bytes}
		c := tally{all.copies + d.copies, all.bytes + d.bytes}
		over := r.exceeds(l.perRuleCopies, l.perRuleBytes, flagMaxCopiesPerRule, flagMaxBytesPerRule)
		if over == "" {
			over = c.exceeds(l.copies, l.bytes, flagMaxCopies, flagMaxBytes)
		}
		if over != "" && (d.copies > 0 || d.bytes > 0) {
			out.Dropped++
			if out.Limit == "" {
				out.Limit = over
			}
			continue
		}
		rule, all = r, c
		out.Actions = append(out.Actions, a)
	}
	return out
}

// ledger tallies the copies the copy cache holds, per rule and in all, from the cache's
// events (so a restart rebuilds it from the first list). Writes of passes running at the
// same moment are not in it until the cache shows them: all rules together may pass the
// bound for all copies by what those passes write.
type ledger struct {
	mu      sync.Mutex
	entries map[copyKey]ledgerEntry
	rules   map[types.NamespacedName]tally
	total   tally
}

type ledgerEntry struct {
	rule types.NamespacedName
	size int64
}

func newLedger() *ledger {
	return &ledger{entries: map[copyKey]ledgerEntry{}, rules: map[types.NamespacedName]tally{}}
}

// set records the copy obj of the copy cache (stripped: its size in cachedSizeAnnotation).
func (l *ledger) set(obj client.Object) {
	st := stateOf(obj)
	st.Key.Kind = kindOf(obj)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(st.Key)
	if st.Rule.Name == "" {
		return
	}
	l.entries[st.Key] = ledgerEntry{rule: st.Rule, size: st.Size}
	t := l.rules[st.Rule]
	l.rules[st.Rule] = tally{t.copies + 1, t.bytes + st.Size}
	l.total = tally{l.total.copies + 1, l.total.bytes + st.Size}
}

// remove forgets the copy at key.
func (l *ledger) remove(key copyKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(key)
}

func (l *ledger) removeLocked(key copyKey) {
	e, ok := l.entries[key]
	if !ok {
		return
	}
	delete(l.entries, key)
	t := l.rules[e.rule]
	t = tally{t.copies - 1, t.bytes - e.size}
	if t.copies <= 0 {
		delete(l.rules, e.rule)
	} else {
		l.rules[e.rule] = t
	}
	l.total = tally{l.total.copies - 1, l.total.bytes - e.size}
}

// setFrom records a copy cache object (an informer's event).
func (l *ledger) setFrom(o any) {
	if obj, ok := o.(client.Object); ok {
		l.set(obj)
	}
}

// removeFrom forgets a copy cache object (an informer's delete event, maybe a tombstone).
func (l *ledger) removeFrom(o any) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	if obj, ok := o.(client.Object); ok {
		l.remove(keyOf(obj))
	}
}

// tallies returns the rule's and all copies.
func (l *ledger) tallies(rule types.NamespacedName) (tally, tally) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rules[rule], l.total
}
