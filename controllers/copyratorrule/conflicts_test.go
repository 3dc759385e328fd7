package copyratorrule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// TestConflictMemo: a foreign name costs one failed create per recheck interval, not one
// per pass; a conflict is announced once, when the status first lists it.
func TestConflictMemo(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	m := newRuleStates(2 * time.Minute)
	other := types.NamespacedName{Namespace: "elsewhere", Name: "other"}
	foreign := conflict{Key: copyKey{kindSecret, "a", "reg"}, Foreign: true, Reason: "x"}
	byRule := conflict{Key: copyKey{kindSecret, "b", "reg"}, Reason: "y"}
	pass := func(checked map[copyKey]bool, cs ...conflict) outcome {
		return outcome{Generation: 1, Conflicts: cs, Checked: checked}
	}
	listed := func(cs ...conflict) flantv1.CopyratorRuleStatus {
		st := flantv1.CopyratorRuleStatus{ConflictCount: int32(len(cs))}
		for _, c := range cs {
			st.Conflicts = append(st.Conflicts, flantv1.CopyConflict{Namespace: c.Key.Namespace, Name: c.Key.Name, Reason: c.Reason})
		}
		return st
	}
	known := func(rule types.NamespacedName, at time.Time) map[copyKey]bool {
		k, _ := m.foreign(rule, at)
		return k
	}
	next := func(rule types.NamespacedName, at time.Time) time.Duration {
		_, n := m.foreign(rule, at)
		return n
	}
	newConflicts := func(prev, next flantv1.CopyratorRuleStatus) int {
		fresh, unlisted := newlyListed(prev.Conflicts, next.Conflicts, prev.ConflictCount, next.ConflictCount,
			func(c flantv1.CopyConflict) string { return c.Namespace + "/" + c.Name + ":" + c.Reason })
		return len(fresh) + unlisted
	}

	m.settle(testRule, pass(map[copyKey]bool{foreign.Key: true}, foreign, byRule), "", t0)
	assert.Equal(t, 2, newConflicts(flantv1.CopyratorRuleStatus{}, listed(foreign, byRule)), "first sighting: both are new (one Warning Event each)")
	assert.Equal(t, map[copyKey]bool{foreign.Key: true}, known(testRule, t0.Add(time.Minute)))
	assert.Equal(t, time.Minute, next(testRule, t0.Add(time.Minute)))

	// A later pass reports the foreign conflict from memory (not re-checked): no new event,
	// and its recheck clock keeps running.
	m.settle(testRule, pass(nil, foreign, byRule), "", t0.Add(time.Minute))
	assert.Zero(t, newConflicts(listed(foreign, byRule), listed(foreign, byRule)))
	assert.Empty(t, known(testRule, t0.Add(2*time.Minute)), "due for a recheck")
	assert.Equal(t, time.Second, next(testRule, t0.Add(3*time.Minute)), "overdue rechecks wait a second, not zero")

	// The recheck confirms it: still no event, clock restarted.
	m.settle(testRule, pass(map[copyKey]bool{foreign.Key: true}, foreign, byRule), "", t0.Add(2*time.Minute))
	assert.Len(t, known(testRule, t0.Add(3*time.Minute)), 1)

	// Other rules are tracked separately.
	m.settle(other, pass(nil, byRule), "", t0)
	assert.Empty(t, known(other, t0), "another rule's copy is seen in the copy cache, not remembered")

	// A conflict that is gone is dropped, and reported again if it comes back.
	m.settle(testRule, pass(nil, byRule), "", t0.Add(2*time.Minute))
	assert.Empty(t, known(testRule, t0.Add(2*time.Minute)))
	assert.Equal(t, 1, newConflicts(listed(byRule), listed(foreign, byRule)))
	// A failed read leaves them as they were.
	m.settle(testRule, pass(map[copyKey]bool{foreign.Key: true}, foreign), "", t0)
	m.settle(testRule, outcome{Generation: 1, SyncErr: assert.AnError}, "", t0.Add(time.Minute))
	assert.Len(t, known(testRule, t0.Add(time.Minute)), 1)

	m.forget(testRule)
	m.forget(other)
	assert.Empty(t, m.rules)
	assert.Empty(t, known(testRule, t0))
	assert.Zero(t, next(testRule, t0))
}
