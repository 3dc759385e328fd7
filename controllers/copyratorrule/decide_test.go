package copyratorrule

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

func nsMeta(name string, labels map[string]string, terminating bool) metav1.PartialObjectMetadata {
	m := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if terminating {
		m.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	return m
}

func TestSelectTargets(t *testing.T) {
	namespaces := []metav1.PartialObjectMetadata{
		nsMeta("src", nil, false),
		nsMeta("team-a", map[string]string{"team": "a"}, false),
		nsMeta("team-b", map[string]string{"team": "b"}, false),
		nsMeta("opted-out", map[string]string{"team": "a", LabelIgnore: "true"}, false),
		nsMeta("ignore-false", map[string]string{LabelIgnore: "false"}, false),
		nsMeta("leaving", map[string]string{"team": "a"}, true),
		nsMeta("kube-system", nil, false),
		nsMeta("quartet-system", map[string]string{"team": "a"}, false),
		nsMeta("kube-public", map[string]string{LabelAcceptCopies: "true"}, false),
		nsMeta("kube-node-lease", map[string]string{LabelAcceptCopies: "yes"}, false),
	}
	protected := protectedNamespaces("quartet-system", nil)
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name          string
		spec          flantv1.CopyratorRuleSpec
		watches       func(string) bool
		want          []string
		wantProtected []string
		wantErr       string
	}{
		{name: "every active namespace but the source's, opted-out and protected ones", watches: all,
			want:          []string{"ignore-false", "kube-public", "team-a", "team-b"},
			wantProtected: []string{"kube-node-lease", "kube-system", "quartet-system"}},
		{name: "namespaces list: a protected one named outright is still refused",
			spec:    flantv1.CopyratorRuleSpec{Namespaces: []string{"team-b", "src", "opted-out", "missing", "leaving", "kube-system"}},
			watches: all, want: []string{"team-b"}, wantProtected: []string{"kube-system"}},
		{name: "namespace selector", spec: flantv1.CopyratorRuleSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
			watches: all, want: []string{"team-a"}, wantProtected: []string{"quartet-system"}},
		{name: "empty namespace selector selects all", spec: flantv1.CopyratorRuleSpec{NamespaceSelector: &metav1.LabelSelector{}},
			watches: all, want: []string{"ignore-false", "kube-public", "team-a", "team-b"},
			wantProtected: []string{"kube-node-lease", "kube-system", "quartet-system"}},
		{name: "expression selector", spec: flantv1.CopyratorRuleSpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}}}},
			watches: all, want: []string{"team-b"}},
		{name: "watched namespaces only", watches: func(ns string) bool { return ns == "team-b" || ns == "src" }, want: []string{"team-b"}},
		{name: "invalid selector", spec: flantv1.CopyratorRuleSpec{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: "Near"}}}}, watches: all, wantErr: "spec.namespaceSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "r"}, Spec: tc.spec}
			f, err := newNamespaceFilter(rule, tc.watches, protected)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			targets, refused, terminating := selectTargets(f, everyNamespace, namespaces)
			assert.Equal(t, tc.want, targets)
			var gotProtected []string
			for _, r := range refused {
				assert.True(t, r.Protected)
				assert.Contains(t, r.Reason, LabelAcceptCopies+"=true", "the refusal says how a cluster admin opts the namespace in")
				gotProtected = append(gotProtected, r.Namespace)
			}
			assert.Equal(t, tc.wantProtected, gotProtected)
			assert.Equal(t, map[string]bool{"leaving": true}, terminating)
		})
	}
}

func TestProtectedNamespacesAreAdditive(t *testing.T) {
	got := protectedNamespaces("quartet-system", []string{"istio-system"})
	assert.ElementsMatch(t, []string{"kube-system", "kube-public", "kube-node-lease", "quartet-system", "istio-system"}, got.UnsortedList())
	assert.ElementsMatch(t, []string{"kube-system", "kube-public", "kube-node-lease"}, protectedNamespaces("", nil).UnsortedList())
}

// TestNextAnswer: a grant is asked again after refresh; refusals in a row back off from
// recheck, doubling, to 8 × recheck and refresh at most; a grant ends the row.
func TestNextAnswer(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	const recheck, refresh = time.Minute, 10 * time.Minute
	a := nextAnswer(answer{}, true, now, recheck, refresh)
	assert.Equal(t, answer{allowed: true, due: now.Add(refresh)}, a)
	var waits []time.Duration
	prev := a
	for range 6 {
		prev = nextAnswer(prev, false, now, recheck, refresh)
		waits = append(waits, prev.due.Sub(now))
	}
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 8 * time.Minute, 8 * time.Minute}, waits)
	assert.Equal(t, 5*time.Minute, nextAnswer(answer{refusals: 5}, false, now, time.Minute, 5*time.Minute).due.Sub(now), "refresh below 8 × recheck: refresh")
	assert.Equal(t, 6, prev.refusals)
	assert.Equal(t, 1, nextAnswer(answer{allowed: true}, false, now, recheck, refresh).refusals, "a refusal after a grant starts a new row")
	assert.Equal(t, time.Minute, nextAnswer(answer{refusals: 3}, false, now, time.Minute, 0).due.Sub(now), "refresh below recheck: recheck")
}

// TestAdmittedServiceAccount: the oldest rules of a namespace claim its ServiceAccounts
// up to the cap; a rule naming one already claimed is always admitted.
func TestAdmittedServiceAccount(t *testing.T) {
	at := func(name, sa string, sec int64) flantv1.CopyratorRule {
		return flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: name, CreationTimestamp: metav1.Unix(sec, 0)},
			Spec: flantv1.CopyratorRuleSpec{ServiceAccountName: sa}}
	}
	rules := []flantv1.CopyratorRule{at("c", "sa-c", 3), at("a", "", 1), at("b", "sa-b", 2), at("d", "sa-b", 4), at("e", "sa-e", 3)}
	for _, tc := range []struct {
		rule    flantv1.CopyratorRule
		most    int
		wantErr string
	}{
		{rule: rules[1], most: 2},
		{rule: rules[2], most: 2},
		{rule: rules[3], most: 2, wantErr: ""},
		{rule: rules[0], most: 2, wantErr: "already act as 2 ServiceAccounts (copyrator, sa-b), the most --copyratorrule-max-service-accounts-per-namespace allows"},
		{rule: rules[0], most: 3},
		{rule: rules[4], most: 3, wantErr: "(copyrator, sa-b, sa-c)"},
	} {
		t.Run(fmt.Sprintf("%s of %d", tc.rule.Name, tc.most), func(t *testing.T) {
			err := admittedServiceAccount(&tc.rule, slices.Clone(rules), tc.most)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.True(t, strings.HasPrefix(err.Error(), "spec.serviceAccountName: "), "the message names the field")
		})
	}
}

func TestNextPass(t *testing.T) {
	const recheck, refresh, deferred = time.Minute, 10 * time.Minute, 10 * time.Second
	refused := []refusal{{Namespace: "t2"}}
	for _, tc := range []struct {
		name     string
		conflict time.Duration
		o        outcome
		want     time.Duration
	}{
		{name: "nothing selected, no conflict: no pass due", want: 0},
		{name: "writes somewhere: consent refreshed", o: outcome{Targets: 3}, want: refresh},
		{name: "refused somewhere: asked again soon", o: outcome{Targets: 3, Refused: refused}, want: recheck},
		{name: "a conflict due sooner wins", conflict: 20 * time.Second, o: outcome{Refused: refused}, want: 20 * time.Second},
		{name: "a conflict due later loses", conflict: 5 * time.Minute, o: outcome{Targets: 1}, want: 5 * time.Minute},
		{name: "a conflict alone", conflict: 5 * time.Minute, want: 5 * time.Minute},
		{name: "not asked for want of budget: asked once it refilled", o: outcome{Targets: 3,
			Refused: []refusal{{Namespace: "t2"}, {Namespace: "t3", Deferred: true}}}, want: deferred},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, nextPass(tc.conflict, tc.o, recheck, refresh, deferred))
		})
	}
}

func TestPlanCopies(t *testing.T) {
	cfg := newSource(configMap("cfg", map[string]string{"k": "v2"}))
	cfgOld := newSource(configMap("cfg", map[string]string{"k": "v1"}))
	reg := newSource(secret("reg", corev1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": "{}"}))
	immutableSrc := secret("frozen", corev1.SecretTypeOpaque, map[string]string{"k": "v2"})
	immutableSrc.Immutable = ptr.To(true)
	frozen := newSource(immutableSrc)
	other := types.NamespacedName{Namespace: "elsewhere", Name: "other-rule"}

	// inSync is a cached copy equal to src in ns.
	inSync := func(kind, ns string, src source) copyState {
		return copyState{Key: copyKey{kind, ns, src.Name}, UID: types.UID("uid-" + ns), Rule: testRule, RuleUID: string(testID.UID),
			Source: "src/" + src.Name, WrittenAs: src.Hash, Hash: src.Hash, Type: src.Type, Immutable: src.Immutable, HasAnnotations: true}
	}
	with := func(c copyState, f func(*copyState)) copyState { f(&c); return c }
	legacy := func(c copyState) copyState { c.RuleUID = ""; return c }
	earlier := func(c copyState) copyState { c.RuleUID = "uid-earlier"; return c }
	key := func(kind, ns, name string) copyKey { return copyKey{kind, ns, name} }

	type want struct {
		actions   map[copyKey]op
		conflicts map[copyKey]bool // value: Foreign
		desired   int
		inSync    int
		frozen    int
		unadopted int
	}
	for _, tc := range []struct {
		name string
		in   planInput
		want want
	}{
		{
			name: "new rule: every source into every target",
			in:   planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a", "b"}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opCreate, key(kindConfigMap, "b", "cfg"): opCreate}, desired: 2},
		},
		{
			name: "everything in sync: no writes",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a", "b"},
				Owned: []copyState{inSync(kindConfigMap, "a", cfg), inSync(kindConfigMap, "b", cfg)}},
			want: want{desired: 2, inSync: 2},
		},
		{
			name: "new namespace: only it is written",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a", "b", "new"},
				Owned: []copyState{inSync(kindConfigMap, "a", cfg), inSync(kindConfigMap, "b", cfg)}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "new", "cfg"): opCreate}, desired: 3, inSync: 2},
		},
		{
			name: "source changed: every copy updated",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a", "b"},
				Owned: []copyState{inSync(kindConfigMap, "a", cfgOld), inSync(kindConfigMap, "b", cfgOld)}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opUpdate, key(kindConfigMap, "b", "cfg"): opUpdate}, desired: 2},
		},
		{
			name: "copy edited by a person: reverted",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"},
				Owned: []copyState{with(inSync(kindConfigMap, "a", cfg), func(c *copyState) { c.Hash = "edited" })}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opUpdate}, desired: 1},
		},
		{
			name: "annotation edited by a person: rewritten",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"},
				Owned: []copyState{with(inSync(kindConfigMap, "a", cfg), func(c *copyState) { c.Source = "" })}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opUpdate}, desired: 1},
		},
		{
			name: "secret type changed: recreated",
			in: planInput{Kind: kindSecret, Sources: []source{reg}, Targets: []string{"a"},
				Owned: []copyState{with(inSync(kindSecret, "a", reg), func(c *copyState) { c.Type = corev1.SecretTypeOpaque; c.Hash = "x" })}},
			want: want{actions: map[copyKey]op{key(kindSecret, "a", "reg"): opRecreate}, desired: 1},
		},
		{
			name: "immutable copy of a changed source: recreated",
			in: planInput{Kind: kindSecret, Sources: []source{frozen}, Targets: []string{"a"},
				Owned: []copyState{with(inSync(kindSecret, "a", frozen), func(c *copyState) { c.Hash, c.WrittenAs = "old", "old" })}},
			want: want{actions: map[copyKey]op{key(kindSecret, "a", "frozen"): opRecreate}, desired: 1},
		},
		{
			name: "immutable copy with only a stale annotation: patched, not recreated",
			in: planInput{Kind: kindSecret, Sources: []source{frozen}, Targets: []string{"a"},
				Owned: []copyState{with(inSync(kindSecret, "a", frozen), func(c *copyState) { c.WrittenAs = "old" })}},
			want: want{actions: map[copyKey]op{key(kindSecret, "a", "frozen"): opUpdate}, desired: 1},
		},
		{
			name: "source no longer matches: its copies deleted",
			in: planInput{Kind: kindConfigMap, Sources: nil, Targets: []string{"a", "b"},
				Owned: []copyState{inSync(kindConfigMap, "a", cfg), inSync(kindConfigMap, "b", cfg)}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opDelete, key(kindConfigMap, "b", "cfg"): opDelete}},
		},
		{
			name: "namespace no longer targeted (opted out, removed from the list): copy deleted",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"},
				Owned: []copyState{inSync(kindConfigMap, "a", cfg), inSync(kindConfigMap, "gone", cfg)}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "gone", "cfg"): opDelete}, desired: 1, inSync: 1},
		},
		{
			name: "terminating namespace: its copies are left to the namespace deletion",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"}, Terminating: map[string]bool{"leaving": true},
				Owned: []copyState{inSync(kindConfigMap, "a", cfg), inSync(kindConfigMap, "leaving", cfg)}},
			want: want{desired: 1, inSync: 1},
		},
		{
			name: "rule type changed: old kind deleted, new kind created",
			in: planInput{Kind: kindSecret, Sources: []source{reg}, Targets: []string{"a"},
				Owned: []copyState{inSync(kindConfigMap, "a", cfg)}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opDelete, key(kindSecret, "a", "reg"): opCreate}, desired: 1},
		},
		{
			name: "another rule's copy holds the name: conflict, untouched",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a", "b"},
				Occupied: map[copyKey]copyState{key(kindConfigMap, "b", "cfg"): {Key: key(kindConfigMap, "b", "cfg"), Rule: other}}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opCreate}, conflicts: map[copyKey]bool{key(kindConfigMap, "b", "cfg"): false}, desired: 2},
		},
		{
			name: "known foreign object: conflict without a new create",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a", "b"},
				KnownForeign: map[copyKey]bool{key(kindConfigMap, "a", "cfg"): true}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "b", "cfg"): opCreate}, conflicts: map[copyKey]bool{key(kindConfigMap, "a", "cfg"): true}, desired: 2},
		},
		{
			name: "a ConfigMap rule's foreign Secret of the same name is no conflict",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"},
				KnownForeign: map[copyKey]bool{key(kindSecret, "a", "cfg"): true}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opCreate}, desired: 1},
		},
		{
			name: "namespace that refuses (RBAC): its copies are left as they are",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"}, Frozen: map[string]bool{"refusing": true},
				Owned: []copyState{inSync(kindConfigMap, "a", cfg), inSync(kindConfigMap, "refusing", cfgOld)}},
			want: want{desired: 1, inSync: 1, frozen: 1},
		},
		{
			name: "namespace that refuses: a copy of a Secret type never copied still goes",
			in: planInput{Kind: kindSecret, Sources: []source{reg}, Targets: []string{"a"}, Frozen: map[string]bool{"refusing": true},
				Owned: []copyState{inSync(kindSecret, "a", reg),
					with(inSync(kindSecret, "refusing", reg), func(c *copyState) { c.Key.Name = "token"; c.Type = corev1.SecretTypeBootstrapToken })}},
			want: want{actions: map[copyKey]op{key(kindSecret, "refusing", "token"): opDelete}, desired: 1, inSync: 1},
		},
		{
			name: "two sources × two targets, mixed states",
			in: planInput{Kind: kindSecret, Sources: []source{frozen, reg}, Targets: []string{"a", "b"},
				Owned: []copyState{inSync(kindSecret, "a", reg), inSync(kindSecret, "a", frozen),
					with(inSync(kindSecret, "b", reg), func(c *copyState) { c.Hash = "edited" })}},
			want: want{actions: map[copyKey]op{key(kindSecret, "b", "reg"): opUpdate, key(kindSecret, "b", "frozen"): opCreate}, desired: 4, inSync: 2},
		},
		{
			name: "written before rule UIDs (adopting): updated where wanted, kept frozen, deleted elsewhere",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"}, Frozen: map[string]bool{"refusing": true},
				Owned: []copyState{legacy(inSync(kindConfigMap, "a", cfg)), legacy(inSync(kindConfigMap, "refusing", cfg)),
					legacy(inSync(kindConfigMap, "gone", cfg))}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opUpdate, key(kindConfigMap, "gone", "cfg"): opDelete},
				desired: 1, frozen: 1, unadopted: 1},
		},
		{
			name: "another UID (a rule of this name before): re-created where wanted, deleted elsewhere, frozen or not",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"}, Frozen: map[string]bool{"refusing": true},
				Owned: []copyState{earlier(inSync(kindConfigMap, "a", cfg)), earlier(inSync(kindConfigMap, "refusing", cfg)),
					earlier(inSync(kindConfigMap, "gone", cfg))}},
			want: want{actions: map[copyKey]op{key(kindConfigMap, "a", "cfg"): opRecreate, key(kindConfigMap, "refusing", "cfg"): opDelete,
				key(kindConfigMap, "gone", "cfg"): opDelete}, desired: 1},
		},
		{
			name: "of this rule's name and no UID, once adopted: an object it did not write",
			in: planInput{Kind: kindConfigMap, Sources: []source{cfg}, Targets: []string{"a"},
				Occupied: map[copyKey]copyState{key(kindConfigMap, "a", "cfg"): legacy(inSync(kindConfigMap, "a", cfg))}},
			want: want{conflicts: map[copyKey]bool{key(kindConfigMap, "a", "cfg"): true}, desired: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Rule = testID
			p := planCopies(tc.in)
			gotActions := map[copyKey]op{}
			for _, a := range p.Actions {
				gotActions[a.Key] = a.Op
				if a.Op == opDelete {
					assert.Nil(t, a.Source)
					require.NotNil(t, a.Existing)
				} else {
					require.NotNil(t, a.Source)
					assert.Equal(t, a.Key.Name, a.Source.Name)
				}
			}
			if tc.want.actions == nil {
				tc.want.actions = map[copyKey]op{}
			}
			assert.Equal(t, tc.want.actions, gotActions)
			gotConflicts := map[copyKey]bool{}
			for _, c := range p.Conflicts {
				gotConflicts[c.Key] = c.Foreign
				assert.NotEmpty(t, c.Reason)
			}
			if tc.want.conflicts == nil {
				tc.want.conflicts = map[copyKey]bool{}
			}
			assert.Equal(t, tc.want.conflicts, gotConflicts)
			assert.Equal(t, tc.want.desired, p.Desired, "desired")
			assert.Equal(t, tc.want.inSync, p.InSync, "in sync")
			assert.Equal(t, tc.want.frozen, p.Frozen, "frozen")
			assert.Equal(t, tc.want.unadopted, p.Unadopted, "unadopted")
		})
	}
}

func TestSelectTargetsInScope(t *testing.T) {
	namespaces := []metav1.PartialObjectMetadata{
		nsMeta("src", nil, false),
		nsMeta("a", nil, false),
		nsMeta("b", nil, false),
		nsMeta("new", nil, false),
		nsMeta("leaving", nil, true),
		nsMeta("new-leaving", nil, true),
	}
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "r"}}
	f, err := newNamespaceFilter(rule, func(string) bool { return true }, protectedNamespaces("", nil))
	require.NoError(t, err)
	for _, tc := range []struct {
		name            string
		scope           passScope
		wantTargets     []string
		wantTerminating map[string]bool
	}{
		{"every namespace", everyNamespace, []string{"a", "b", "new"}, map[string]bool{"leaving": true, "new-leaving": true}},
		{"the named ones", passScopes([]string{"new", "new-leaving", "missing"})[0], []string{"new"}, map[string]bool{"new-leaving": true}},
		{"all but the named ones", passScopes([]string{"new", "new-leaving", "missing"})[1], []string{"a", "b"}, map[string]bool{"leaving": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets, _, terminating := selectTargets(f, tc.scope, namespaces)
			assert.Equal(t, tc.wantTargets, targets)
			assert.Equal(t, tc.wantTerminating, terminating)
		})
	}
}

func TestPassScopes(t *testing.T) {
	assert.Equal(t, []passScope{everyNamespace}, passScopes(nil), "no fresh namespace: one step over all")
	steps := passScopes([]string{"x", "y"})
	require.Len(t, steps, 2)
	for _, ns := range []string{"x", "y", "z", ""} {
		assert.NotEqual(t, steps[0].covers(ns), steps[1].covers(ns), "%q is in exactly one step", ns)
		assert.True(t, everyNamespace.covers(ns))
	}
	assert.True(t, steps[0].covers("x"), "the fresh namespaces come first")
	assert.False(t, steps[0].covers("z"))
}

// The steps of a pass together plan what one step over every namespace plans.
func TestPlanCopiesInStepsEqualsOnePass(t *testing.T) {
	cfg := newSource(configMap("cfg", map[string]string{"k": "v2"}))
	cfgOld := newSource(configMap("cfg", map[string]string{"k": "v1"}))
	other := newSource(configMap("other", map[string]string{"k": "o"}))
	state := func(ns string, src source) copyState {
		return copyState{Key: copyKey{kindConfigMap, ns, src.Name}, Rule: testRule, RuleUID: string(testID.UID), Source: "src/" + src.Name,
			WrittenAs: src.Hash, Hash: src.Hash}
	}
	namespaces := []metav1.PartialObjectMetadata{
		nsMeta("a", nil, false), nsMeta("b", nil, false), nsMeta("new", nil, false),
		nsMeta("relabelled", map[string]string{LabelIgnore: "true"}, false), nsMeta("leaving", nil, true),
	}
	owned := []copyState{state("a", cfg), state("b", cfgOld), state("relabelled", cfg), state("leaving", cfg),
		state("gone", cfg), state("new", other)}
	occupied := map[copyKey]copyState{{kindConfigMap, "b", "other"}: {Rule: types.NamespacedName{Namespace: "x", Name: "y"}}}
	foreign := map[copyKey]bool{{kindConfigMap, "a", "other"}: true}
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "main-rule"}}
	f, err := newNamespaceFilter(rule, func(string) bool { return true }, protectedNamespaces("", nil))
	require.NoError(t, err)
	// input is what observe reads in scope s.
	input := func(s passScope) planInput {
		in := planInput{Rule: testID, Kind: kindConfigMap, Sources: []source{cfg, other}, KnownForeign: foreign,
			Occupied: map[copyKey]copyState{}}
		in.Targets, _, in.Terminating = selectTargets(f, s, namespaces)
		for _, c := range owned {
			if s.covers(c.Key.Namespace) {
				in.Owned = append(in.Owned, c)
			}
		}
		for k, c := range occupied {
			if s.covers(k.Namespace) {
				in.Occupied[k] = c
			}
		}
		return in
	}
	whole := planCopies(input(everyNamespace))
	for _, fresh := range [][]string{{"new"}, {"new", "relabelled"}, {"gone", "leaving", "missing"}, {"a", "b", "new", "relabelled", "leaving", "gone"}} {
		var steps plan
		for _, s := range passScopes(fresh) {
			steps = steps.merge(planCopies(input(s)))
		}
		assert.Equal(t, whole, steps, "fresh %v", fresh)
	}
	require.NotEmpty(t, whole.Actions)
	require.NotEmpty(t, whole.Conflicts)
}

func TestPlanMerge(t *testing.T) {
	key := func(ns string) copyKey { return copyKey{kindSecret, ns, "reg"} }
	a := plan{Actions: []action{{Op: opCreate, Key: key("c")}}, Conflicts: []conflict{{Key: key("d")}}, Desired: 3, InSync: 1, Frozen: 1}
	b := plan{Actions: []action{{Op: opDelete, Key: key("a")}, {Op: opUpdate, Key: key("e")}}, Conflicts: []conflict{{Key: key("b")}}, Desired: 2, InSync: 1, Frozen: 2}
	m := a.merge(b)
	assert.Equal(t, plan{
		Actions:   []action{{Op: opDelete, Key: key("a")}, {Op: opCreate, Key: key("c")}, {Op: opUpdate, Key: key("e")}},
		Conflicts: []conflict{{Key: key("b")}, {Key: key("d")}},
		Desired:   5, InSync: 2, Frozen: 3,
	}, m)
	assert.Len(t, a.Actions, 1, "the merged plans are not changed")
	assert.Equal(t, b, plan{}.merge(b))
}

func TestPlanCopiesIsDeterministic(t *testing.T) {
	var sources []source
	for _, n := range []string{"c", "a", "b"} {
		sources = append(sources, newSource(configMap(n, map[string]string{"k": n})))
	}
	in := planInput{Rule: testID, Kind: kindConfigMap, Sources: sources, Targets: []string{"z", "x", "y"}}
	first := planCopies(in)
	require.Len(t, first.Actions, 9)
	for i := 1; i < len(first.Actions); i++ {
		assert.True(t, lessKey(first.Actions[i-1].Key, first.Actions[i].Key))
	}
	for range 10 {
		assert.Equal(t, first, planCopies(in))
	}
}

func TestCleanupActions(t *testing.T) {
	copies := []copyState{
		{Key: copyKey{kindSecret, "a", "reg"}, UID: "u1"},
		{Key: copyKey{kindConfigMap, "b", "cfg"}, UID: "u2"},
		{Key: copyKey{kindSecret, "b", "token"}, UID: "u3", Type: corev1.SecretTypeBootstrapToken},
	}
	for _, tc := range []struct {
		name     string
		retainIn map[string]bool
		want     []op
	}{
		{"deletionPolicy Delete", nil, []op{opDelete, opDelete, opDelete}},
		{"Retain where every namespace consents", map[string]bool{"Secret/a": true, "ConfigMap/b": true, "Secret/b": true},
			[]op{opRelease, opRelease, opDelete}},
		{"Retain where one namespace no longer consents: its copy is deleted", map[string]bool{"ConfigMap/b": true},
			[]op{opDelete, opRelease, opDelete}},
		{"consent to one kind is not consent to the other", map[string]bool{"ConfigMap/a": true},
			[]op{opDelete, opDelete, opDelete}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			actions := cleanupActions(copies, tc.retainIn)
			require.Len(t, actions, 3)
			for i, a := range actions {
				assert.Equal(t, tc.want[i], a.Op, copies[i].Key)
				assert.Equal(t, copies[i].Key, a.Key)
				assert.Same(t, &copies[i], a.Existing, "the copy's UID and annotations guard the write")
				assert.Nil(t, a.Source)
			}
		})
	}
	assert.Empty(t, cleanupActions(nil, nil))
}

func TestFreshOnly(t *testing.T) {
	tests := []struct {
		name          string
		fresh         []string
		settled, seen string
		waited        time.Duration
		freshAlone    bool
	}{
		{name: "only new namespaces woke the rule", fresh: []string{"a"}, settled: "gen2", seen: "gen2", freshAlone: true},
		{name: "no new namespace", settled: "gen2", seen: "gen2"},
		{name: "spec changed since the last successful pass", fresh: []string{"a"}, settled: "gen2", seen: "gen3"},
		{name: "first pass", fresh: []string{"a"}, seen: "gen1"},
		{name: "a source changed, or the last pass failed", fresh: []string{"a"}, settled: "", seen: "gen2"},
		{name: "the sources were not read", fresh: []string{"a"}},
		{name: "new namespaces kept coming for maxFreshWait", fresh: []string{"a"}, settled: "gen2", seen: "gen2", waited: maxFreshWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.freshAlone, freshOnly(len(tt.fresh), tt.settled, tt.seen, tt.waited))
		})
	}
}
