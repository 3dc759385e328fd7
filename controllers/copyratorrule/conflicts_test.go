package copyratorrule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestConflictMemo(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	m := newConflictMemo(2 * time.Minute)
	other := types.NamespacedName{Namespace: "elsewhere", Name: "other"}
	foreign := conflict{Key: copyKey{kindSecret, "a", "reg"}, Foreign: true, Reason: "x"}
	byRule := conflict{Key: copyKey{kindSecret, "b", "reg"}, Reason: "y"}

	fresh := m.update(testRule, []conflict{foreign, byRule}, map[copyKey]bool{foreign.Key: true}, t0)
	assert.Len(t, fresh, 2, "first sighting: both are new (one Warning Event each)")
	assert.Equal(t, map[copyKey]bool{foreign.Key: true}, m.knownForeign(testRule, t0.Add(time.Minute)))
	assert.Equal(t, time.Minute, m.nextRecheck(testRule, t0.Add(time.Minute)))

	// A later pass reports the foreign conflict from memory (not re-checked): no new event,
	// and its recheck clock keeps running.
	fresh = m.update(testRule, []conflict{foreign, byRule}, nil, t0.Add(time.Minute))
	assert.Empty(t, fresh)
	assert.Empty(t, m.knownForeign(testRule, t0.Add(2*time.Minute)), "due for a recheck")
	assert.Equal(t, time.Second, m.nextRecheck(testRule, t0.Add(3*time.Minute)), "overdue rechecks wait a second, not zero")

	// The recheck confirms it: still no event, clock restarted.
	fresh = m.update(testRule, []conflict{foreign, byRule}, map[copyKey]bool{foreign.Key: true}, t0.Add(2*time.Minute))
	assert.Empty(t, fresh)
	assert.Len(t, m.knownForeign(testRule, t0.Add(3*time.Minute)), 1)

	// Other rules are tracked separately; a key maps back to every rule that wants it.
	m.update(other, []conflict{byRule}, nil, t0)
	assert.ElementsMatch(t, []types.NamespacedName{testRule, other}, m.rulesWanting(byRule.Key))

	// A conflict that is gone is dropped, and reported again if it comes back.
	fresh = m.update(testRule, []conflict{foreign}, nil, t0.Add(2*time.Minute))
	assert.Empty(t, fresh)
	assert.Equal(t, []types.NamespacedName{other}, m.rulesWanting(byRule.Key))
	fresh = m.update(testRule, []conflict{foreign, byRule}, nil, t0.Add(2*time.Minute))
	assert.Equal(t, []conflict{byRule}, fresh)

	m.forget(testRule)
	assert.Empty(t, m.knownForeign(testRule, t0))
	assert.Zero(t, m.nextRecheck(testRule, t0))
	assert.Equal(t, []types.NamespacedName{other}, m.rulesWanting(byRule.Key))
	m.forget(other)
	assert.Empty(t, m.rulesWanting(byRule.Key))
	assert.Empty(t, m.byKey)
	assert.Empty(t, m.rules)
}
