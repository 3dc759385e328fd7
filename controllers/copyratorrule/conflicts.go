package copyratorrule

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// conflictMemo remembers the conflicts of every rule between passes, so that
//   - a foreign object (one Copyrator did not create) costs one failed create per recheck
//     interval, not one per pass (Copyrator does not watch objects it did not create);
//   - a Warning Event is sent once per conflict, when it appears;
//   - when another rule's copy goes away, the rules that wanted its name are woken.
type conflictMemo struct {
	recheck time.Duration

	mu    sync.Mutex
	rules map[types.NamespacedName]map[copyKey]memoEntry
	byKey map[copyKey]map[types.NamespacedName]bool
}

type memoEntry struct {
	Foreign   bool
	CheckedAt time.Time
}

func newConflictMemo(recheck time.Duration) *conflictMemo {
	return &conflictMemo{recheck: recheck, rules: map[types.NamespacedName]map[copyKey]memoEntry{}, byKey: map[copyKey]map[types.NamespacedName]bool{}}
}

// knownForeign returns the rule's foreign conflicts checked less than the recheck interval
// before now; the planner reports them without trying to create the copy again.
func (m *conflictMemo) knownForeign(rule types.NamespacedName, now time.Time) map[copyKey]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[copyKey]bool{}
	for k, e := range m.rules[rule] {
		if e.Foreign && now.Sub(e.CheckedAt) < m.recheck {
			out[k] = true
		}
	}
	return out
}

// update replaces the rule's conflicts with those of the latest pass and returns the ones
// that are new. checked are the foreign conflicts confirmed by the API server in this pass
// (their recheck clock restarts); the others keep their time.
func (m *conflictMemo) update(rule types.NamespacedName, current []conflict, checked map[copyKey]bool, now time.Time) (fresh []conflict) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.rules[rule]
	next := make(map[copyKey]memoEntry, len(current))
	for _, c := range current {
		e, seen := old[c.Key]
		if !seen || e.Foreign != c.Foreign {
			fresh = append(fresh, c)
		}
		if !seen || checked[c.Key] || !c.Foreign {
			e = memoEntry{Foreign: c.Foreign, CheckedAt: now}
		}
		next[c.Key] = e
	}
	for k := range old {
		if _, ok := next[k]; !ok {
			m.unlink(k, rule)
		}
	}
	for k := range next {
		if m.byKey[k] == nil {
			m.byKey[k] = map[types.NamespacedName]bool{}
		}
		m.byKey[k][rule] = true
	}
	if len(next) == 0 {
		delete(m.rules, rule)
	} else {
		m.rules[rule] = next
	}
	return fresh
}

// nextRecheck returns how long until the rule's earliest foreign conflict is due for a
// recheck, or 0 when it has none.
func (m *conflictMemo) nextRecheck(rule types.NamespacedName, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Duration
	for _, e := range m.rules[rule] {
		if !e.Foreign {
			continue
		}
		d := max(e.CheckedAt.Add(m.recheck).Sub(now), time.Second)
		if next == 0 || d < next {
			next = d
		}
	}
	return next
}

// rulesWanting returns the rules in conflict over key.
func (m *conflictMemo) rulesWanting(key copyKey) []types.NamespacedName {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(m.byKey[key]))
	for r := range m.byKey[key] {
		out = append(out, r)
	}
	return out
}

// forget drops a deleted rule.
func (m *conflictMemo) forget(rule types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.rules[rule] {
		m.unlink(k, rule)
	}
	delete(m.rules, rule)
}

func (m *conflictMemo) unlink(k copyKey, rule types.NamespacedName) {
	delete(m.byKey[k], rule)
	if len(m.byKey[k]) == 0 {
		delete(m.byKey, k)
	}
}
