package copyratorrule

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// maxFreshNamespaces bounds the namespaces a pass plans before the others. Beyond it (a
// burst of new namespaces) the pass plans every namespace in one step: a first step that
// reads as many namespaces one by one as the whole pass would read in a list saves nothing.
const maxFreshNamespaces = 32

// freshNamespaces remembers, per rule, the namespaces whose events (created, labels
// changed) woke the rule since its last pass. The pass writes their copies before it looks
// at every other namespace, so a new namespace does not wait for a pass over thousands.
// A pass that only these events woke writes only their copies (freshOnly); otherwise it
// only orders the work: the same pass covers every namespace, these included.
type freshNamespaces struct {
	mu    sync.Mutex
	rules map[types.NamespacedName]map[string]bool
}

func newFreshNamespaces() *freshNamespaces {
	return &freshNamespaces{rules: map[types.NamespacedName]map[string]bool{}}
}

// add notes namespace ns for the rule's next pass. Past maxFreshNamespaces the rule's set
// stops growing (take then returns nothing).
func (f *freshNamespaces) add(rule types.NamespacedName, ns string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.rules[rule]
	if set == nil {
		set = map[string]bool{}
		f.rules[rule] = set
	}
	if len(set) <= maxFreshNamespaces {
		set[ns] = true
	}
}

// take returns the rule's noted namespaces, sorted, and forgets them; nothing when there
// were more than maxFreshNamespaces.
func (f *freshNamespaces) take(rule types.NamespacedName) []string {
	f.mu.Lock()
	set := f.rules[rule]
	delete(f.rules, rule)
	f.mu.Unlock()
	if len(set) > maxFreshNamespaces {
		return nil
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// forget drops a deleted rule.
func (f *freshNamespaces) forget(rule types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rules, rule)
}

// fullPasses remembers the rules whose next pass must look at every namespace at once,
// whatever namespaces just appeared: one of its sources changed, someone else changed or
// deleted one of its copies, or its last pass failed.
type fullPasses struct {
	mu    sync.Mutex
	rules map[types.NamespacedName]bool
}

func newFullPasses() *fullPasses {
	return &fullPasses{rules: map[types.NamespacedName]bool{}}
}

// mark notes that the rule's next pass must be a full one.
func (f *fullPasses) mark(rule types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules[rule] = true
}

// take reports whether the rule's next pass must be a full one and forgets it.
func (f *fullPasses) take(rule types.NamespacedName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	marked := f.rules[rule]
	delete(f.rules, rule)
	return marked
}

// forget drops a deleted rule.
func (f *fullPasses) forget(rule types.NamespacedName) { f.take(rule) }
