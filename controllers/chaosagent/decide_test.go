package chaosagent

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

func cands(ns string, n int, replicas int32) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{Namespace: ns, Name: fmt.Sprintf("obj-%03d", i), UID: types.UID(fmt.Sprintf("%s-%d", ns, i)), Replicas: replicas}
	}
	return out
}

func kinds(actions []Action) map[v1beta1.ActionKind]int {
	out := map[v1beta1.ActionKind]int{}
	for _, a := range actions {
		out[a.Kind]++
	}
	return out
}

func TestDecide(t *testing.T) {
	all := v1beta1.ChaosAgentSpec{Eagerness: 100, MaxActionsPerRound: 10000}
	with := func(f func(*v1beta1.ChaosAgentSpec)) v1beta1.ChaosAgentSpec {
		s := all
		f(&s)
		return withDefaults(s)
	}
	deps := []Candidate{
		{Namespace: "a", Name: "zero", Replicas: 0},
		{Namespace: "a", Name: "one", Replicas: 1},
		{Namespace: "a", Name: "three", Replicas: 3},
		{Namespace: "a", Name: "hundred", Replicas: 100},
		{Namespace: "a", Name: "ceiling", Replicas: 128},
		{Namespace: "a", Name: "above", Replicas: 200},
	}
	for _, tc := range []struct {
		name  string
		spec  v1beta1.ChaosAgentSpec
		c     Candidates
		want  map[v1beta1.ActionKind]int
		check func(t *testing.T, actions []Action)
	}{
		{name: "no mode, no action", spec: with(func(*v1beta1.ChaosAgentSpec) {}),
			c: Candidates{Pods: cands("a", 5, 0), Deployments: deps, ConfigMaps: cands("a", 3, 0)}, want: map[v1beta1.ActionKind]int{}},
		{name: "tantrum below tolerance kills nothing",
			spec: with(func(s *v1beta1.ChaosAgentSpec) { s.TantrumMode, s.PodTolerance = true, 6 }),
			c:    Candidates{Pods: cands("a", 5, 0)}, want: map[v1beta1.ActionKind]int{}},
		{name: "tantrum at tolerance kills (the original's len(pods) < tolerance test)",
			spec: with(func(s *v1beta1.ChaosAgentSpec) { s.TantrumMode, s.PodTolerance = true, 5 }),
			c:    Candidates{Pods: cands("a", 5, 0)}, want: map[v1beta1.ActionKind]int{v1beta1.ActionKillPod: 5}},
		{name: "tolerance zero without pods kills nothing",
			spec: with(func(s *v1beta1.ChaosAgentSpec) { s.TantrumMode = true }),
			c:    Candidates{}, want: map[v1beta1.ActionKind]int{}},
		{name: "cancer doubles up to 128 and skips 0 and the ceiling",
			spec: with(func(s *v1beta1.ChaosAgentSpec) { s.CancerMode = true }),
			c:    Candidates{Deployments: deps}, want: map[v1beta1.ActionKind]int{v1beta1.ActionScaleDeployment: 3},
			check: func(t *testing.T, actions []Action) {
				got := map[string]int32{}
				for _, a := range actions {
					got[a.Target.Name] = a.Replicas
				}
				assert.Equal(t, map[string]int32{"one": 2, "three": 6, "hundred": 128}, got)
			}},
		{name: "ipsum hits every ConfigMap at eagerness 100",
			spec: with(func(s *v1beta1.ChaosAgentSpec) { s.IpsumMode = true }),
			c:    Candidates{ConfigMaps: cands("a", 4, 0)}, want: map[v1beta1.ActionKind]int{v1beta1.ActionIpsumConfigMap: 4}},
		{name: "all modes: tantrum, then cancer, then ipsum",
			spec: with(func(s *v1beta1.ChaosAgentSpec) { s.TantrumMode, s.CancerMode, s.IpsumMode = true, true, true }),
			c:    Candidates{Pods: cands("a", 2, 0), Deployments: cands("b", 2, 2), ConfigMaps: cands("c", 2, 0)},
			want: map[v1beta1.ActionKind]int{v1beta1.ActionKillPod: 2, v1beta1.ActionScaleDeployment: 2, v1beta1.ActionIpsumConfigMap: 2},
			check: func(t *testing.T, actions []Action) {
				assert.Equal(t, []v1beta1.ActionKind{v1beta1.ActionKillPod, v1beta1.ActionKillPod, v1beta1.ActionScaleDeployment,
					v1beta1.ActionScaleDeployment, v1beta1.ActionIpsumConfigMap, v1beta1.ActionIpsumConfigMap},
					[]v1beta1.ActionKind{actions[0].Kind, actions[1].Kind, actions[2].Kind, actions[3].Kind, actions[4].Kind, actions[5].Kind})
			}},
		{name: "maxActionsPerRound caps the blast radius, in candidate order",
			spec: with(func(s *v1beta1.ChaosAgentSpec) { s.TantrumMode, s.MaxActionsPerRound = true, 7 }),
			c:    Candidates{Pods: cands("a", 50, 0)}, want: map[v1beta1.ActionKind]int{v1beta1.ActionKillPod: 7},
			check: func(t *testing.T, actions []Action) {
				for i := 1; i < len(actions); i++ {
					assert.Less(t, actions[i-1].Target.Name, actions[i].Target.Name)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			actions := decide(tc.spec, tc.c, rand.New(rand.NewPCG(1, 2)))
			assert.Equal(t, tc.want, kinds(actions))
			if tc.check != nil {
				tc.check(t, actions)
			}
		})
	}
}

func TestDecideEagernessIsAProbability(t *testing.T) {
	spec := withDefaults(v1beta1.ChaosAgentSpec{TantrumMode: true, Eagerness: 30, MaxActionsPerRound: 10000})
	actions := decide(spec, Candidates{Pods: cands("a", 10000, 0)}, rand.New(rand.NewPCG(7, 7)))
	// 10,000 Bernoulli(0.3) draws: 3 standard deviations are ±137.
	assert.InDelta(t, 3000, len(actions), 150)
}

func TestDecideSeedIsReproducible(t *testing.T) {
	spec := withDefaults(v1beta1.ChaosAgentSpec{TantrumMode: true, CancerMode: true, IpsumMode: true, Eagerness: 40})
	c := Candidates{Pods: cands("a", 40, 0), Deployments: cands("b", 10, 3), ConfigMaps: cands("c", 10, 0)}
	first := decide(spec, c, rand.New(rand.NewPCG(42, 3)))
	assert.Equal(t, first, decide(spec, c, rand.New(rand.NewPCG(42, 3))), "same seed and round")
	assert.NotEqual(t, first, decide(spec, c, rand.New(rand.NewPCG(42, 4))), "next round differs")
	agent := &v1beta1.ChaosAgent{Spec: v1beta1.ChaosAgentSpec{Seed: ptr.To[int64](42)}}
	assert.Equal(t, first, decide(spec, c, seededRand(agent, 3)), "seededRand uses spec.seed and the round")
}

func TestCapActions(t *testing.T) {
	actions := make([]Action, 10)
	for i := range actions {
		actions[i] = Action{Target: Candidate{Name: fmt.Sprint(i)}}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct{ limit, want int }{{-1, 0}, {0, 0}, {3, 3}, {10, 10}, {20, 10}} {
		assert.Len(t, capActions(actions, tc.limit, rng), tc.want, "limit %d", tc.limit)
	}
	// Every action is kept with about the same probability.
	seen := map[string]int{}
	for i := 0; i < 5000; i++ {
		for _, a := range capActions(actions, 2, rng) {
			seen[a.Target.Name]++
		}
	}
	for name, n := range seen {
		assert.InDelta(t, 1000, n, 150, "action %s", name)
	}
}

func TestWithDefaults(t *testing.T) {
	got := withDefaults(v1beta1.ChaosAgentSpec{})
	assert.EqualValues(t, 20, got.Eagerness)
	assert.EqualValues(t, 30, got.PauseDuration)
	assert.EqualValues(t, 10, got.MaxActionsPerRound)
	assert.Equal(t, v1beta1.KillMethodEvict, got.KillMethod)
	assert.True(t, *got.RestoreOnDelete)
	kept := withDefaults(v1beta1.ChaosAgentSpec{Eagerness: 5, PauseDuration: 1, MaxActionsPerRound: 3,
		KillMethod: v1beta1.KillMethodDelete, RestoreOnDelete: ptr.To(false)})
	assert.EqualValues(t, 5, kept.Eagerness)
	assert.EqualValues(t, 1, kept.PauseDuration)
	assert.EqualValues(t, 3, kept.MaxActionsPerRound)
	assert.Equal(t, v1beta1.KillMethodDelete, kept.KillMethod)
	assert.False(t, *kept.RestoreOnDelete)
}

func objMeta(ns, name string, lbl map[string]string) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl, UID: types.UID(ns + "/" + name)}}
}

func deployment(ns, name string, replicas *int32) appsv1.Deployment {
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec: appsv1.DeploymentSpec{Replicas: replicas}}
}

func hpa(ns, apiVersion, kind, target string) autoscalingv2.HorizontalPodAutoscaler {
	return autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hpa-" + target},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: target}}}
}

func names(cs []Candidate) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Key())
	}
	return out
}

func TestSelectCandidates(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	terminating := objMeta("a", "terminating", nil)
	terminating.DeletionTimestamp = &now
	mirror := objMeta("a", "mirror", nil)
	mirror.Annotations = map[string]string{mirrorPodAnnotation: "x"}
	inv := Inventory{
		Namespaces: []metav1.PartialObjectMetadata{
			objMeta("", "a", map[string]string{"chaos": "yes"}), objMeta("", "b", map[string]string{"chaos": "no"}),
			objMeta("", "kube-system", map[string]string{"chaos": "yes"}), objMeta("", "c", map[string]string{"chaos": "yes"})},
		Pods: []metav1.PartialObjectMetadata{
			objMeta("c", "web-2", map[string]string{"app": "web"}), objMeta("a", "web-1", map[string]string{"app": "web"}),
			objMeta("a", "db-1", map[string]string{"app": "db"}), objMeta("b", "web-3", map[string]string{"app": "web"}),
			objMeta("kube-system", "dns", map[string]string{"app": "web"}), terminating, mirror},
		Deployments: []appsv1.Deployment{
			deployment("a", "web", ptr.To[int32](2)), deployment("a", "defaulted", nil), deployment("a", "scaled", ptr.To[int32](3)),
			deployment("a", "scaled-v2", ptr.To[int32](3)), deployment("a", "statefulset-named", ptr.To[int32](3)),
			deployment("kube-system", "coredns", ptr.To[int32](2))},
		HPAs: []autoscalingv2.HorizontalPodAutoscaler{
			hpa("a", "apps/v1", "Deployment", "scaled"), hpa("a", "", "Deployment", "scaled-v2"),
			hpa("a", "apps/v1", "StatefulSet", "statefulset-named"), hpa("b", "apps/v1", "Deployment", "web")},
		ConfigMaps: []metav1.PartialObjectMetadata{objMeta("a", "settings", nil), objMeta("a", "frozen", nil), objMeta("kube-system", "kubeadm-config", nil),
			objMeta("a", "kube-root-ca.crt", nil), objMeta("b", "openshift-service-ca.crt", nil)},
	}
	sel := func(s string) labels.Selector { l, err := labels.Parse(s); require.NoError(t, err); return l }
	base := Scope{Protected: sets.New("kube-system"), ImmutableConfigMaps: sets.New[types.UID]("a/frozen")}
	for _, tc := range []struct {
		name                string
		scope               func(s *Scope)
		pods, deps, configs []string
	}{
		{name: "protected namespaces, terminating and mirror pods, autoscaled, immutable and the cluster's own CA ConfigMaps are left out",
			scope:   func(*Scope) {},
			pods:    []string{"a/db-1", "a/web-1", "b/web-3", "c/web-2"},
			deps:    []string{"a/defaulted", "a/statefulset-named", "a/web"},
			configs: []string{"a/settings"}},
		{name: "excluded namespaces",
			scope:   func(s *Scope) { s.Protected = s.Protected.Clone().Insert("a", "b") },
			pods:    []string{"c/web-2"},
			deps:    []string{},
			configs: []string{}},
		{name: "only watched namespaces",
			scope:   func(s *Scope) { s.Watched = sets.New("b", "kube-system") },
			pods:    []string{"b/web-3"},
			deps:    []string{},
			configs: []string{}},
		{name: "namespace selector (kube-system stays protected though it matches)",
			scope:   func(s *Scope) { s.NamespaceSelector = sel("chaos=yes") },
			pods:    []string{"a/db-1", "a/web-1", "c/web-2"},
			deps:    []string{"a/defaulted", "a/statefulset-named", "a/web"},
			configs: []string{"a/settings"}},
		{name: "pod selector narrows pods only",
			scope:   func(s *Scope) { s.PodSelector = sel("app=web") },
			pods:    []string{"a/web-1", "b/web-3", "c/web-2"},
			deps:    []string{"a/defaulted", "a/statefulset-named", "a/web"},
			configs: []string{"a/settings"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scope := base
			tc.scope(&scope)
			c := selectCandidates(inv, scope)
			assert.Equal(t, tc.pods, names(c.Pods), "pods")
			assert.Equal(t, tc.deps, names(c.Deployments), "deployments")
			assert.Equal(t, tc.configs, names(c.ConfigMaps), "configmaps")
		})
	}
	c := selectCandidates(inv, base)
	assert.EqualValues(t, 1, c.Deployments[0].Replicas, "unset replicas count as 1")
}

func TestScopeAllows(t *testing.T) {
	s := Scope{Protected: sets.New("kube-system", "ops")}
	assert.True(t, s.Allows("a"))
	assert.False(t, s.Allows("kube-system"))
	assert.False(t, s.Allows(""))
	s.Watched = sets.New("a")
	assert.True(t, s.Allows("a"))
	assert.False(t, s.Allows("b"))
}

func TestRestoreSkip(t *testing.T) {
	scope := Scope{Protected: sets.New("kube-system", "quartet-system", "excluded"), Watched: sets.New("tenant", "kube-system", "excluded")}
	for _, tc := range []struct {
		name      string
		namespace string
		immutable bool
		want      string
	}{
		{"in scope: put back", "tenant", false, ""},
		{"protected namespace", "kube-system", false, SkipOutOfScope},
		{"operator's namespace (protected, not watched)", "quartet-system", false, SkipOutOfScope},
		{"excluded by the agent", "excluded", false, SkipOutOfScope},
		{"not watched", "elsewhere", false, SkipOutOfScope},
		{"no namespace", "", false, SkipOutOfScope},
		{"immutable ConfigMap in scope: reported, never retried", "tenant", true, SkipImmutable},
		{"out of scope wins over immutable", "kube-system", true, SkipOutOfScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, detail := restoreSkip(scope, tc.namespace, tc.immutable)
			assert.Equal(t, tc.want, reason)
			if tc.want == "" {
				assert.Empty(t, detail)
			} else {
				assert.Contains(t, detail, "marks kept", "the detail says the object keeps its marks")
			}
		})
	}
}
