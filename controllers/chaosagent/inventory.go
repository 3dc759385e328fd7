package chaosagent

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// cacheSyncTimeout bounds how long a round waits for an informer started on first use.
const cacheSyncTimeout = 2 * time.Minute

// Inventory is what the cache holds for one round: the lists the agent's modes need. Pods are
// Running pods only: the cache holds no others (CacheOptions, runningPods).
type Inventory struct {
	Namespaces  []metav1.PartialObjectMetadata
	Pods        []metav1.PartialObjectMetadata
	Deployments []appsv1.Deployment
	HPAs        []autoscalingv2.HorizontalPodAutoscaler
	ConfigMaps  []metav1.PartialObjectMetadata
}

// inventory lists from the cache what the agent's modes need (informers start on first use, so
// an operator without agents caches no pods), and "Kind/ns/name" of the objects that carry
// the agent's marks when it read Deployments and ConfigMaps.
func (r *Reconciler) inventory(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, countMarks bool) (Inventory, sets.Set[string], error) {
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	namespaces, pods, cms := metadataList("Namespace"), metadataList("Pod"), metadataList("ConfigMap")
	deps, hpas := &appsv1.DeploymentList{}, &autoscalingv2.HorizontalPodAutoscalerList{}
	for _, l := range []struct {
		needed bool
		what   string
		list   client.ObjectList
	}{
		{spec.NamespaceSelector != nil, "namespaces", namespaces},
		{spec.TantrumMode, "pods", pods},
		{spec.CancerMode || countMarks, "deployments", deps},
		{spec.CancerMode, "horizontalpodautoscalers", hpas},
		{spec.IpsumMode || countMarks, "configmaps", cms},
	} {
		// The lists are read-only here, so the cache may hand out its own objects.
		if l.needed {
			if err := r.list(ctx, l.what, l.list, client.UnsafeDisableDeepCopy); err != nil {
				return Inventory{}, nil, err
			}
		}
	}
	inv := Inventory{Namespaces: namespaces.Items, Pods: pods.Items, Deployments: deps.Items, HPAs: hpas.Items, ConfigMaps: cms.Items}
	var marked sets.Set[string]
	if spec.CancerMode || spec.IpsumMode || countMarks {
		marked = markedKeys(inv, agent.Name)
	}
	return inv, marked, nil
}

// list reads list from the manager's cache; what names it in the error.
func (r *Reconciler) list(ctx context.Context, what string, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return fmt.Errorf("listing %s from cache: %w", what, err)
	}
	return nil
}

// markKey is how markedKeys names the object an action changed.
func markKey(a Action) string { return victimKind(a.Kind) + "/" + a.Target.Key() }

// markedKeys returns "Kind/ns/name" of the Deployments and ConfigMaps labelled with agent.
func markedKeys(inv Inventory, agent string) sets.Set[string] {
	out := sets.New[string]()
	for i := range inv.Deployments {
		if inv.Deployments[i].Labels[LabelAgent] == agent {
			out.Insert("Deployment/" + inv.Deployments[i].Namespace + "/" + inv.Deployments[i].Name)
		}
	}
	for i := range inv.ConfigMaps {
		if inv.ConfigMaps[i].Labels[LabelAgent] == agent {
			out.Insert("ConfigMap/" + inv.ConfigMaps[i].Namespace + "/" + inv.ConfigMaps[i].Name)
		}
	}
	return out
}

func metadataList(kind string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
	return l
}
