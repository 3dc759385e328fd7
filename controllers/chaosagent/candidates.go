package chaosagent

import (
	"cmp"
	"slices"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Which objects a round may choose from is decided by chains of named checks, in the shape of
// cert-manager's policy chains (policies.Chain, internal/controller/certificates/policies):
// each check looks at one object and says why it refuses it, and a chain evaluates its checks
// in order and stops at the first refusal. The namespace checks, evaluated once per namespace
// and round, come first, and matching a selector against an object's labels last; the order
// also decides which reason an object refused for several is given.
//
//	scopeChain      namespaceNamed, namespaceNotProtected, namespaceWatched
//	namespaceChain  scopeChain, then namespaceSelected
//	podChain        inSelectedNamespace, notTerminating, notMirrorPod, podSelected
//	deploymentChain inSelectedNamespace, notTerminating, notAutoscaled
//	configMapChain  inSelectedNamespace, notTerminating, notKnownImmutable, notClusterConfigMap
//
// Besides these, decide leaves out the Deployments cancer mode cannot double (growable), and
// restore keeps to restoreChain (decide.go). The reasons of the candidate checks are not shown
// anywhere yet: an object a round leaves out gets no Event and no status entry.

// check is one rule about in: it returns refused true, with a CamelCase reason and a message
// for a person, when in breaks the rule, and refused false with empty strings otherwise. The
// message says why, as the detail of a status.lastActions entry does, and does not name the
// object (whoever shows it does): a round evaluates thousands of objects, and a constant
// message costs nothing.
type check[T any] func(in T) (reason, message string, refused bool)

// chain is a list of checks evaluated in order.
type chain[T any] []check[T]

// Evaluate returns the first refusal of the chain's checks, in order, or refused false when
// every check passes in.
func (c chain[T]) Evaluate(in T) (reason, message string, refused bool) {
	for _, chk := range c {
		if reason, message, refused := chk(in); refused {
			return reason, message, true
		}
	}
	return "", "", false
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

// namespaceInput is what the namespace checks look at: a namespace and the agent's scope.
type namespaceInput struct {
	Name  string
	Scope Scope
	// Listed says whether the inventory holds the namespace, and Labels are its labels; only
	// namespaceSelected reads them, and only with a namespace selector.
	Listed bool
	Labels labels.Set
}

var (
	// scopeChain is where an agent may write at all: Scope.Allows, which every action and
	// restore checks again just before it writes. It leaves out the namespace selector,
	// whose labels may have changed since the object was changed.
	scopeChain = chain[namespaceInput]{namespaceNamed, namespaceNotProtected, namespaceWatched}
	// namespaceChain is where a round may choose objects.
	namespaceChain = chain[namespaceInput]{namespaceNamed, namespaceNotProtected, namespaceWatched, namespaceSelected}
)

// namespaceNamed refuses what has no namespace: the agent never touches cluster-scoped objects.
func namespaceNamed(in namespaceInput) (reason, message string, refused bool) {
	if in.Name == "" {
		return refusedNoNamespace, "the object has no namespace", true
	}
	return "", "", false
}

// namespaceNotProtected refuses the operator's protected namespaces and the agent's
// excludedNamespaces (Scope.Protected holds both).
func namespaceNotProtected(in namespaceInput) (reason, message string, refused bool) {
	if in.Scope.Protected.Has(in.Name) {
		return refusedProtectedNamespace, "namespace is protected, or excluded by the agent", true
	}
	return "", "", false
}

// namespaceWatched refuses namespaces the manager does not watch (none when it watches all).
func namespaceWatched(in namespaceInput) (reason, message string, refused bool) {
	if in.Scope.Watched.Len() > 0 && !in.Scope.Watched.Has(in.Name) {
		return refusedNamespaceNotWatched, "namespace is not watched by the operator", true
	}
	return "", "", false
}

// namespaceSelected refuses, with a namespace selector, the namespaces it does not match,
// and those the inventory does not hold (their labels are unknown).
func namespaceSelected(in namespaceInput) (reason, message string, refused bool) {
	sel := in.Scope.NamespaceSelector
	switch {
	case sel == nil:
		return "", "", false
	case !in.Listed:
		return refusedNamespaceNotSelected, "namespace not found in the cache, so spec.namespaceSelector cannot match it", true
	case !sel.Matches(in.Labels):
		return refusedNamespaceNotSelected, "namespace does not match spec.namespaceSelector", true
	}
	return "", "", false
}

// verdict is a chain's answer, kept for later objects of the same namespace.
type verdict struct {
	Reason, Message string
	Refused         bool
}

// roundScope is what the candidate checks of one round share: the agent's scope, the
// namespaces' labels, the namespace verdicts found so far and the Deployments a
// HorizontalPodAutoscaler scales.
type roundScope struct {
	Scope Scope
	// Autoscaled holds namespace/name of every Deployment a HorizontalPodAutoscaler scales.
	Autoscaled sets.Set[string]
	// nsLabels are the inventory's namespaces' labels, by name (only with a namespace selector).
	nsLabels map[string]labels.Set
	// verdicts are namespaceChain's answers, by namespace: evaluated once per round.
	verdicts map[string]verdict
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

// candidateInput is what the object checks look at: one pod, Deployment or ConfigMap of the
// inventory, by its metadata (all the cache holds of pods and ConfigMaps), and the round.
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

// notTerminating refuses objects being deleted.
func notTerminating(in candidateInput) (reason, message string, refused bool) {
	if in.Meta.DeletionTimestamp != nil {
		return refusedTerminating, "being deleted", true
	}
	return "", "", false
}

// mirrorPodAnnotation marks static pods mirrored by a kubelet; the API server cannot remove them.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// notMirrorPod refuses static pods: the API server holds only their kubelet's mirror, and
// deleting it kills nothing.
func notMirrorPod(in candidateInput) (reason, message string, refused bool) {
	if _, mirror := in.Meta.Annotations[mirrorPodAnnotation]; mirror {
		return refusedMirrorPod, "mirror of a static pod, which the API server cannot remove", true
	}
	return "", "", false
}

// podSelected refuses, with a pod selector, the pods it does not match.
func podSelected(in candidateInput) (reason, message string, refused bool) {
	if sel := in.Round.Scope.PodSelector; sel != nil && !sel.Matches(labels.Set(in.Meta.Labels)) {
		return refusedPodNotSelected, "labels do not match spec.podSelector", true
	}
	return "", "", false
}

// notAutoscaled refuses Deployments a HorizontalPodAutoscaler scales: it would undo the
// doubling, and restore would fight it.
func notAutoscaled(in candidateInput) (reason, message string, refused bool) {
	if in.Round.Autoscaled.Has(in.Meta.Namespace + "/" + in.Meta.Name) {
		return refusedAutoscaled, "scaled by a HorizontalPodAutoscaler", true
	}
	return "", "", false
}

// notKnownImmutable refuses ConfigMaps an earlier round found immutable (the metadata cache
// cannot tell; the Reconciler remembers them by UID).
func notKnownImmutable(in candidateInput) (reason, message string, refused bool) {
	if in.Round.Scope.ImmutableConfigMaps.Has(in.Meta.UID) {
		return refusedKnownImmutable, "found immutable in an earlier round", true
	}
	return "", "", false
}

// clusterConfigMaps are the ConfigMaps the cluster's own controllers publish into every
// namespace: the API server's CA bundle every pod's service account volume mounts
// (kube-controller-manager's root-ca-cert-publisher; OpenShift's service CA). Lorem ipsum
// there would break in-cluster TLS for every pod started before it is published again:
// chaos against the cluster, not against a workload.
var clusterConfigMaps = []string{"kube-root-ca.crt", "openshift-service-ca.crt"}

// notClusterConfigMap refuses the ConfigMaps of clusterConfigMaps.
func notClusterConfigMap(in candidateInput) (reason, message string, refused bool) {
	if slices.Contains(clusterConfigMaps, in.Meta.Name) {
		return refusedClusterConfigMap, "CA bundle the cluster publishes into every namespace", true
	}
	return "", "", false
}

// growable refuses a Deployment cancer mode cannot double: one at 0 replicas, or at
// MaxReplicas or above. decide leaves such candidates out, and cancerDeployment skips with
// the same reason a Deployment that has come to this since it was listed.
func growable(replicas int32) (reason, message string, refused bool) {
	switch {
	case replicas <= 0:
		return SkipZeroReplicas, "no replicas to double", true
	case replicas >= MaxReplicas:
		return SkipAtLimit, "at the ceiling of 128 replicas (MaxReplicas)", true
	}
	return "", "", false
}

// selectCandidates filters the inventory down to what an agent may hit: the pods podChain
// admits, the Deployments deploymentChain admits and the ConfigMaps configMapChain admits.
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
		d := &inv.Deployments[i]
		if admits(deploymentChain, &d.ObjectMeta) {
			c.Deployments = append(c.Deployments, Candidate{Namespace: d.Namespace, Name: d.Name, UID: d.UID, Replicas: replicasOf(d)})
		}
	}
	for i := range inv.ConfigMaps {
		cm := &inv.ConfigMaps[i]
		if admits(configMapChain, &cm.ObjectMeta) {
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
		if ref.Kind != "Deployment" {
			continue
		}
		if gv := ref.APIVersion; gv != "" && gv != "apps/v1" && gv != "apps/v1beta1" && gv != "apps/v1beta2" && gv != "extensions/v1beta1" {
			continue
		}
		out.Insert(hpas[i].Namespace + "/" + ref.Name)
	}
	return out
}
