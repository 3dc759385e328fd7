package registrymirror

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// Default range of node agent host ports: above the NodePort range (30000-32767).
const (
	hostPortMin int32 = 35000
	hostPortMax int32 = 35999
)

// pickHostPort chooses the explicit port (a conflict if held: the first keeps it), else the
// current one, else the lowest free in [lo, hi] (0: none); held, requested: others' ports.
func pickHostPort(explicit *int32, current int32, held, requested map[int32]string, lo, hi int32) (port int32, conflictWith string) {
	if explicit != nil {
		return *explicit, held[*explicit]
	}
	if current != 0 {
		if _, used := held[current]; !used {
			return current, ""
		}
	}
	for p := lo; p <= hi; p++ {
		_, isHeld := held[p]
		_, isRequested := requested[p]
		if !isHeld && !isRequested {
			return p, ""
		}
	}
	return 0, ""
}

// keepsHostPort reports whether the node agents keep their port without a look at others.
func keepsHostPort(explicit *int32, current int32) bool {
	return current != 0 && (explicit == nil || *explicit == current)
}

// reconcileHostPort chooses the node agents' host port; none (0) is a problem.
func (r *Reconciler) reconcileHostPort(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) (int32, []problem, error) {
	var current int32
	ds := &appsv1.DaemonSet{}
	if err := r.Children.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: daemonSetName(m)}, ds); err == nil {
		if metav1.IsControlledBy(ds, m) {
			current = hostPortOf(&ds.Spec.Template.Spec)
		}
	} else if !apierrors.IsNotFound(err) {
		return 0, nil, err
	}
	held, requested := map[int32]string{}, map[int32]string{}
	if !keepsHostPort(m.Spec.HostPort, current) {
		var err error
		if held, requested, err = r.portsOfOthers(ctx, m); err != nil {
			return 0, nil, err
		}
	}
	port, conflict, err := r.memory.assignPort(client.ObjectKeyFromObject(m), m.Spec.HostPort, current, held, requested)
	switch {
	case err != nil:
		return 0, []problem{{mirrorsv1alpha1.ReasonHostPortsExhausted, err.Error()}}, nil
	case conflict != "":
		return 0, []problem{{mirrorsv1alpha1.ReasonHostPortConflict,
			fmt.Sprintf("host port %d is used by the node agents of RegistryMirror %s; choose another spec.hostPort", port, conflict)}}, nil
	}
	return port, nil, nil
}

// portsOfOthers reads from the caches the ports other mirrors' node agents hold and ask for.
func (r *Reconciler) portsOfOthers(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) (held, requested map[int32]string, err error) {
	held, requested = map[int32]string{}, map[int32]string{}
	var dss appsv1.DaemonSetList
	if err := r.Children.List(ctx, &dss, client.MatchingLabels{labelManagedBy: managedBy, labelComponent: componentAgent}); err != nil {
		return nil, nil, fmt.Errorf("listing node agent DaemonSets: %w", err)
	}
	for i := range dss.Items {
		ds := &dss.Items[i]
		if p := hostPortOf(&ds.Spec.Template.Spec); p != 0 && (ds.Namespace != m.Namespace || ds.Name != daemonSetName(m)) {
			held[p] = ds.Namespace + "/" + ds.Labels[labelInstance]
		}
	}
	var mirrors mirrorsv1alpha1.RegistryMirrorList
	if err := r.Client.List(ctx, &mirrors); err != nil {
		return nil, nil, fmt.Errorf("listing RegistryMirrors: %w", err)
	}
	for i := range mirrors.Items {
		o := &mirrors.Items[i]
		if o.Spec.HostPort != nil && (o.Namespace != m.Namespace || o.Name != m.Name) {
			requested[*o.Spec.HostPort] = o.Namespace + "/" + o.Name
		}
	}
	return held, requested, nil
}

// hostPortOf reads the node agents' host port from a live DaemonSet's pod spec (0: none).
func hostPortOf(spec *corev1.PodSpec) int32 {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "mirror" && p.HostPort != 0 {
				return p.HostPort
			}
		}
	}
	return 0
}
