package chaosagent

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// checkNames returns the names of a chain's checks, in order.
func checkNames[T any](c chain[T]) []string {
	out := make([]string, 0, len(c))
	for _, chk := range c {
		name := runtime.FuncForPC(reflect.ValueOf(chk).Pointer()).Name()
		out = append(out, name[strings.LastIndex(name, ".")+1:])
	}
	return out
}

// TestChainOrder pins which checks each chain runs, and in which order: the order decides
// which reason an object refused for several is given, and that the cheap checks run first.
func TestChainOrder(t *testing.T) {
	assert.Equal(t, []string{"namespaceNamed", "namespaceNotProtected", "namespaceWatched"}, checkNames(scopeChain))
	assert.Equal(t, []string{"namespaceNamed", "namespaceNotProtected", "namespaceWatched", "namespaceSelected"}, checkNames(namespaceChain))
	assert.Equal(t, checkNames(scopeChain), checkNames(namespaceChain)[:len(scopeChain)], "a round chooses only where Allows lets actions write")
	assert.Equal(t, []string{"inSelectedNamespace", "notTerminating", "notMirrorPod", "podSelected"}, checkNames(podChain))
	assert.Equal(t, []string{"inSelectedNamespace", "notTerminating", "notAutoscaled"}, checkNames(deploymentChain))
	assert.Equal(t, []string{"inSelectedNamespace", "notTerminating", "notKnownImmutable", "notClusterConfigMap"}, checkNames(configMapChain))
	assert.Equal(t, []string{"restoreInScope", "restoreMutable"}, checkNames(restoreChain))
}

func TestChainEvaluate(t *testing.T) {
	pass := func(int) (string, string, bool) { return "", "", false }
	odd := func(n int) (string, string, bool) { return "Odd", "odd number", n%2 == 1 }
	big := func(n int) (string, string, bool) { return "Big", "above 10", n > 10 }
	c := chain[int]{pass, odd, big}
	for _, tc := range []struct {
		in              int
		reason, message string
		refused         bool
	}{
		{in: 4},
		{in: 3, reason: "Odd", message: "odd number", refused: true},
		{in: 12, reason: "Big", message: "above 10", refused: true},
		{in: 13, reason: "Odd", message: "odd number", refused: true}, // the first refusal wins
	} {
		reason, message, refused := c.Evaluate(tc.in)
		assert.Equal(t, tc.reason, reason, "%d", tc.in)
		assert.Equal(t, tc.message, message, "%d", tc.in)
		assert.Equal(t, tc.refused, refused, "%d", tc.in)
	}
	reason, message, refused := chain[int]{}.Evaluate(1)
	assert.Equal(t, []any{"", "", false}, []any{reason, message, refused}, "an empty chain refuses nothing")
}

func TestNamespaceChecks(t *testing.T) {
	chaos, err := labels.Parse("chaos=yes")
	require.NoError(t, err)
	scope := Scope{Protected: sets.New("kube-system", "excluded"), Watched: sets.New("a", "kube-system", "excluded"), NamespaceSelector: chaos}
	selected := labels.Set{"chaos": "yes"}
	for _, tc := range []struct {
		name   string
		check  check[namespaceInput]
		in     namespaceInput
		reason string // "" when the check passes
	}{
		{"named: an object without namespace", namespaceNamed, namespaceInput{Scope: scope}, refusedNoNamespace},
		{"named: a namespaced object", namespaceNamed, namespaceInput{Name: "kube-system", Scope: scope}, ""},
		{"not protected: protected", namespaceNotProtected, namespaceInput{Name: "kube-system", Scope: scope}, refusedProtectedNamespace},
		{"not protected: excluded by the agent", namespaceNotProtected, namespaceInput{Name: "excluded", Scope: scope}, refusedProtectedNamespace},
		{"not protected: any other, watched or not", namespaceNotProtected, namespaceInput{Name: "elsewhere", Scope: scope}, ""},
		{"not protected: none protected", namespaceNotProtected, namespaceInput{Name: "kube-system"}, ""},
		{"watched: not watched", namespaceWatched, namespaceInput{Name: "elsewhere", Scope: scope}, refusedNamespaceNotWatched},
		{"watched: watched", namespaceWatched, namespaceInput{Name: "a", Scope: scope}, ""},
		{"watched: the manager watches all", namespaceWatched, namespaceInput{Name: "elsewhere"}, ""},
		{"selected: labels match", namespaceSelected, namespaceInput{Name: "a", Scope: scope, Listed: true, Labels: selected}, ""},
		{"selected: labels do not match", namespaceSelected, namespaceInput{Name: "a", Scope: scope, Listed: true, Labels: labels.Set{"chaos": "no"}}, refusedNamespaceNotSelected},
		{"selected: no labels", namespaceSelected, namespaceInput{Name: "a", Scope: scope, Listed: true}, refusedNamespaceNotSelected},
		{"selected: not in the inventory", namespaceSelected, namespaceInput{Name: "a", Scope: scope, Labels: selected}, refusedNamespaceNotSelected},
		{"selected: no selector", namespaceSelected, namespaceInput{Name: "a"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, message, refused := tc.check(tc.in)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.reason != "", refused)
			assert.Equal(t, tc.reason != "", message != "", "a refusal says why, a pass says nothing: %q", message)
		})
	}
}

func TestCandidateChecks(t *testing.T) {
	chaos, err := labels.Parse("chaos=yes")
	require.NoError(t, err)
	web, err := labels.Parse("app=web")
	require.NoError(t, err)
	inv := Inventory{
		Namespaces: []metav1.PartialObjectMetadata{objMeta("", "a", map[string]string{"chaos": "yes"}), objMeta("", "b", nil)},
		HPAs: []autoscalingv2.HorizontalPodAutoscaler{
			hpa("a", "apps/v1", "Deployment", "scaled"), hpa("a", "apps/v1", "StatefulSet", "db")},
	}
	scope := Scope{Protected: sets.New("kube-system"), NamespaceSelector: chaos, PodSelector: web, ImmutableConfigMaps: sets.New[types.UID]("a/frozen")}
	now := metav1.NewTime(time.Unix(1000, 0))
	meta := func(ns, name string, f func(m *metav1.ObjectMeta)) *metav1.ObjectMeta {
		m := objMeta(ns, name, map[string]string{"app": "web"}).ObjectMeta
		if f != nil {
			f(&m)
		}
		return &m
	}
	for _, tc := range []struct {
		name   string
		check  check[candidateInput]
		meta   *metav1.ObjectMeta
		scope  func(*Scope)
		reason string // "" when the check passes
	}{
		{name: "namespace: selected", check: inSelectedNamespace, meta: meta("a", "x", nil)},
		{name: "namespace: protected, whatever its labels", check: inSelectedNamespace, meta: meta("kube-system", "x", nil), reason: refusedProtectedNamespace},
		{name: "namespace: not selected", check: inSelectedNamespace, meta: meta("b", "x", nil), reason: refusedNamespaceNotSelected},
		{name: "namespace: not watched", check: inSelectedNamespace, meta: meta("a", "x", nil), scope: func(s *Scope) { s.Watched = sets.New("b") }, reason: refusedNamespaceNotWatched},
		{name: "namespace: none", check: inSelectedNamespace, meta: meta("", "x", nil), reason: refusedNoNamespace},
		{name: "terminating", check: notTerminating, meta: meta("a", "x", func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now }), reason: refusedTerminating},
		{name: "not terminating", check: notTerminating, meta: meta("a", "x", nil)},
		{name: "mirror pod", check: notMirrorPod, meta: meta("a", "x", func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{mirrorPodAnnotation: "x"} }), reason: refusedMirrorPod},
		{name: "mirror pod: the annotation's value does not matter", check: notMirrorPod, meta: meta("a", "x", func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{mirrorPodAnnotation: ""} }), reason: refusedMirrorPod},
		{name: "not a mirror pod", check: notMirrorPod, meta: meta("a", "x", func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"other": "x"} })},
		{name: "pod selected", check: podSelected, meta: meta("a", "x", nil)},
		{name: "pod not selected", check: podSelected, meta: meta("a", "x", func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"app": "db"} }), reason: refusedPodNotSelected},
		{name: "pod without labels not selected", check: podSelected, meta: meta("a", "x", func(m *metav1.ObjectMeta) { m.Labels = nil }), reason: refusedPodNotSelected},
		{name: "no pod selector", check: podSelected, meta: meta("a", "x", func(m *metav1.ObjectMeta) { m.Labels = nil }), scope: func(s *Scope) { s.PodSelector = nil }},
		{name: "autoscaled", check: notAutoscaled, meta: meta("a", "scaled", nil), reason: refusedAutoscaled},
		{name: "autoscaler of another kind of the same name", check: notAutoscaled, meta: meta("a", "db", nil)},
		{name: "autoscaler in another namespace", check: notAutoscaled, meta: meta("b", "scaled", nil)},
		{name: "known immutable", check: notKnownImmutable, meta: meta("a", "frozen", nil), reason: refusedKnownImmutable},
		{name: "immutability is known by UID", check: notKnownImmutable, meta: meta("a", "frozen", func(m *metav1.ObjectMeta) { m.UID = "a/frozen-recreated" })},
		{name: "cluster CA bundle", check: notClusterConfigMap, meta: meta("a", "kube-root-ca.crt", nil), reason: refusedClusterConfigMap},
		{name: "OpenShift service CA bundle", check: notClusterConfigMap, meta: meta("a", "openshift-service-ca.crt", nil), reason: refusedClusterConfigMap},
		{name: "any other ConfigMap", check: notClusterConfigMap, meta: meta("a", "kube-root-ca", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scope
			if tc.scope != nil {
				tc.scope(&s)
			}
			reason, message, refused := tc.check(candidateInput{Meta: tc.meta, Round: newRoundScope(inv, s)})
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.reason != "", refused)
			assert.Equal(t, tc.reason != "", message != "", "a refusal says why, a pass says nothing: %q", message)
		})
	}
}

// TestChainsFirstRefusal shows the order at work: an object every check of its chain refuses
// is refused for the first, and once that is lifted, for the next.
func TestChainsFirstRefusal(t *testing.T) {
	web, err := labels.Parse("app=web")
	require.NoError(t, err)
	now := metav1.NewTime(time.Unix(1000, 0))
	inv := Inventory{HPAs: []autoscalingv2.HorizontalPodAutoscaler{hpa("kube-system", "apps/v1", "Deployment", "x")}}
	scope := Scope{Protected: sets.New("kube-system"), PodSelector: web, ImmutableConfigMaps: sets.New[types.UID]("kube-system/kube-root-ca.crt")}
	worst := func(name string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Namespace: "kube-system", Name: name, UID: types.UID("kube-system/" + name), DeletionTimestamp: &now,
			Annotations: map[string]string{mirrorPodAnnotation: "x"}, Labels: map[string]string{"app": "db"}}
	}
	for _, tc := range []struct {
		name  string
		chain chain[candidateInput]
		meta  *metav1.ObjectMeta
		lift  []func(m *metav1.ObjectMeta, s *Scope)
		want  []string
	}{
		{name: "pod", chain: podChain, meta: worst("x"),
			lift: []func(*metav1.ObjectMeta, *Scope){
				func(_ *metav1.ObjectMeta, s *Scope) { s.Protected = nil },
				func(m *metav1.ObjectMeta, _ *Scope) { m.DeletionTimestamp = nil },
				func(m *metav1.ObjectMeta, _ *Scope) { m.Annotations = nil },
				func(m *metav1.ObjectMeta, _ *Scope) { m.Labels = map[string]string{"app": "web"} },
			},
			want: []string{refusedProtectedNamespace, refusedTerminating, refusedMirrorPod, refusedPodNotSelected, ""}},
		{name: "deployment", chain: deploymentChain, meta: worst("x"),
			lift: []func(*metav1.ObjectMeta, *Scope){
				func(_ *metav1.ObjectMeta, s *Scope) { s.Protected = nil },
				func(m *metav1.ObjectMeta, _ *Scope) { m.DeletionTimestamp = nil },
				func(m *metav1.ObjectMeta, _ *Scope) { m.Name = "y" },
			},
			want: []string{refusedProtectedNamespace, refusedTerminating, refusedAutoscaled, ""}},
		{name: "configmap", chain: configMapChain, meta: worst("kube-root-ca.crt"),
			lift: []func(*metav1.ObjectMeta, *Scope){
				func(_ *metav1.ObjectMeta, s *Scope) { s.Protected = nil },
				func(m *metav1.ObjectMeta, _ *Scope) { m.DeletionTimestamp = nil },
				func(_ *metav1.ObjectMeta, s *Scope) { s.ImmutableConfigMaps = nil },
				func(m *metav1.ObjectMeta, _ *Scope) { m.Name = "settings" },
			},
			want: []string{refusedProtectedNamespace, refusedTerminating, refusedKnownImmutable, refusedClusterConfigMap, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, s := *tc.meta, scope
			var got []string
			for i := 0; ; i++ {
				reason, _, _ := tc.chain.Evaluate(candidateInput{Meta: &m, Round: newRoundScope(inv, s)})
				got = append(got, reason)
				if i == len(tc.lift) {
					break
				}
				tc.lift[i](&m, &s)
			}
			assert.Equal(t, tc.want, got)
		})
	}
	for _, tc := range []struct {
		in   restoreInput
		want string
	}{
		{restoreInput{Scope: scope, Namespace: "kube-system", Immutable: true}, SkipOutOfScope},
		{restoreInput{Scope: scope, Namespace: "a", Immutable: true}, SkipImmutable},
		{restoreInput{Scope: scope, Namespace: "a"}, ""},
	} {
		reason, _, _ := restoreChain.Evaluate(tc.in)
		assert.Equal(t, tc.want, reason, "restore %+v", tc.in)
	}
}

func TestRoundScopeEvaluatesANamespaceOnce(t *testing.T) {
	chaos, err := labels.Parse("chaos=yes")
	require.NoError(t, err)
	inv := Inventory{Namespaces: []metav1.PartialObjectMetadata{objMeta("", "a", map[string]string{"chaos": "yes"})}}
	r := newRoundScope(inv, Scope{NamespaceSelector: chaos})
	assert.False(t, r.namespace("a").Refused)
	assert.Equal(t, refusedNamespaceNotSelected, r.namespace("b").Reason, "not in the inventory")
	r.nsLabels["a"] = labels.Set{"chaos": "no"} // a verdict holds for the whole round
	assert.False(t, r.namespace("a").Refused)
	assert.Len(t, r.verdicts, 2)
	assert.Nil(t, newRoundScope(inv, Scope{}).nsLabels, "no labels are gathered without a namespace selector")
}

func TestGrowable(t *testing.T) {
	for _, tc := range []struct {
		replicas int32
		reason   string
	}{
		{-1, SkipZeroReplicas},
		{0, SkipZeroReplicas},
		{1, ""},
		{64, ""},
		{MaxReplicas - 1, ""},
		{MaxReplicas, SkipAtLimit},
		{MaxReplicas + 1, SkipAtLimit},
	} {
		reason, message, refused := growable(tc.replicas)
		assert.Equal(t, tc.reason, reason, "%d replicas", tc.replicas)
		assert.Equal(t, tc.reason != "", refused, "%d replicas", tc.replicas)
		assert.Equal(t, tc.reason != "", message != "", "%d replicas", tc.replicas)
	}
}
