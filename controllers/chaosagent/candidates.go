package chaosagent

import (
	"cmp"
	"slices"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Which objects a round may choose, and which marked objects restore leaves alone, is decided
// by chains of named checks, after cert-manager's policy chains: a chain stops at the first
// check that refuses, so the order decides which reason an object refused for several gets
// (docs/chaosagent.md lists them). A candidate's reasons are not shown anywhere yet.

// check is one rule about in: refused, with a CamelCase reason and a message that does not
// name the object (whoever shows it does), when in breaks it.
type check[T any] func(in T) (reason, message string, refused bool)

type chain[T any] []check[T]

// Evaluate returns the first refusal of the chain's checks.
func (c chain[T]) Evaluate(in T) (reason, message string, refused bool) {
	for _, chk := range c {
		if reason, message, refused := chk(in); refused {
			return reason, message, true
		}
	}
	return "", "", false
}

// refuse is a check's answer: reason and message when refused, else nothing.
func refuse(refused bool, reason, message string) (string, string, bool) {
	if !refused {
		return "", "", false
	}
	return reason, message, true
}

// Candidate is one object a round may hit.
type Candidate struct {
	Namespace string
	Name      string
	UID       types.UID
	Replicas  int32  // a Deployment's spec.replicas
	Workload  string // a pod's: Kind/namespace/name of what owns it (with Scope.Workloads)
}

// Key returns namespace/name.
func (c Candidate) Key() string { return c.Namespace + "/" + c.Name }

func (c Candidate) objectKey() types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

// Candidates are the objects a round chooses from, sorted so that a seeded round repeats.
type Candidates struct {
	Pods        []Candidate
	Deployments []Candidate
	ConfigMaps  []Candidate
}

// Scope says which namespaces and objects an agent may touch.
type Scope struct {
	Protected           sets.Set[string]    // the operator's protected namespaces and the agent's excludedNamespaces
	Watched             sets.Set[string]    // the namespaces the manager watches; empty means all
	NamespaceSelector   labels.Selector     // when not nil, must match the namespace's labels
	PodSelector         labels.Selector     // when not nil, must match the pod's labels
	ImmutableConfigMaps sets.Set[types.UID] // found immutable earlier (the metadata cache cannot tell)
	Workloads           bool                // fill each pod's workload, which only pacing per workload needs
}

// Allows reports whether scopeChain lets an agent touch namespace ns; actions and restores ask
// it again just before they write, as a second guard.
func (s Scope) Allows(ns string) bool {
	_, _, refused := scopeChain.Evaluate(namespaceInput{Name: ns, Scope: s})
	return !refused
}

// Reasons the candidate checks give.
const (
	refusedNoNamespace          = "NoNamespace"
	refusedProtectedNamespace   = "ProtectedNamespace"
	refusedNamespaceNotWatched  = "NamespaceNotWatched"
	refusedNamespaceNotSelected = "NamespaceNotSelected"
	refusedTerminating          = "Terminating"
	refusedMirrorPod            = "MirrorPod"
	refusedPodNotSelected       = "PodNotSelected"
	refusedAutoscaled           = "Autoscaled"
	refusedKnownImmutable       = "KnownImmutable"
	refusedClusterConfigMap     = "ClusterConfigMap"
)

// namespaceInput is a namespace, the scope and (with a namespace selector) the namespace's labels.
type namespaceInput struct {
	Name   string
	Scope  Scope
	Listed bool
	Labels labels.Set
}

var (
	// scopeChain is where an agent may write at all (Allows). It leaves out the namespace
	// selector: a namespace relabelled since an object was changed is still put back.
	scopeChain = chain[namespaceInput]{namespaceNamed, namespaceNotProtected, namespaceWatched}
	// namespaceChain is where a round may choose objects.
	namespaceChain = chain[namespaceInput]{namespaceNamed, namespaceNotProtected, namespaceWatched, namespaceSelected}
)

// namespaceNamed refuses cluster-scoped objects: the agent never touches them.
func namespaceNamed(in namespaceInput) (reason, message string, refused bool) {
	return refuse(in.Name == "", refusedNoNamespace, "the object has no namespace")
}

// namespaceNotProtected refuses the protected namespaces and the agent's excludedNamespaces.
func namespaceNotProtected(in namespaceInput) (reason, message string, refused bool) {
	return refuse(in.Scope.Protected.Has(in.Name), refusedProtectedNamespace, "namespace is protected, or excluded by the agent")
}

// namespaceWatched refuses namespaces the manager does not watch (none when it watches all).
func namespaceWatched(in namespaceInput) (reason, message string, refused bool) {
	return refuse(in.Scope.Watched.Len() > 0 && !in.Scope.Watched.Has(in.Name), refusedNamespaceNotWatched, "namespace is not watched by the operator")
}

// namespaceSelected refuses the namespaces the selector does not match, or whose labels are unknown.
func namespaceSelected(in namespaceInput) (reason, message string, refused bool) {
	sel := in.Scope.NamespaceSelector
	switch {
	case sel == nil:
		return "", "", false
	case !in.Listed:
		return refusedNamespaceNotSelected, "namespace not found in the cache, so spec.namespaceSelector cannot match it", true
	}
	return refuse(!sel.Matches(in.Labels), refusedNamespaceNotSelected, "namespace does not match spec.namespaceSelector")
}

// verdict is a chain's answer, kept for later objects of the same namespace.
type verdict struct {
	Reason, Message string
	Refused         bool
}

// roundScope is what the candidate checks of one round share: the scope, the Deployments a
// HorizontalPodAutoscaler scales, the namespaces' labels (with a namespace selector) and
// namespaceChain's verdicts, evaluated once per namespace.
type roundScope struct {
	Scope      Scope
	Autoscaled sets.Set[string]
	nsLabels   map[string]labels.Set
	verdicts   map[string]verdict
}

func newRoundScope(inv Inventory, scope Scope) *roundScope {
	r := &roundScope{Scope: scope, Autoscaled: hpaTargets(inv.HPAs), verdicts: map[string]verdict{}}
	if scope.NamespaceSelector != nil {
		r.nsLabels = make(map[string]labels.Set, len(inv.Namespaces))
		for i := range inv.Namespaces {
			r.nsLabels[inv.Namespaces[i].Name] = inv.Namespaces[i].Labels
		}
	}
	return r
}

// namespace returns namespaceChain's verdict on ns, evaluated on first use.
func (r *roundScope) namespace(ns string) verdict {
	if v, seen := r.verdicts[ns]; seen {
		return v
	}
	l, listed := r.nsLabels[ns]
	var v verdict
	v.Reason, v.Message, v.Refused = namespaceChain.Evaluate(namespaceInput{Name: ns, Scope: r.Scope, Listed: listed, Labels: l})
	r.verdicts[ns] = v
	return v
}

// candidateInput is a pod, Deployment or ConfigMap by its metadata, and the round.
type candidateInput struct {
	Meta  *metav1.ObjectMeta
	Round *roundScope
}

var (
	podChain        = chain[candidateInput]{inSelectedNamespace, notTerminating, notMirrorPod, podSelected}
	deploymentChain = chain[candidateInput]{inSelectedNamespace, notTerminating, notAutoscaled}
	configMapChain  = chain[candidateInput]{inSelectedNamespace, notTerminating, notKnownImmutable, notClusterConfigMap}
)

// inSelectedNamespace refuses objects in a namespace namespaceChain refuses, for its reason.
func inSelectedNamespace(in candidateInput) (reason, message string, refused bool) {
	v := in.Round.namespace(in.Meta.Namespace)
	return v.Reason, v.Message, v.Refused
}

func notTerminating(in candidateInput) (reason, message string, refused bool) {
	return refuse(in.Meta.DeletionTimestamp != nil, refusedTerminating, "being deleted")
}

// mirrorPodAnnotation marks static pods mirrored by a kubelet; the API server cannot remove them.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// notMirrorPod refuses static pods: deleting the kubelet's mirror kills nothing.
func notMirrorPod(in candidateInput) (reason, message string, refused bool) {
	_, mirror := in.Meta.Annotations[mirrorPodAnnotation]
	return refuse(mirror, refusedMirrorPod, "mirror of a static pod, which the API server cannot remove")
}

func podSelected(in candidateInput) (reason, message string, refused bool) {
	sel := in.Round.Scope.PodSelector
	return refuse(sel != nil && !sel.Matches(labels.Set(in.Meta.Labels)), refusedPodNotSelected, "labels do not match spec.podSelector")
}

// notAutoscaled refuses what a HorizontalPodAutoscaler scales: it would undo the doubling.
func notAutoscaled(in candidateInput) (reason, message string, refused bool) {
	return refuse(in.Round.Autoscaled.Has(in.Meta.Namespace+"/"+in.Meta.Name), refusedAutoscaled, "scaled by a HorizontalPodAutoscaler")
}

// notKnownImmutable refuses ConfigMaps an earlier round found immutable (by UID).
func notKnownImmutable(in candidateInput) (reason, message string, refused bool) {
	return refuse(in.Round.Scope.ImmutableConfigMaps.Has(in.Meta.UID), refusedKnownImmutable, "found immutable in an earlier round")
}

// clusterConfigMaps are the CA bundles the cluster publishes into every namespace, which
// every pod mounts: lorem ipsum there is chaos against the cluster, not a workload.
var clusterConfigMaps = []string{"kube-root-ca.crt", "openshift-service-ca.crt"}

func notClusterConfigMap(in candidateInput) (reason, message string, refused bool) {
	return refuse(slices.Contains(clusterConfigMaps, in.Meta.Name), refusedClusterConfigMap, "CA bundle the cluster publishes into every namespace")
}

// growable refuses a Deployment cancer mode cannot double: 0 replicas, or MaxReplicas or more.
func growable(replicas int32) (reason, message string, refused bool) {
	if replicas <= 0 {
		return SkipZeroReplicas, "no replicas to double", true
	}
	return refuse(replicas >= MaxReplicas, SkipAtLimit, "at the ceiling of 128 replicas (MaxReplicas)")
}

// restoreInput is a marked object's namespace, and whether it is an immutable ConfigMap.
type restoreInput struct {
	Scope     Scope
	Namespace string
	Immutable bool
}

// restoreChain says which marked objects restore leaves as they are (marks kept): anyone who
// may label an object can forge marks, so restore never goes where rounds may not; an
// immutable ConfigMap is reported instead of retried for ever.
var restoreChain = chain[restoreInput]{restoreInScope, restoreMutable}

func restoreInScope(in restoreInput) (reason, message string, refused bool) {
	return refuse(!in.Scope.Allows(in.Namespace), SkipOutOfScope, "namespace is protected, excluded or not watched: left as it is, marks kept")
}

func restoreMutable(in restoreInput) (reason, message string, refused bool) {
	return refuse(in.Immutable, SkipImmutable, "immutable, so its data cannot be put back: left as it is, marks kept")
}

// restoreSkip says why restore leaves a marked object as it is, or "" to put it back.
func restoreSkip(scope Scope, namespace string, immutable bool) (reason, detail string) {
	reason, detail, _ = restoreChain.Evaluate(restoreInput{Scope: scope, Namespace: namespace, Immutable: immutable})
	return reason, detail
}

// selectCandidates keeps of the inventory what podChain, deploymentChain and configMapChain admit.
func selectCandidates(inv Inventory, scope Scope) Candidates {
	round := newRoundScope(inv, scope)
	admits := func(c chain[candidateInput], meta *metav1.ObjectMeta) bool {
		_, _, refused := c.Evaluate(candidateInput{Meta: meta, Round: round})
		return !refused
	}
	var c Candidates
	for i := range inv.Pods {
		p := &inv.Pods[i]
		if !admits(podChain, &p.ObjectMeta) {
			continue
		}
		pod := Candidate{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		if scope.Workloads {
			pod.Workload = workloadOf(p)
		}
		c.Pods = append(c.Pods, pod)
	}
	for i := range inv.Deployments {
		if d := &inv.Deployments[i]; admits(deploymentChain, &d.ObjectMeta) {
			c.Deployments = append(c.Deployments, Candidate{Namespace: d.Namespace, Name: d.Name, UID: d.UID, Replicas: replicasOf(d)})
		}
	}
	for i := range inv.ConfigMaps {
		if cm := &inv.ConfigMaps[i]; admits(configMapChain, &cm.ObjectMeta) {
			c.ConfigMaps = append(c.ConfigMaps, Candidate{Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID})
		}
	}
	for _, list := range [][]Candidate{c.Pods, c.Deployments, c.ConfigMaps} {
		slices.SortFunc(list, func(a, b Candidate) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
	}
	return c
}

// hpaTargets returns namespace/name of every Deployment a HorizontalPodAutoscaler scales.
func hpaTargets(hpas []autoscalingv2.HorizontalPodAutoscaler) sets.Set[string] {
	out := sets.New[string]()
	for i := range hpas {
		ref := hpas[i].Spec.ScaleTargetRef
		if ref.Kind == "Deployment" && slices.Contains([]string{"", "apps/v1", "apps/v1beta1", "apps/v1beta2", "extensions/v1beta1"}, ref.APIVersion) {
			out.Insert(hpas[i].Namespace + "/" + ref.Name)
		}
	}
	return out
}
