package copyratorrule

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

// TestOneWorkerPerNamespace: a namespace's rules take one worker at a time; a rule that
// finds its namespace busy waits (once, in order) and is queued when the pass ends; other
// namespaces are never held up.
func TestOneWorkerPerNamespace(t *testing.T) {
	s := newRuleStates(time.Minute)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	require.NoError(t, s.setQueue(context.Background(), q))
	a1, a2, a3 := types.NamespacedName{Namespace: "a", Name: "1"}, types.NamespacedName{Namespace: "a", Name: "2"}, types.NamespacedName{Namespace: "a", Name: "3"}
	b1 := types.NamespacedName{Namespace: "b", Name: "1"}

	require.True(t, s.enter(a1))
	assert.False(t, s.enter(a2), "a is busy")
	assert.False(t, s.enter(a3))
	assert.False(t, s.enter(a2), "waiting once")
	assert.True(t, s.enter(b1), "another namespace is not held up")
	s.leave("b")
	assert.Zero(t, q.Len(), "nothing of b waited")

	s.leave("a")
	require.Equal(t, 1, q.Len())
	got, _ := q.Get()
	assert.Equal(t, a2, got.NamespacedName, "the first that waited")
	q.Done(got)
	require.True(t, s.enter(a2))
	s.leave("a")
	got, _ = q.Get()
	assert.Equal(t, a3, got.NamespacedName)
	q.Done(got)
	require.True(t, s.enter(a3))
	s.leave("a")
	assert.Zero(t, q.Len(), "no one waits any more")
	assert.Empty(t, s.waiting)
	assert.Empty(t, s.busy)
}
