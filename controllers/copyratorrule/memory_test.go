package copyratorrule

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

func TestFreshNamespaces(t *testing.T) {
	f := newFreshNamespaces()
	other := types.NamespacedName{Namespace: "src", Name: "other"}
	assert.Empty(t, f.take(testRule))

	f.add(testRule, "b")
	f.add(testRule, "a")
	f.add(testRule, "b")
	f.add(other, "c")
	assert.Equal(t, []string{"a", "b"}, f.take(testRule), "sorted, once each")
	assert.Empty(t, f.take(testRule), "taken")
	assert.Equal(t, []string{"c"}, f.take(other), "per rule")

	for i := range maxFreshNamespaces {
		f.add(testRule, fmt.Sprintf("ns-%03d", i))
	}
	assert.Len(t, f.take(testRule), maxFreshNamespaces)
	for i := range maxFreshNamespaces + 5 {
		f.add(testRule, fmt.Sprintf("ns-%03d", i))
	}
	assert.Len(t, f.rules[testRule], maxFreshNamespaces+1, "the set stops growing")
	assert.Empty(t, f.take(testRule), "a burst is planned in one step over all namespaces")

	f.add(testRule, "a")
	f.forget(testRule)
	assert.Empty(t, f.take(testRule))
}

func TestStatusWritten(t *testing.T) {
	written := flantv1.CopyratorRuleStatus{ObservedGeneration: 2, TargetNamespaces: 3, CopiesInSync: 3,
		Conditions: []metav1.Condition{{Type: flantv1.ConditionReady, Status: metav1.ConditionTrue, Reason: flantv1.ReasonCopiesInSync}}}
	changed := *written.DeepCopy()
	changed.CopiesInSync = 2
	rule := func(rv string) *flantv1.CopyratorRule {
		return &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	}
	last := statusWrite{ResourceVersion: "10", Status: written}
	for _, tc := range []struct {
		name   string
		last   statusWrite
		rule   *flantv1.CopyratorRule
		status flantv1.CopyratorRuleStatus
		want   bool
	}{
		{"cache has not seen the write of this very status", last, rule("10"), written, true},
		{"another status than the one written", last, rule("10"), changed, false},
		{"the rule changed since (the cache shows a newer version)", last, rule("11"), written, false},
		{"nothing written yet", statusWrite{}, rule(""), written, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, statusWritten(tc.last, tc.rule, tc.status))
		})
	}

	s := newStatusWrites()
	s.record(testRule, last)
	assert.Equal(t, last, s.last(testRule))
	s.forget(testRule)
	assert.Equal(t, statusWrite{}, s.last(testRule))
}

func TestFullPasses(t *testing.T) {
	f := newFullPasses()
	other := types.NamespacedName{Namespace: "src", Name: "other"}
	assert.False(t, f.take(testRule), "nothing marked")
	f.mark(testRule)
	f.mark(testRule)
	assert.True(t, f.take(testRule))
	assert.False(t, f.take(testRule), "taken once")
	f.mark(other)
	assert.False(t, f.take(testRule), "per rule")
	assert.True(t, f.take(other))
}
