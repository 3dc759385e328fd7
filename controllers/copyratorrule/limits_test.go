package copyratorrule

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

func TestAdmit(t *testing.T) {
	small := &source{Name: "small", Size: 10}
	big := &source{Name: "big", Size: 1000}
	existing := &copyState{Size: 10}
	create := func(ns string, src *source) action {
		return action{Op: opCreate, Key: copyKey{kindSecret, ns, src.Name}, Source: src}
	}
	update := func(ns string, src *source) action {
		return action{Op: opUpdate, Key: copyKey{kindSecret, ns, src.Name}, Source: src, Existing: existing}
	}
	del := action{Op: opDelete, Key: copyKey{kindSecret, "gone", "small"}, Existing: existing}
	for _, tc := range []struct {
		name        string
		actions     []action
		rule, all   tally
		namespace   tally
		limits      limits
		wantKept    int
		wantDropped int
		wantLimit   string
	}{
		{name: "no limits", actions: []action{create("a", big), create("b", big)}, wantKept: 2},
		{name: "copies per rule: the first ones fit", actions: []action{create("a", small), create("b", small), create("c", small)},
			rule: tally{1, 10}, limits: limits{perRuleCopies: 3}, wantKept: 2, wantDropped: 1, wantLimit: "--copyratorrule-max-copies-per-rule=3"},
		{name: "a delete makes room first", actions: []action{create("a", small), del},
			rule: tally{3, 30}, limits: limits{perRuleCopies: 3}, wantKept: 2},
		{name: "bytes per rule", actions: []action{create("a", big), create("b", small)},
			limits: limits{perRuleBytes: 500}, wantKept: 1, wantDropped: 1, wantLimit: "--copyratorrule-max-bytes-per-rule=500"},
		{name: "an update that grows a copy past the bytes", actions: []action{update("a", big)},
			rule: tally{1, 10}, limits: limits{perRuleBytes: 500}, wantDropped: 1, wantLimit: "--copyratorrule-max-bytes-per-rule=500"},
		{name: "an update that does not grow is kept even over a limit", actions: []action{update("a", small)},
			rule: tally{5, 5000}, limits: limits{perRuleBytes: 500}, wantKept: 1},
		{name: "copies of the namespace's rules", actions: []action{create("a", small), create("b", small)},
			rule: tally{1, 10}, namespace: tally{9, 90}, limits: limits{perRuleCopies: 100, perNamespaceCopies: 10}, wantKept: 1, wantDropped: 1,
			wantLimit: "--copyratorrule-max-copies-per-namespace=10"},
		{name: "bytes of the namespace's rules", actions: []action{create("a", big)},
			namespace: tally{1, 100}, limits: limits{perNamespaceBytes: 1000}, wantDropped: 1, wantLimit: "--copyratorrule-max-bytes-per-namespace=1k"},
		{name: "all copies", actions: []action{create("a", small), create("b", small)},
			all: tally{99, 990}, limits: limits{copies: 100}, wantKept: 1, wantDropped: 1, wantLimit: "--copyratorrule-max-copies=100"},
		{name: "all bytes, as a quantity", actions: []action{create("a", big)},
			all: tally{1, 1 << 30}, limits: limits{bytes: 1 << 30}, wantDropped: 1, wantLimit: "--copyratorrule-max-bytes=1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := admit(tc.actions, tc.rule, tc.namespace, tc.all, tc.limits)
			assert.Len(t, got.Actions, tc.wantKept)
			assert.Equal(t, tc.wantDropped, got.Dropped)
			assert.Equal(t, tc.wantLimit, got.Limit)
		})
	}
}

// TestLedger: the copies and bytes the limits count, per rule and in all, are those the
// copy cache holds (here a fake client holding the cache's stripped objects).
func TestLedger(t *testing.T) {
	ctx := context.Background()
	r1 := ruleID{NamespacedName: types.NamespacedName{Namespace: "src", Name: "a"}, UID: "uid-a"}
	r2 := ruleID{NamespacedName: types.NamespacedName{Namespace: "src", Name: "b"}, UID: "uid-b"}
	r3 := ruleID{NamespacedName: types.NamespacedName{Namespace: "other", Name: "c"}, UID: "uid-c"}
	ghost := ruleID{NamespacedName: types.NamespacedName{Namespace: "t1", Name: "ghost"}, UID: "uid-ghost"}
	cm := func(ns, name string, rule ruleID, size int) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: copyLabels(rule)},
			Data: map[string]string{"k": string(make([]byte, size-1))}}
		out, err := stripBody(c)
		require.NoError(t, err)
		return out.(*corev1.ConfigMap)
	}
	rules := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(
		&flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "a", UID: "uid-a"}},
		&flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "b", UID: "uid-b"}},
		&flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "c", UID: "uid-c"}}).Build()
	// Look-alikes count nowhere: a rule that does not exist, the rule's name with another
	// UID (or none: written before rule UIDs, counted once a pass adopts it).
	c := fake.NewClientBuilder().WithObjects(cm("x", "c", r1, 100), cm("y", "c", r1, 100), cm("x", "d", r2, 50), cm("x", "e", r3, 70),
		cm("t1", "fake", ghost, 1<<20), cm("t1", "fake-a", ruleID{NamespacedName: r1.NamespacedName, UID: "uid-forged"}, 1<<20),
		cm("t1", "old-a", ruleID{NamespacedName: r1.NamespacedName}, 1<<20)).Build()
	l := copyReader{cache: c, rules: rules}
	tallies := func(rule ruleID) (tally, tally, tally) {
		t.Helper()
		ruleCopies, namespace, all, err := l.tallies(ctx, rule.NamespacedName)
		require.NoError(t, err)
		return ruleCopies, namespace, all
	}
	rule, namespace, all := tallies(r1)
	assert.Equal(t, tally{2, 200}, rule)
	assert.Equal(t, tally{3, 250}, namespace, "the rules of src")
	assert.Equal(t, tally{4, 320}, all)
	updated := cm("x", "c", r1, 300) // an update
	live := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(updated), live))
	updated.ResourceVersion = live.ResourceVersion
	require.NoError(t, c.Update(ctx, updated))
	rule, namespace, all = tallies(r1)
	assert.Equal(t, tally{2, 400}, rule)
	assert.Equal(t, tally{3, 450}, namespace)
	assert.Equal(t, tally{4, 520}, all)
	require.NoError(t, c.Delete(ctx, cm("y", "c", r1, 1)))
	rule, _, all = tallies(r1)
	assert.Equal(t, tally{1, 300}, rule)
	assert.Equal(t, tally{3, 420}, all)
	require.Error(t, c.Delete(ctx, cm("nope", "c", r1, 1)))
	_, _, all = tallies(r1)
	assert.Equal(t, tally{3, 420}, all, "removing what is not there changes nothing")
	_, namespace, _ = tallies(r3)
	assert.Equal(t, tally{1, 70}, namespace, "the rules of other")
}

func TestLimitFlags(t *testing.T) {
	o := &Options{MaxBytesPerRule: "lots"}
	require.ErrorContains(t, o.complete(), "--copyratorrule-max-bytes-per-rule")
	o = &Options{MaxCopiesPerRule: 5}
	require.NoError(t, o.complete())
	l, err := o.limits()
	require.NoError(t, err)
	assert.Equal(t, limits{perRuleCopies: 5, perRuleBytes: 256 << 20, perNamespaceBytes: 256 << 20, bytes: 1 << 30}, l)
}

// TestRuleStopsAtItsLimit: a rule whose copies would pass a limit writes those that fit
// and says which limit stopped the rest (Ready and Degraded, a Warning Event).
func TestRuleStopsAtItsLimit(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	targets := targetNamespaces(t, id, 3)
	opts := &Options{MaxCopiesPerRule: 2}
	testenv.StartManager(t, env.Config, scope.Namespaces{}, opts.Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "capped", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, env.Client.Create(ctx, s))
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.CopiesInSync)
		ready := testenv.Condition(st.Conditions, flantv1.ConditionReady)
		assert.Equal(c, flantv1.ReasonLimitReached, ready.Reason)
		assert.Contains(c, ready.Message, "--copyratorrule-max-copies-per-rule=2")
		assert.Equal(c, flantv1.ReasonLimitReached, testenv.Condition(st.Conditions, flantv1.ConditionDegraded).Reason)
	})
	written := 0
	for _, ns := range targets {
		if getSecret(t, ns, s.Name) != nil {
			written++
		}
	}
	assert.Equal(t, 2, written, "no more copies than the limit")
	// The pass sends its Events after its status write, and the recorder writes them later.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, eventsOf(c, rule), fmt.Sprintf("Warning %s", EventLimitReached))
	}, waitFor, tick)
}
