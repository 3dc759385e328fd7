package registrymirror

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	if _, used := held[current]; current != 0 && !used {
		return current, ""
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
func (r *Reconciler) reconcileHostPort(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, grants []mirrorsv1alpha1.RegistryHostGrant) (int32, []problem, error) {
	ds := &appsv1.DaemonSet{}
	err := r.Children.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: daemonSetName(m)}, ds)
	if client.IgnoreNotFound(err) != nil {
		return 0, nil, fmt.Errorf("choosing the host port: %w", err)
	}
	var current int32
	if metav1.IsControlledBy(ds, m) { // none when not found
		current = hostPortOf(&ds.Spec.Template.Spec)
	}
	held, requested := map[int32]string{}, map[int32]string{}
	if !keepsHostPort(m.Spec.HostPort, current) {
		if held, requested, err = r.portsOfOthers(ctx, m, grants); err != nil {
			return 0, nil, fmt.Errorf("choosing the host port: %w", err)
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

// portsOfOthers reads from the caches the DaemonSets and mirrors othersPorts looks at.
func (r *Reconciler) portsOfOthers(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, grants []mirrorsv1alpha1.RegistryHostGrant) (held, requested map[int32]string, err error) {
	var dss appsv1.DaemonSetList
	if err := r.Children.List(ctx, &dss, client.MatchingLabels{labelManagedBy: managedBy, labelComponent: componentAgent}); err != nil {
		return nil, nil, fmt.Errorf("listing node agent DaemonSets: %w", err)
	}
	var mirrors mirrorsv1alpha1.RegistryMirrorList
	if err := r.Client.List(ctx, &mirrors); err != nil {
		return nil, nil, fmt.Errorf("listing RegistryMirrors: %w", err)
	}
	held, requested = othersPorts(m, dss.Items, mirrors.Items, grants)
	return held, requested, nil
}

// othersPorts returns the host ports other mirrors with node access hold with their node
// agents and ask for in spec.hostPort, each with the mirror's namespace/name. A DaemonSet
// holds a port only when it is a granted mirror's node agents: controlled by that mirror
// (its UID) and of its name. Labels anyone who may create a DaemonSet can copy, so a
// look-alike holds nothing; nor does spec.hostPort of a mirror without node access, which
// anyone who may create a mirror can set.
func othersPorts(m *mirrorsv1alpha1.RegistryMirror, daemonSets []appsv1.DaemonSet, mirrors []mirrorsv1alpha1.RegistryMirror,
	grants []mirrorsv1alpha1.RegistryHostGrant) (held, requested map[int32]string) {
	granted := map[types.UID]*mirrorsv1alpha1.RegistryMirror{}
	for i := range mirrors {
		o := &mirrors[i]
		if o.Namespace == m.Namespace && o.Name == m.Name {
			continue
		}
		if host, err := HostsDir(o.Spec.Upstream); err == nil && decideNodeAccess(o, host, grants).Granted {
			granted[o.UID] = o
		}
	}
	held, requested = map[int32]string{}, map[int32]string{}
	for i := range daemonSets {
		ds := &daemonSets[i]
		ref := metav1.GetControllerOf(ds)
		if ref == nil {
			continue
		}
		o, gvk := granted[ref.UID], schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		if o == nil || gvk.GroupKind() != mirrorsv1alpha1.GroupVersion.WithKind("RegistryMirror").GroupKind() ||
			o.Namespace != ds.Namespace || o.Name != ref.Name || ds.Name != daemonSetName(o) {
			continue
		}
		if p := hostPortOf(&ds.Spec.Template.Spec); p != 0 {
			held[p] = o.Namespace + "/" + o.Name
		}
	}
	for _, o := range granted {
		if o.Spec.HostPort != nil {
			requested[*o.Spec.HostPort] = o.Namespace + "/" + o.Name
		}
	}
	return held, requested
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
