package chaosagent

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

func cands(ns string, n int, replicas int32) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{Namespace: ns, Name: fmt.Sprintf("obj-%03d", i), UID: types.UID(fmt.Sprintf("%s-%d", ns, i)), Replicas: replicas}
	}
	return out
}

func kinds(actions []Action) map[blackadderv1beta1.ActionKind]int {
	out := map[blackadderv1beta1.ActionKind]int{}
	for _, a := range actions {
		out[a.Kind]++
	}
	return out
}

func TestDecide(t *testing.T) {
	all := blackadderv1beta1.ChaosAgentSpec{Eagerness: 100, MaxActionsPerRound: 10000}
	with := func(f func(*blackadderv1beta1.ChaosAgentSpec)) blackadderv1beta1.ChaosAgentSpec {
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
		spec  blackadderv1beta1.ChaosAgentSpec
		c     Candidates
		want  map[blackadderv1beta1.ActionKind]int
		check func(t *testing.T, actions []Action)
	}{
		{name: "no mode, no action", spec: with(func(*blackadderv1beta1.ChaosAgentSpec) {}),
			c: Candidates{Pods: cands("a", 5, 0), Deployments: deps, ConfigMaps: cands("a", 3, 0)}, want: map[blackadderv1beta1.ActionKind]int{}},
		{name: "tantrum below tolerance kills nothing",
			spec: with(func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode, s.PodTolerance = true, 6 }),
			c:    Candidates{Pods: cands("a", 5, 0)}, want: map[blackadderv1beta1.ActionKind]int{}},
		{name: "tantrum at tolerance kills (the original's len(pods) < tolerance test)",
			spec: with(func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode, s.PodTolerance = true, 5 }),
			c:    Candidates{Pods: cands("a", 5, 0)}, want: map[blackadderv1beta1.ActionKind]int{blackadderv1beta1.ActionKillPod: 5}},
		{name: "tolerance zero without pods kills nothing",
			spec: with(func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode = true }),
			c:    Candidates{}, want: map[blackadderv1beta1.ActionKind]int{}},
		{name: "cancer doubles up to 128 and skips 0 and the ceiling",
			spec: with(func(s *blackadderv1beta1.ChaosAgentSpec) { s.CancerMode = true }),
			c:    Candidates{Deployments: deps}, want: map[blackadderv1beta1.ActionKind]int{blackadderv1beta1.ActionScaleDeployment: 3},
			check: func(t *testing.T, actions []Action) {
				t.Helper()
				got := map[string]int32{}
				for _, a := range actions {
					got[a.Target.Name] = a.Replicas
				}
				assert.Equal(t, map[string]int32{"one": 2, "three": 6, "hundred": 128}, got)
			}},
		{name: "ipsum hits every ConfigMap at eagerness 100",
			spec: with(func(s *blackadderv1beta1.ChaosAgentSpec) { s.IpsumMode = true }),
			c:    Candidates{ConfigMaps: cands("a", 4, 0)}, want: map[blackadderv1beta1.ActionKind]int{blackadderv1beta1.ActionIpsumConfigMap: 4}},
		{name: "all modes: tantrum, then cancer, then ipsum",
			spec: with(func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode, s.CancerMode, s.IpsumMode = true, true, true }),
			c:    Candidates{Pods: cands("a", 2, 0), Deployments: cands("b", 2, 2), ConfigMaps: cands("c", 2, 0)},
			want: map[blackadderv1beta1.ActionKind]int{blackadderv1beta1.ActionKillPod: 2, blackadderv1beta1.ActionScaleDeployment: 2, blackadderv1beta1.ActionIpsumConfigMap: 2},
			check: func(t *testing.T, actions []Action) {
				t.Helper()
				assert.Equal(t, []blackadderv1beta1.ActionKind{blackadderv1beta1.ActionKillPod, blackadderv1beta1.ActionKillPod, blackadderv1beta1.ActionScaleDeployment,
					blackadderv1beta1.ActionScaleDeployment, blackadderv1beta1.ActionIpsumConfigMap, blackadderv1beta1.ActionIpsumConfigMap},
					[]blackadderv1beta1.ActionKind{actions[0].Kind, actions[1].Kind, actions[2].Kind, actions[3].Kind, actions[4].Kind, actions[5].Kind})
			}},
		{name: "maxActionsPerRound caps the blast radius, in candidate order",
			spec: with(func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode, s.MaxActionsPerRound = true, 7 }),
			c:    Candidates{Pods: cands("a", 50, 0)}, want: map[blackadderv1beta1.ActionKind]int{blackadderv1beta1.ActionKillPod: 7},
			check: func(t *testing.T, actions []Action) {
				t.Helper()
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
	spec := withDefaults(blackadderv1beta1.ChaosAgentSpec{TantrumMode: true, Eagerness: 30, MaxActionsPerRound: 10000})
	actions := decide(spec, Candidates{Pods: cands("a", 10000, 0)}, rand.New(rand.NewPCG(7, 7)))
	// 10,000 Bernoulli(0.3) draws: 3 standard deviations are ±137.
	assert.InDelta(t, 3000, len(actions), 150)
}

func TestDecideSeedIsReproducible(t *testing.T) {
	spec := withDefaults(blackadderv1beta1.ChaosAgentSpec{TantrumMode: true, CancerMode: true, IpsumMode: true, Eagerness: 40})
	c := Candidates{Pods: cands("a", 40, 0), Deployments: cands("b", 10, 3), ConfigMaps: cands("c", 10, 0)}
	first := decide(spec, c, rand.New(rand.NewPCG(42, 3)))
	assert.Equal(t, first, decide(spec, c, rand.New(rand.NewPCG(42, 3))), "same seed and round")
	assert.NotEqual(t, first, decide(spec, c, rand.New(rand.NewPCG(42, 4))), "next round differs")
	agent := &blackadderv1beta1.ChaosAgent{Spec: blackadderv1beta1.ChaosAgentSpec{Seed: ptr.To[int64](42)}}
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
	got := withDefaults(blackadderv1beta1.ChaosAgentSpec{})
	assert.EqualValues(t, 20, got.Eagerness)
	assert.EqualValues(t, 30, got.PauseDuration)
	assert.EqualValues(t, 10, got.MaxActionsPerRound)
	assert.Equal(t, blackadderv1beta1.KillMethodEvict, got.KillMethod)
	assert.True(t, *got.RestoreOnDelete)
	kept := withDefaults(blackadderv1beta1.ChaosAgentSpec{Eagerness: 5, PauseDuration: 1, MaxActionsPerRound: 3,
		KillMethod: blackadderv1beta1.KillMethodDelete, RestoreOnDelete: ptr.To(false)})
	assert.EqualValues(t, 5, kept.Eagerness)
	assert.EqualValues(t, 1, kept.PauseDuration)
	assert.EqualValues(t, 3, kept.MaxActionsPerRound)
	assert.Equal(t, blackadderv1beta1.KillMethodDelete, kept.KillMethod)
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

// scripted is a random source that returns its values in turn, so a table can say which
// draws hit.
type scripted struct{ values []uint64 }

func (s *scripted) Uint64() uint64 {
	if len(s.values) == 0 {
		panic("scripted source ran out of values")
	}
	v := s.values[0]
	s.values = s.values[1:]
	return v
}

// chanceDraw is the source value rand.Rand.Float64 turns into f.
func chanceDraw(f float64) uint64 { return uint64(f * (1 << 53)) }

// pickDraw is the source value rand.Rand.IntN(n) turns into k: the low bits for a power of
// two, else the high bits of the value times n.
func pickDraw(k, n int) uint64 {
	if n&(n-1) == 0 {
		return uint64(k)
	}
	step := ^uint64(0) / uint64(n)
	return uint64(k)*step + step/2
}

func pods(workload string, n int) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{Namespace: "a", Name: fmt.Sprintf("%s-%d", workload, i), Workload: "Deployment/a/" + workload}
	}
	return out
}

func TestPaceKills(t *testing.T) {
	two, one := pods("api", 2), pods("web", 1)
	for _, tc := range []struct {
		name   string
		pods   []Candidate
		chance float64
		draws  []uint64
		want   []string
	}{
		{name: "a hit workload loses the pod its second draw picks", pods: slices.Concat(two, one), chance: 0.5,
			draws: []uint64{chanceDraw(0.4), pickDraw(1, 2), chanceDraw(0.6)}, want: []string{"a/api-1"}},
		{name: "workloads are drawn in the order of their keys, whatever the pods' order", pods: slices.Concat(one, two), chance: 0.5,
			draws: []uint64{chanceDraw(0.7), chanceDraw(0.1), pickDraw(0, 1)}, want: []string{"a/web-0"}},
		{name: "both hit, one pod each", pods: slices.Concat(two, one), chance: 0.5,
			draws: []uint64{chanceDraw(0.49), pickDraw(0, 2), chanceDraw(0), pickDraw(0, 1)}, want: []string{"a/api-0", "a/web-0"}},
		{name: "a draw at the chance misses", pods: one, chance: 0.25, draws: []uint64{chanceDraw(0.25)}, want: []string{}},
		{name: "chance 0 never kills", pods: slices.Concat(two, one), chance: 0, draws: []uint64{0, 0}, want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &scripted{values: tc.draws}
			got := []string{}
			for _, a := range paceKills(tc.pods, tc.chance, rand.New(src)) {
				assert.Equal(t, blackadderv1beta1.ActionKillPod, a.Kind)
				got = append(got, a.Target.Key())
			}
			assert.Equal(t, tc.want, got)
			assert.Empty(t, src.values, "every draw used")
		})
	}
}

func TestKillChance(t *testing.T) {
	for _, tc := range []struct {
		pause, mean int32
		want        float64
	}{
		{30, 3600, 0.008299}, // a round every 30 s, a kill an hour
		{30, 30, 0.632121},   // 1 - 1/e
		{1, 86400, 0.0000116},
		{3600, 1, 1},
		{30, 0, 1}, // not accepted by the CRD; treated as "every round"
	} {
		assert.InDelta(t, tc.want, killChance(tc.pause, tc.mean), 1e-6, "pause %d, mean %d", tc.pause, tc.mean)
	}
}

// TestPacingPerWorkloadDoesNotGrowWithTheCluster: with meanSecondsBetweenKills a workload is
// hit as often with 1 pod as with 100, and the cluster's kills grow with its workloads only;
// per-pod eagerness, for contrast, grows with the pods (chaoskube's #20). Seeded, so exact
// figures repeat.
func TestPacingPerWorkloadDoesNotGrowWithTheCluster(t *testing.T) {
	const rounds = 10000
	paced := withDefaults(blackadderv1beta1.ChaosAgentSpec{TantrumMode: true, PauseDuration: 60, MeanSecondsBetweenKills: ptr.To[int32](600), MaxActionsPerRound: 10000})
	perPod := withDefaults(blackadderv1beta1.ChaosAgentSpec{TantrumMode: true, PauseDuration: 60, Eagerness: 10, MaxActionsPerRound: 10000})
	chance := killChance(60, 600) // about 0.095 per workload and round
	world := func(workloads, podsEach int) []Candidate {
		var out []Candidate
		for w := 0; w < workloads; w++ {
			out = append(out, pods(fmt.Sprintf("w%03d", w), podsEach)...)
		}
		slices.SortFunc(out, func(a, b Candidate) int { return strings.Compare(a.Key(), b.Key()) })
		return out
	}
	for _, tc := range []struct {
		name                string
		workloads, podsEach int
	}{
		{"one workload of one pod", 1, 1},
		{"one workload of 100 pods", 1, 100},
		{"10 workloads of 10 pods", 10, 10},
		{"10 workloads of 1 pod", 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Candidates{Pods: world(tc.workloads, tc.podsEach)}
			rng := rand.New(rand.NewPCG(20, 20))
			killed, perWorkload := 0, map[string]int{}
			for i := 0; i < rounds; i++ {
				for _, a := range decide(paced, c, rng) {
					killed++
					perWorkload[a.Target.Workload]++
				}
			}
			want := chance * rounds * float64(tc.workloads)
			// Within 4 standard deviations of the binomial mean.
			assert.InDelta(t, want, killed, 4*math.Sqrt(want), "kills grow with workloads, not pods")
			for w, n := range perWorkload {
				assert.InDelta(t, chance*rounds, n, 4*math.Sqrt(chance*rounds), "workload %s", w)
			}

			eager := 0
			for i := 0; i < 200; i++ {
				eager += len(decide(perPod, c, rng))
			}
			assert.InDelta(t, 0.1*200*float64(tc.workloads*tc.podsEach), eager, 4*math.Sqrt(0.1*200*float64(tc.workloads*tc.podsEach))+1,
				"per-pod eagerness grows with the pods")
		})
	}
}

func TestWorkloadOf(t *testing.T) {
	owned := func(kind, apiVersion, name string, controller bool, lbl map[string]string) *metav1.PartialObjectMetadata {
		p := objMeta("shop", "pod-x", lbl)
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: name, Controller: ptr.To(controller)}}
		return &p
	}
	hash := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "7d4b9c"}
	for _, tc := range []struct {
		name string
		pod  *metav1.PartialObjectMetadata
		want string
	}{
		{"a Deployment's ReplicaSet stands for the Deployment", owned("ReplicaSet", "apps/v1", "web-7d4b9c", true, hash), "Deployment/shop/web"},
		{"a Deployment named with dashes", owned("ReplicaSet", "apps/v1", "web-api-v2-7d4b9c", true, hash), "Deployment/shop/web-api-v2"},
		{"a ReplicaSet of its own (no hash label)", owned("ReplicaSet", "apps/v1", "web-7d4b9c", true, nil), "ReplicaSet/shop/web-7d4b9c"},
		{"a ReplicaSet whose name does not end with the hash", owned("ReplicaSet", "apps/v1", "web", true, hash), "ReplicaSet/shop/web"},
		{"a StatefulSet", owned("StatefulSet", "apps/v1", "db", true, nil), "StatefulSet/shop/db"},
		{"a Job", owned("Job", "batch/v1", "migrate", true, nil), "Job/shop/migrate"},
		{"an owner that is not the controller", owned("ConfigMap", "v1", "x", false, nil), "Pod/shop/pod-x"},
		{"no owner", ptr.To(objMeta("shop", "pod-x", nil)), "Pod/shop/pod-x"},
	} {
		assert.Equal(t, tc.want, workloadOf(tc.pod), tc.name)
	}
}

func TestPhaseOf(t *testing.T) {
	ended := blackadderv1beta1.ChaosRun{EndTime: ptr.To(metav1.Now())}
	for _, tc := range []struct {
		name   string
		paused bool
		run    blackadderv1beta1.ChaosRun
		open   bool
		want   phase
	}{
		{"a pause wins over everything", true, ended, false, phasePaused},
		{"an ended run stops, inside a window too", false, ended, true, phaseStopped},
		{"outside a window", false, blackadderv1beta1.ChaosRun{}, false, phaseOutsideWindow},
		{"active", false, blackadderv1beta1.ChaosRun{}, true, phaseActive},
	} {
		assert.Equal(t, tc.want, phaseOf(blackadderv1beta1.ChaosAgentSpec{Paused: tc.paused}, tc.run, tc.open), tc.name)
	}
}

// TestIdleReason: a round that decided no action is NoCandidates when its modes had nothing
// they may act on, NoneChosen when chance hit none of its candidates.
func TestIdleReason(t *testing.T) {
	spec := func(f func(*blackadderv1beta1.ChaosAgentSpec)) blackadderv1beta1.ChaosAgentSpec {
		s := withDefaults(blackadderv1beta1.ChaosAgentSpec{})
		f(&s)
		return s
	}
	tantrum := spec(func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode, s.PodTolerance = true, 3 })
	cancer := spec(func(s *blackadderv1beta1.ChaosAgentSpec) { s.CancerMode = true })
	ipsum := spec(func(s *blackadderv1beta1.ChaosAgentSpec) { s.IpsumMode = true })
	kill := []Action{{Kind: blackadderv1beta1.ActionKillPod}}
	for _, tc := range []struct {
		name    string
		spec    blackadderv1beta1.ChaosAgentSpec
		c       Candidates
		actions []Action
		want    string
	}{
		{"acted", tantrum, Candidates{Pods: cands("a", 3, 0)}, kill, ""},
		{"no mode", spec(func(*blackadderv1beta1.ChaosAgentSpec) {}), Candidates{Pods: cands("a", 3, 0), ConfigMaps: cands("a", 1, 0)}, nil, skipNoCandidates},
		{"no pods", tantrum, Candidates{ConfigMaps: cands("a", 5, 0)}, nil, skipNoCandidates},
		{"pods below podTolerance", tantrum, Candidates{Pods: cands("a", 2, 0)}, nil, skipNoCandidates},
		{"pods at podTolerance, none hit", tantrum, Candidates{Pods: cands("a", 3, 0)}, nil, skipNoneChosen},
		{"Deployments at the ceiling or at zero", cancer, Candidates{Deployments: append(cands("a", 2, MaxReplicas), cands("b", 1, 0)...)}, nil, skipNoCandidates},
		{"a Deployment to double, not hit", cancer, Candidates{Deployments: append(cands("a", 2, MaxReplicas), cands("b", 1, 4)...)}, nil, skipNoneChosen},
		{"no ConfigMaps", ipsum, Candidates{Pods: cands("a", 9, 0)}, nil, skipNoCandidates},
		{"ConfigMaps, none hit", ipsum, Candidates{ConfigMaps: cands("a", 1, 0)}, nil, skipNoneChosen},
	} {
		assert.Equal(t, tc.want, idleReason(tc.spec, tc.c, tc.actions), tc.name)
	}
}

// TestHeldBack: outside a window a round is skipped (OutsideWindow) when one is due now or
// comes due before the window opens again.
func TestHeldBack(t *testing.T) {
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	spec := withDefaults(blackadderv1beta1.ChaosAgentSpec{PauseDuration: 60})
	for _, tc := range []struct {
		name         string
		last, reopen *time.Time
		want         bool
	}{
		{"the window closed before the next round: held back", at(-10 * time.Second), at(15 * time.Hour), true},
		{"never ran: due at once", nil, at(15 * time.Hour), true},
		{"due already", at(-2 * time.Minute), at(15 * time.Hour), true},
		{"reopens before the next round comes due", at(-10 * time.Second), at(30 * time.Second), false},
		{"reopens just as it comes due", at(-10 * time.Second), at(50 * time.Second), false},
		{"no reopening in sight", at(-10 * time.Second), nil, true},
	} {
		assert.Equal(t, tc.want, heldBack(spec, tc.last, now, tc.reopen), tc.name)
	}
}

func TestRuns(t *testing.T) {
	start := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	started := blackadderv1beta1.ChaosRun{Name: "one", StartTime: ptr.To(metav1.NewTime(start))}
	ended := endRun(started, blackadderv1beta1.RunEndGuardTripped, `guard "web" tripped`, start.Add(time.Minute))

	t.Run("the recorded run while the name matches", func(t *testing.T) {
		assert.Equal(t, ended, currentRun(&ended, "one"))
		assert.Equal(t, blackadderv1beta1.ChaosRun{Name: "two"}, currentRun(&ended, "two"), "a new name starts a new run")
		assert.Equal(t, blackadderv1beta1.ChaosRun{}, currentRun(nil, ""), "an agent without a recorded run")
		got := currentRun(&started, "one")
		got.StartTime.Time = time.Time{}
		assert.Equal(t, start, started.StartTime.Time, "a copy")
	})
	t.Run("endRun records when and why", func(t *testing.T) {
		assert.Equal(t, start.Add(time.Minute), ended.EndTime.Time)
		assert.Equal(t, blackadderv1beta1.RunEndGuardTripped, ended.EndReason)
		assert.Equal(t, `guard "web" tripped`, ended.EndMessage)
		assert.Nil(t, started.EndTime, "the run passed in is left as it is")
	})
	hour := withDefaults(blackadderv1beta1.ChaosAgentSpec{DurationSeconds: ptr.To[int32](3600)})
	for _, tc := range []struct {
		name    string
		spec    blackadderv1beta1.ChaosAgentSpec
		run     blackadderv1beta1.ChaosRun
		now     time.Time
		expired bool
	}{
		{"no duration never expires", withDefaults(blackadderv1beta1.ChaosAgentSpec{}), started, start.Add(1000 * time.Hour), false},
		{"not started yet", hour, blackadderv1beta1.ChaosRun{Name: "one"}, start.Add(2 * time.Hour), false},
		{"a second before the deadline", hour, started, start.Add(time.Hour - time.Second), false},
		{"at the deadline", hour, started, start.Add(time.Hour), true},
		{"long after", hour, started, start.Add(48 * time.Hour), true},
		{"already ended by a guard", hour, ended, start.Add(2 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, expired := expireRun(tc.spec, tc.run, tc.now)
			assert.Equal(t, tc.expired, expired)
			if !expired {
				assert.Equal(t, tc.run, got)
				return
			}
			assert.Equal(t, blackadderv1beta1.RunEndDurationElapsed, got.EndReason)
			assert.Equal(t, "spec.durationSeconds (3600s) elapsed: the run started at 2026-11-26T09:00:00Z", got.EndMessage)
			assert.Equal(t, tc.now, got.EndTime.Time)
		})
	}
	assert.Equal(t, start.Add(time.Hour), *runDeadline(hour, started))
	assert.Nil(t, runDeadline(hour, blackadderv1beta1.ChaosRun{}))
}

func TestRequeueAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	assert.Equal(t, time.Duration(0), requeueAfter(now), "nothing to wait for")
	assert.Equal(t, time.Duration(0), requeueAfter(now, nil, nil))
	assert.Equal(t, 30*time.Second, requeueAfter(now, at(30*time.Second), nil, at(time.Hour)))
	assert.Equal(t, 10*time.Second, requeueAfter(now, at(30*time.Second), at(10*time.Second)), "the window closes before the next round")
	assert.Equal(t, time.Second, requeueAfter(now, at(30*time.Second), at(-time.Minute)), "past due: soon, not at once")
}

func TestSelectCandidatesFillsWorkloadsOnlyForPacing(t *testing.T) {
	p := objMeta("a", "web-7d4b9c-x", map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "7d4b9c"})
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c", Controller: ptr.To(true)}}
	inv := Inventory{Pods: []metav1.PartialObjectMetadata{p}}
	assert.Empty(t, selectCandidates(inv, Scope{}).Pods[0].Workload, "a round without pacing does not pay for it")
	assert.Equal(t, "Deployment/a/web", selectCandidates(inv, Scope{Workloads: true}).Pods[0].Workload)
	r := &Reconciler{}
	scope, err := r.scopeOf(blackadderv1beta1.ChaosAgentSpec{MeanSecondsBetweenKills: ptr.To[int32](60)})
	require.NoError(t, err)
	assert.True(t, scope.Workloads)
}
