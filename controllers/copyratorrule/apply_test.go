package copyratorrule

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quartet-operator/quartet/test/testenv"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// TestOwnWritesEcho: the event of a copy that is what its rule wants is the echo of the
// controller's own write; any other change to what it holds is someone else's.
func TestOwnWritesEcho(t *testing.T) {
	src := newSource(secret("reg", corev1.SecretTypeOpaque, map[string]string{"k": "v"}))
	key := copyKey{kindSecret, "team-a", "reg"}
	inCache := func(f func(*copyState)) copyState {
		c := copyState{Key: key, Rule: testRule, RuleUID: string(testID.UID), Source: "src/reg", WrittenAs: src.Hash, Hash: src.Hash}
		if f != nil {
			f(&c)
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		cached copyState
		want   bool
	}{
		{"the copy as written", inCache(nil), true},
		{"data edited since", inCache(func(c *copyState) { c.Hash = "edited" }), false},
		{"hash annotation edited", inCache(func(c *copyState) { c.WrittenAs = "x" }), false},
		{"source annotation edited", inCache(func(c *copyState) { c.Source = "src/other" }), false},
		{"another rule's copy", inCache(func(c *copyState) { c.Rule = types.NamespacedName{Namespace: "src", Name: "other"} }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, isEcho(testRule, src, tc.cached))
		})
	}

	withLabel := newSource(secret("reg", corev1.SecretTypeOpaque, map[string]string{"k": "v"}))
	withLabel.Carried = carried{Labels: map[string]string{"team": "a"}}
	assert.False(t, isEcho(testRule, withLabel, inCache(nil)), "a carried label the copy lacks: not what the rule wants")
	newer := newSource(secret("reg", corev1.SecretTypeOpaque, map[string]string{"k": "v2"}))
	assert.False(t, isEcho(testRule, newer, inCache(nil)), "the source changed since: not the echo of the write the rule wants now")
}

func TestBlockedBy(t *testing.T) {
	src := newSource(secret("reg", corev1.SecretTypeOpaque, map[string]string{"k": "v"}))
	a := action{Op: opCreate, Key: copyKey{kindSecret, "team-a", "reg"}, Source: &src}
	obj := func(labels, annotations map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "reg",
			Labels: labels, Annotations: annotations}}
	}
	current := map[string]string{AnnotationSource: "src/reg", AnnotationContentHash: src.Hash}
	otherRule := ruleID{NamespacedName: types.NamespacedName{Namespace: "src", Name: "other"}, UID: "uid-other"}
	for _, tc := range []struct {
		name      string
		obj       *metav1.PartialObjectMetadata
		wantFound bool
		// wantConflict: "" none, else the conflict's reason prefix; foreign says whose.
		wantConflict string
		foreign      bool
	}{
		{name: "own copy of the current content: in sync", obj: obj(copyLabels(testID), current), wantFound: true},
		{name: "own copy of older content: the cache's event brings the update",
			obj: obj(copyLabels(testID), map[string]string{AnnotationSource: "src/reg", AnnotationContentHash: "old"})},
		{name: "a copy of this rule's name and another UID: its event brings the pass that replaces it",
			obj: obj(copyLabels(ruleID{NamespacedName: testRule, UID: "uid-earlier"}), current)},
		{name: "of this rule's name and no UID: not written by it", obj: obj(ruleLabels(testRule), current),
			wantConflict: flantv1.ConflictReasonExistsNotManaged, foreign: true},
		{name: "own copy of another source's name", obj: obj(copyLabels(testID), map[string]string{AnnotationSource: "src/x", AnnotationContentHash: src.Hash})},
		{name: "another rule's copy", obj: obj(copyLabels(otherRule), current), wantConflict: flantv1.ConflictReasonManagedByOtherRule},
		{name: "foreign object", obj: obj(map[string]string{"app": "x"}, current), wantConflict: flantv1.ConflictReasonExistsNotManaged, foreign: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, found := blockedBy(testID, a, tc.obj)
			assert.Equal(t, tc.wantFound, found)
			if tc.wantConflict == "" {
				assert.Nil(t, c)
				return
			}
			if assert.NotNil(t, c) {
				assert.Equal(t, a.Key, c.Key)
				assert.Contains(t, c.Reason, tc.wantConflict)
				assert.Equal(t, tc.foreign, c.Foreign)
			}
		})
	}
}

// TestDeleteOnlyWhileStillTheRulesCopy: a delete planned from a cache that is behind
// removes the copy only if it is still the same object labelled with the rule (against the
// real API server: the preconditions are the API server's).
func TestDeleteOnlyWhileStillTheRulesCopy(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "del", nil)
	rule := ruleID{NamespacedName: types.NamespacedName{Namespace: "src", Name: "r"}, UID: "uid-r"}
	w := writer{client: env.Client, apiReader: env.Client}
	copyOf := func(name string) (*corev1.Secret, copyState) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: copyLabels(rule)},
			Data: map[string][]byte{"k": []byte("v")}}
		require.NoError(t, env.Client.Create(ctx, s))
		return s, stateOf(s) // the cache's view: this version
	}
	exists := func(name string) bool {
		return !apierrors.IsNotFound(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Secret{}))
	}

	_, st := copyOf("unchanged")
	require.NoError(t, w.delete(ctx, &st))
	assert.False(t, exists("unchanged"))

	s, st := copyOf("edited")
	s.Data["k"] = []byte("a person's edit")
	require.NoError(t, env.Client.Update(ctx, s))
	require.NoError(t, w.delete(ctx, &st))
	assert.False(t, exists("edited"), "still the rule's copy, only newer: deleted")

	s, st = copyOf("taken-over")
	delete(s.Labels, LabelManagedBy)
	require.NoError(t, env.Client.Update(ctx, s))
	require.NoError(t, w.delete(ctx, &st))
	assert.True(t, exists("taken-over"), "taken over after the cache saw it: left alone")

	s, st = copyOf("recreated")
	require.NoError(t, env.Client.Delete(ctx, s))
	_, _ = copyOf("recreated")
	require.NoError(t, w.delete(ctx, &st))
	assert.True(t, exists("recreated"), "another object under the name: left alone")

	gone := st
	gone.Key.Name = "never-existed"
	require.NoError(t, w.delete(ctx, &gone))
}

// TestRemovalsArePaced: deletes and releases, which nothing waits on, go at the writer's
// removal rate; creates, re-creates and updates, which someone waits on, do not.
func TestRemovalsArePaced(t *testing.T) {
	for o, want := range map[op]bool{opCreate: false, opRecreate: false, opUpdate: false, opDelete: true, opRelease: true} {
		assert.Equal(t, want, paced(o), o)
	}
}

// TestRemovalsGoAtTheirRate: a pass that deletes six copies at five a second (bursts of one)
// takes at least a second and deletes them all; a create listed after them is written first,
// not behind their pace (against the real API server; the writes' order seen at the client).
func TestRemovalsGoAtTheirRate(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "paced", nil)
	rule := ruleID{NamespacedName: types.NamespacedName{Namespace: "src", Name: "r"}, UID: "uid-r"}
	var actions []action
	for i := range 6 {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%d", i), Labels: copyLabels(rule)}}
		require.NoError(t, env.Client.Create(ctx, s))
		st := stateOf(s)
		actions = append(actions, action{Op: opDelete, Key: copyKey{kindSecret, ns, s.Name}, Existing: &st})
	}
	src := newSource(secret("new", corev1.SecretTypeOpaque, map[string]string{"k": "v"}))
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	src.Changed = clk.Now().Add(-2 * time.Second)
	actions = append(actions, action{Op: opCreate, Key: copyKey{kindSecret, ns, "new"}, Source: &src})
	var order []string // one worker: no lock needed
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	recorded := interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			order = append(order, "create")
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			order = append(order, "delete")
			return c.Delete(ctx, obj, opts...)
		},
	})
	w := writer{client: recorded, apiReader: env.Client, clock: clk, parallelism: 1, removalsPerSecond: 5}
	observed, sum := propagationSamples(t)
	start := time.Now()
	results := w.execute(ctx, rule, actions)
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "six removals at five a second")
	for _, r := range results {
		assert.True(t, r.Done, r.Err)
	}
	assert.Equal(t, []string{"create", "delete", "delete", "delete", "delete", "delete", "delete"}, order)
	newObserved, newSum := propagationSamples(t)
	assert.Equal(t, observed+1, newObserved, "the create's propagation observed, no removal's")
	assert.InDelta(t, 2, newSum-sum, 1e-9, "from the source's change to the write, on the writer's clock")
	left := &corev1.SecretList{}
	require.NoError(t, env.Client.List(ctx, left, client.InNamespace(ns)))
	require.Len(t, left.Items, 1)
	assert.Equal(t, "new", left.Items[0].Name)
}
