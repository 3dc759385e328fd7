package chaosagent

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// cacheSyncTimeout bounds how long a round waits for an informer started on first use.
const cacheSyncTimeout = 2 * time.Minute

// inventory lists, from the informer cache, what the agent's modes need. Informers start on
// first use, so an operator without agents caches no pods. marked holds "Kind/ns/name" of the
// objects that carry this agent's marks, when Deployments and ConfigMaps were read (nil if not).
func (r *Reconciler) inventory(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, countMarks bool) (Inventory, sets.Set[string], error) {
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	var inv Inventory
	// The lists are read-only here, so the cache may hand out its own objects.
	ro := client.UnsafeDisableDeepCopy
	if spec.NamespaceSelector != nil {
		list := metadataList("Namespace")
		if err := r.Client.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing namespaces from cache: %w", err)
		}
		inv.Namespaces = list.Items
	}
	if spec.TantrumMode {
		list := metadataList("Pod")
		if err := r.Client.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing pods from cache: %w", err)
		}
		inv.Pods = list.Items
	}
	if spec.CancerMode || countMarks {
		list := &appsv1.DeploymentList{}
		if err := r.Client.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing deployments from cache: %w", err)
		}
		inv.Deployments = list.Items
	}
	if spec.CancerMode {
		list := &autoscalingv2.HorizontalPodAutoscalerList{}
		if err := r.Client.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing horizontalpodautoscalers from cache: %w", err)
		}
		inv.HPAs = list.Items
	}
	if spec.IpsumMode || countMarks {
		list := metadataList("ConfigMap")
		if err := r.Client.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing configmaps from cache: %w", err)
		}
		inv.ConfigMaps = list.Items
	}
	var marked sets.Set[string]
	if spec.CancerMode || spec.IpsumMode || countMarks {
		marked = markedKeys(inv, agent.Name)
	}
	return inv, marked, nil
}

// markKey is how markedKeys names the object an action changed.
func markKey(a Action) string {
	kind := "ConfigMap"
	if a.Kind == blackadderv1beta1.ActionScaleDeployment {
		kind = "Deployment"
	}
	return kind + "/" + a.Target.Key()
}

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

// metadataList returns an empty metadata-only list of a core/v1 kind.
func metadataList(kind string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
	return l
}

// marksSelector selects the objects that carry an agent's marks.
func marksSelector(agent string) client.MatchingLabelsSelector {
	return client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{LabelAgent: agent})}
}
