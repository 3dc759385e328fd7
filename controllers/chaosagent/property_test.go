package chaosagent

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// world is a tiny in-memory cluster the property test lets agents loose on.
type world struct {
	nsLabels   map[string]map[string]string
	pods       []metav1.PartialObjectMetadata
	podLabels  map[string]map[string]string
	deps       map[string]*appsv1.Deployment
	hpas       []autoscalingv2.HorizontalPodAutoscaler
	cms        map[string]*corev1.ConfigMap
	learnedImm sets.Set[types.UID]
}

var propNamespaces = []string{"kube-system", "quartet-system", "a", "b", "c", "d"}

func randomWorld(rng *rand.Rand) *world {
	w := &world{nsLabels: map[string]map[string]string{}, podLabels: map[string]map[string]string{},
		deps: map[string]*appsv1.Deployment{}, cms: map[string]*corev1.ConfigMap{}, learnedImm: sets.New[types.UID]()}
	tiers := []string{"dev", "prod"}
	for _, ns := range propNamespaces {
		w.nsLabels[ns] = map[string]string{"tier": tiers[rng.IntN(2)]}
	}
	apps := []string{"web", "db", "cache"}
	for i, n := 0, rng.IntN(40); i < n; i++ {
		ns := propNamespaces[rng.IntN(len(propNamespaces))]
		p := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i),
			UID: types.UID(fmt.Sprintf("pod-%d", i)), Labels: map[string]string{"app": apps[rng.IntN(3)]}}}
		if rng.IntN(10) == 0 {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		if rng.IntN(20) == 0 {
			p.Annotations = map[string]string{mirrorPodAnnotation: "x"}
		}
		if rng.IntN(3) > 0 { // a Deployment's pod: owned by its ReplicaSet, with the hash label
			p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "5f7b9"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet",
				Name: p.Labels["app"] + "-5f7b9", Controller: ptr.To(true)}}
		}
		w.pods = append(w.pods, p)
	}
	for i, n := 0, rng.IntN(12); i < n; i++ {
		ns := propNamespaces[rng.IntN(len(propNamespaces))]
		d := deployment(ns, fmt.Sprintf("dep-%d", i), nil)
		if rng.IntN(8) > 0 {
			d.Spec.Replicas = ptr.To(int32(rng.IntN(200)))
		}
		w.deps[ns+"/"+d.Name] = &d
		if rng.IntN(5) == 0 {
			w.hpas = append(w.hpas, hpa(ns, "apps/v1", "Deployment", d.Name))
		}
	}
	for i, n := 0, rng.IntN(12); i < n; i++ {
		ns := propNamespaces[rng.IntN(len(propNamespaces))]
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%d", i), UID: types.UID(fmt.Sprintf("cm-%d", i))},
			Data: map[string]string{}}
		for k, keys := 0, rng.IntN(4); k < keys; k++ {
			cm.Data[fmt.Sprintf("key-%d", k)] = fmt.Sprintf("value %d of %s", k, cm.Name)
		}
		if rng.IntN(6) == 0 {
			cm.Immutable = ptr.To(true)
		}
		w.cms[ns+"/"+cm.Name] = cm
	}
	return w
}

func (w *world) inventory() Inventory {
	inv := Inventory{Pods: slices.Clone(w.pods), HPAs: w.hpas}
	for ns, l := range w.nsLabels {
		inv.Namespaces = append(inv.Namespaces, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: l}})
	}
	for _, d := range w.deps {
		inv.Deployments = append(inv.Deployments, *d.DeepCopy())
	}
	for _, cm := range w.cms {
		inv.ConfigMaps = append(inv.ConfigMaps, metav1.PartialObjectMetadata{ObjectMeta: *cm.ObjectMeta.DeepCopy()})
	}
	return inv
}

type snapshot struct {
	replicas map[string]*int32
	data     map[string]map[string]string
}

func (w *world) snapshot() snapshot {
	s := snapshot{replicas: map[string]*int32{}, data: map[string]map[string]string{}}
	for k, d := range w.deps {
		s.replicas[k] = ptr.To(replicasOf(d))
	}
	for k, cm := range w.cms {
		s.data[k] = maps(cm.Data)
	}
	return s
}

func maps(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func randomSpec(rng *rand.Rand) blackadderv1beta1.ChaosAgentSpec {
	spec := blackadderv1beta1.ChaosAgentSpec{
		TantrumMode: rng.IntN(2) == 0, CancerMode: rng.IntN(2) == 0, IpsumMode: rng.IntN(2) == 0,
		PodTolerance: int32(rng.IntN(25)), Eagerness: int32(1 + rng.IntN(100)), MaxActionsPerRound: int32(1 + rng.IntN(15)),
	}
	for _, ns := range propNamespaces {
		if rng.IntN(4) == 0 {
			spec.ExcludedNamespaces = append(spec.ExcludedNamespaces, ns)
		}
	}
	if rng.IntN(3) == 0 {
		spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "dev"}}
	}
	if rng.IntN(3) == 0 {
		spec.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	if rng.IntN(3) == 0 {
		spec.PauseDuration = int32(1 + rng.IntN(60))
		spec.MeanSecondsBetweenKills = ptr.To(int32(1 + rng.IntN(120)))
	}
	return withDefaults(spec)
}

// TestPropertyRandomRounds lets two agents with random specs run 10,000 rounds in total over
// random small worlds, applying what they decide with the same pure functions the controller
// uses, and checks after every round: protected, excluded, unwatched and unselected namespaces
// are never touched; a tantrum only happens at or above the tolerance; replicas never exceed
// 128 (and grow exactly by doubling); autoscaled Deployments and immutable ConfigMaps are never
// changed; the cap holds; no object is hit twice in a round; paced per workload, no workload
// loses more than one pod in a round. At the end of each world both
// agents restore, in random order, and the world must be back to its original replicas and
// data with no marks left.
func TestPropertyRandomRounds(t *testing.T) {
	const worlds, roundsPerWorld = 1000, 10
	rng := rand.New(rand.NewPCG(20220922, 4))
	operatorProtected := sets.New("kube-system", "quartet-system")
	agents := []string{"edmund", "baldrick"}
	rounds := 0
	tally := map[blackadderv1beta1.ActionKind]int{}
	for wi := 0; wi < worlds; wi++ {
		w := randomWorld(rng)
		initial := w.snapshot()
		immutable := sets.New[string]()
		for k, cm := range w.cms {
			if cm.Immutable != nil && *cm.Immutable {
				immutable.Insert(k)
			}
		}
		autoscaled := hpaTargets(w.hpas)
		specs := []blackadderv1beta1.ChaosAgentSpec{randomSpec(rng), randomSpec(rng)}
		var watched sets.Set[string]
		if rng.IntN(4) == 0 {
			watched = sets.New("a", "b", "kube-system")
		}
		for round := 0; round < roundsPerWorld; round++ {
			rounds++
			ai := rng.IntN(len(agents))
			spec := specs[ai]
			scope := Scope{Protected: operatorProtected.Clone().Insert(spec.ExcludedNamespaces...), Watched: watched,
				ImmutableConfigMaps: w.learnedImm.Clone(), Workloads: spec.MeanSecondsBetweenKills != nil}
			if spec.NamespaceSelector != nil {
				scope.NamespaceSelector = labels.SelectorFromSet(spec.NamespaceSelector.MatchLabels)
			}
			if spec.PodSelector != nil {
				scope.PodSelector = labels.SelectorFromSet(spec.PodSelector.MatchLabels)
			}
			actions := decide(spec, selectCandidates(w.inventory(), scope), rng)

			// Independent statement of where the agent may act.
			allowed := func(ns string) bool {
				if operatorProtected.Has(ns) || slices.Contains(spec.ExcludedNamespaces, ns) {
					return false
				}
				if watched != nil && !watched.Has(ns) {
					return false
				}
				return spec.NamespaceSelector == nil || w.nsLabels[ns]["tier"] == spec.NamespaceSelector.MatchLabels["tier"]
			}
			eligiblePods := 0
			for _, p := range w.pods {
				if allowed(p.Namespace) && p.DeletionTimestamp == nil && p.Annotations[mirrorPodAnnotation] == "" &&
					(spec.PodSelector == nil || p.Labels["app"] == "web") {
					eligiblePods++
				}
			}
			ctx := fmt.Sprintf("world %d round %d agent %s spec %+v", wi, round, agents[ai], spec)
			require.LessOrEqual(t, len(actions), int(spec.MaxActionsPerRound), ctx)
			seen := sets.New[string]()
			killsPerWorkload := map[string]int{}
			for _, a := range actions {
				if a.Kind == blackadderv1beta1.ActionKillPod && spec.MeanSecondsBetweenKills != nil {
					killsPerWorkload[a.Target.Workload]++
					require.Equal(t, 1, killsPerWorkload[a.Target.Workload], "paced per workload: one pod of %s at most (%s)", a.Target.Workload, ctx)
				}
				tally[a.Kind]++
				key := string(a.Kind) + "/" + a.Target.Key()
				require.False(t, seen.Has(key), "hit twice in one round: %s (%s)", key, ctx)
				seen.Insert(key)
				require.True(t, allowed(a.Target.Namespace), "touched namespace %s (%s)", a.Target.Namespace, ctx)
				switch a.Kind {
				case blackadderv1beta1.ActionKillPod:
					require.True(t, spec.TantrumMode, ctx)
					require.GreaterOrEqual(t, eligiblePods, int(spec.PodTolerance), "tantrum below tolerance (%s)", ctx)
					i := slices.IndexFunc(w.pods, func(p metav1.PartialObjectMetadata) bool { return p.UID == a.Target.UID })
					require.GreaterOrEqual(t, i, 0, ctx)
					w.pods = slices.Delete(w.pods, i, i+1)
				case blackadderv1beta1.ActionScaleDeployment:
					require.True(t, spec.CancerMode, ctx)
					require.False(t, autoscaled.Has(a.Target.Key()), "scaled an autoscaled deployment (%s)", ctx)
					dep := w.deps[a.Target.Key()]
					out, from, to, skip := cancerDeployment(dep, agents[ai])
					require.Empty(t, skip, ctx)
					require.Equal(t, a.Replicas, to, ctx)
					require.Equal(t, min(2*from, MaxReplicas), to, ctx)
					require.LessOrEqual(t, to, int32(MaxReplicas), ctx)
					w.deps[a.Target.Key()] = out
				case blackadderv1beta1.ActionIpsumConfigMap:
					require.True(t, spec.IpsumMode, ctx)
					cm := w.cms[a.Target.Key()]
					out, skip := ipsumConfigMap(cm, agents[ai], rng)
					switch skip {
					case "":
						w.cms[a.Target.Key()] = out
					case SkipImmutable:
						w.learnedImm.Insert(cm.UID)
					}
				}
			}
			for k, d := range w.deps {
				if *initial.replicas[k] <= MaxReplicas {
					require.LessOrEqual(t, replicasOf(d), int32(MaxReplicas), "%s (%s)", k, ctx)
				}
				if autoscaled.Has(k) {
					require.Equal(t, *initial.replicas[k], replicasOf(d), "autoscaled %s changed (%s)", k, ctx)
				}
			}
			for k := range immutable {
				require.Equal(t, initial.data[k], w.cms[k].Data, "immutable %s changed (%s)", k, ctx)
			}
		}

		// Undo: every agent puts back what carries its label.
		for _, ai := range rng.Perm(len(agents)) {
			for k, d := range w.deps {
				if d.Labels[LabelAgent] == agents[ai] {
					out, err := restoreDeployment(d)
					require.NoError(t, err)
					w.deps[k] = out
				}
			}
			for k, cm := range w.cms {
				if cm.Labels[LabelAgent] == agents[ai] {
					patch, err := restoreConfigMapPatch(cm)
					require.NoError(t, err)
					w.cms[k] = applyMergePatch(t, cm, patch)
				}
			}
		}
		require.Equal(t, initial, w.snapshot(), "world %d not restored", wi)
		for k, d := range w.deps {
			require.NotContains(t, d.Labels, LabelAgent, k)
			require.NotContains(t, d.Annotations, AnnotationOriginalReplicas, k)
		}
		for k, cm := range w.cms {
			require.NotContains(t, cm.Labels, LabelAgent, k)
			require.NotContains(t, cm.Annotations, AnnotationOriginalData, k)
		}
	}
	require.Equal(t, 10000, rounds)
	for _, k := range []blackadderv1beta1.ActionKind{blackadderv1beta1.ActionKillPod, blackadderv1beta1.ActionScaleDeployment, blackadderv1beta1.ActionIpsumConfigMap} {
		require.Greater(t, tally[k], 500, "the random worlds exercise %s", k)
	}
}

// applyMergePatch applies the subset of JSON merge patch that restoreConfigMapPatch produces.
func applyMergePatch(t *testing.T, cm *corev1.ConfigMap, patch []byte) *corev1.ConfigMap {
	t.Helper()
	var p struct {
		Metadata struct {
			ResourceVersion string             `json:"resourceVersion"`
			Labels          map[string]*string `json:"labels"`
			Annotations     map[string]*string `json:"annotations"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	require.NoError(t, json.Unmarshal(patch, &p))
	require.Equal(t, cm.ResourceVersion, p.Metadata.ResourceVersion)
	out := cm.DeepCopy()
	apply := func(m map[string]string, ch map[string]*string) map[string]string {
		for k, v := range ch {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	out.Labels = apply(out.Labels, p.Metadata.Labels)
	out.Annotations = apply(out.Annotations, p.Metadata.Annotations)
	for k, v := range p.Data {
		out.Data[k] = v
	}
	return out
}
