package copyratorrule

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestFreshNamespaces(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := newRuleStates(time.Minute)
	take := func(rule types.NamespacedName) []string {
		fresh, _ := f.shape(rule, "", t0)
		return fresh
	}
	other := types.NamespacedName{Namespace: "src", Name: "other"}
	assert.Empty(t, take(testRule))

	f.addFresh(testRule, "b", t0)
	f.addFresh(testRule, "a", t0)
	f.addFresh(testRule, "b", t0)
	f.addFresh(other, "c", t0)
	assert.Equal(t, []string{"a", "b"}, take(testRule), "sorted, once each")
	assert.Empty(t, take(testRule), "taken")
	assert.Equal(t, []string{"c"}, take(other), "per rule")

	for i := range maxFreshNamespaces {
		f.addFresh(testRule, fmt.Sprintf("ns-%03d", i), t0)
	}
	assert.Len(t, take(testRule), maxFreshNamespaces)
	for i := range maxFreshNamespaces + 5 {
		f.addFresh(testRule, fmt.Sprintf("ns-%03d", i), t0)
	}
	assert.Len(t, f.rules[testRule].fresh, maxFreshNamespaces+1, "the set stops growing")
	assert.Empty(t, take(testRule), "a burst is planned in one step over all namespaces")

	f.addFresh(testRule, "a", t0)
	f.forget(testRule)
	assert.Empty(t, take(testRule))
}

// TestFullPasses: a pass is full unless fresh namespaces woke the rule, it sees what the
// rule's last full pass without error saw, and the first of them came less than
// maxFreshWait ago.
func TestFullPasses(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := newRuleStates(time.Minute)
	other := types.NamespacedName{Namespace: "src", Name: "other"}
	full := func(rule types.NamespacedName, seen string, at time.Time) bool {
		_, only := f.shape(rule, seen, at)
		return !only
	}
	f.addFresh(testRule, "a", t0)
	assert.True(t, full(testRule, "v1", t0), "no full pass saw v1 yet")
	f.settle(testRule, outcome{Generation: 2}, "v1", t0)
	assert.True(t, full(testRule, "v1", t0), "nothing fresh")

	f.addFresh(testRule, "b", t0)
	assert.False(t, full(testRule, "v1", t0.Add(maxFreshWait/2)), "only a fresh namespace woke it")
	f.addFresh(testRule, "c", t0.Add(maxFreshWait/2))
	assert.True(t, full(testRule, "v2", t0.Add(maxFreshWait/2)), "a source or the spec changed")
	f.addFresh(testRule, "c", t0.Add(maxFreshWait/2))
	assert.False(t, full(testRule, "v1", t0.Add(maxFreshWait/2)), "the full pass started a new wait")
	f.addFresh(testRule, "d", t0.Add(maxFreshWait))
	assert.True(t, full(testRule, "v1", t0.Add(3*maxFreshWait/2)), "namespaces kept coming for maxFreshWait: full, fresh ones first")

	f.addFresh(other, "a", t0)
	assert.True(t, full(other, "v1", t0), "per rule")

	f.settle(testRule, outcome{Generation: 2, WriteErrs: []string{"boom"}}, "v1", t0)
	f.addFresh(testRule, "e", t0)
	assert.True(t, full(testRule, "v1", t0), "the last full pass failed")
}
