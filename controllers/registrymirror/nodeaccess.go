package registrymirror

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// A mirror reaches the nodes (node agents publishing it on every node's loopback address
// and, with spec.configureNodes, containerd's hosts.toml) only with a cluster admin's
// consent: a RegistryHostGrant that names the mirror for its upstream's host. Whoever may
// edit a namespace can create a RegistryMirror there; only a cluster admin can create a
// cluster-scoped grant. Without one, the mirror is an in-cluster cache.

// nodeAccess is what the grants allow a mirror on the nodes.
type nodeAccess struct {
	// Granted: node agents run, and write hosts.toml when spec.configureNodes.
	Granted bool
	// Capabilities are hosts.toml's capabilities for the mirror (when Granted).
	Capabilities []string
	// Reason and Message are the NodeAccess condition's.
	Reason, Message string
}

// effectiveGrant returns the grant that counts for host: of the grants naming it, the
// oldest (then the first by name), or nil.
func effectiveGrant(host string, grants []mirrorsv1alpha1.RegistryHostGrant) *mirrorsv1alpha1.RegistryHostGrant {
	var forHost []*mirrorsv1alpha1.RegistryHostGrant
	for i := range grants {
		if grants[i].Spec.Host == host && grants[i].DeletionTimestamp.IsZero() {
			forHost = append(forHost, &grants[i])
		}
	}
	if len(forHost) == 0 {
		return nil
	}
	sort.Slice(forHost, func(i, j int) bool {
		a, b := forHost[i], forHost[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return forHost[0]
}

// decideNodeAccess says what the grants allow mirror m, whose upstream's host is host.
func decideNodeAccess(m *mirrorsv1alpha1.RegistryMirror, host string, grants []mirrorsv1alpha1.RegistryHostGrant) nodeAccess {
	g := effectiveGrant(host, grants)
	switch {
	case g == nil:
		return nodeAccess{Reason: mirrorsv1alpha1.ReasonNoHostGrant, Message: fmt.Sprintf(
			"No RegistryHostGrant names a mirror for host %s: the mirror serves in the cluster only (%s), with no node agents and nothing on the nodes; a cluster admin grants node access with a RegistryHostGrant",
			host, Endpoint(m))}
	case g.Spec.Mirror.Namespace != m.Namespace || g.Spec.Mirror.Name != m.Name:
		return nodeAccess{Reason: mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror, Message: fmt.Sprintf(
			"RegistryHostGrant %s gives host %s to another mirror: this one serves in the cluster only (%s)", g.Name, host, Endpoint(m))}
	case m.Spec.CredentialsSecretRef != nil && !g.Spec.AllowCredentials:
		return nodeAccess{Reason: mirrorsv1alpha1.ReasonCredentialsNotGranted, Message: fmt.Sprintf(
			"The mirror has upstream credentials and RegistryHostGrant %s does not set allowCredentials: on the nodes every pod could pull %s's private images without an imagePullSecret",
			g.Name, host)}
	case strings.HasPrefix(strings.ToLower(m.Spec.Upstream), "http://") && !g.Spec.AllowPlainHTTP:
		return nodeAccess{Reason: mirrorsv1alpha1.ReasonPlainHTTPNotGranted, Message: fmt.Sprintf(
			"The upstream is plain HTTP and RegistryHostGrant %s does not set allowPlainHTTP: the nodes' pulls of %s would fall back to plain HTTP", g.Name, host)}
	}
	caps := []string{string(mirrorsv1alpha1.CapabilityPull)}
	if g.HasCapability(mirrorsv1alpha1.CapabilityResolve) {
		caps = append(caps, string(mirrorsv1alpha1.CapabilityResolve))
	}
	return nodeAccess{Granted: true, Capabilities: caps, Reason: mirrorsv1alpha1.ReasonGranted, Message: fmt.Sprintf(
		"RegistryHostGrant %s lets this mirror onto the nodes for host %s (capabilities %s)", g.Name, host, strings.Join(caps, ", "))}
}

// condition is the NodeAccess condition.
func (a nodeAccess) condition() metav1.Condition {
	status := metav1.ConditionFalse
	if a.Granted {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: mirrorsv1alpha1.ConditionNodeAccess, Status: status, Reason: a.Reason, Message: a.Message}
}

// reconcileNodeAccess reads the grants from the cache and decides.
func (r *Reconciler) reconcileNodeAccess(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, host string) (nodeAccess, error) {
	var grants mirrorsv1alpha1.RegistryHostGrantList
	if err := r.Client.List(ctx, &grants); err != nil {
		return nodeAccess{}, fmt.Errorf("listing RegistryHostGrants: %w", err)
	}
	return decideNodeAccess(m, host, grants.Items), nil
}

// removeNodeAgents deletes the mirror's node agent DaemonSet, if it has one (node access
// withdrawn, or a mirror of Quartet 0.2 that never had a grant): each agent removes its
// hosts.toml as its pod stops. Only the mirror's own DaemonSet, by UID.
func (r *Reconciler) removeNodeAgents(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) (bool, error) {
	ds := &appsv1.DaemonSet{}
	key := types.NamespacedName{Namespace: m.Namespace, Name: daemonSetName(m)}
	if err := r.Children.Get(ctx, key, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading DaemonSet %s: %w", key, err)
	}
	if !metav1.IsControlledBy(ds, m) {
		return false, nil
	}
	uid := ds.UID
	if err := r.Client.Delete(ctx, ds, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("deleting DaemonSet %s: %w", key, err)
	}
	objectWrites.WithLabelValues("DaemonSet", "deleted").Inc()
	return true, nil
}

// removeNetworkPolicy deletes the mirror's NetworkPolicy, if it has one (its upstream no
// longer needs credentials): its own only, by UID.
func (r *Reconciler) removeNetworkPolicy(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) error {
	np := &networkingv1.NetworkPolicy{}
	key := types.NamespacedName{Namespace: m.Namespace, Name: networkPolicyName(m)}
	if err := r.Children.Get(ctx, key, np); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(np, m) {
		return nil
	}
	uid := np.UID
	if err := r.Client.Delete(ctx, np, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting NetworkPolicy %s: %w", key, err)
	}
	objectWrites.WithLabelValues("NetworkPolicy", "deleted").Inc()
	return nil
}

// mirrorsOfHost returns the mirrors whose upstream's host is one a grant names, and the
// mirror it names: a grant's change may give or take node access from any of them.
func mirrorsOfHost(grant *mirrorsv1alpha1.RegistryHostGrant, mirrors []mirrorsv1alpha1.RegistryMirror) []types.NamespacedName {
	out := []types.NamespacedName{{Namespace: grant.Spec.Mirror.Namespace, Name: grant.Spec.Mirror.Name}}
	for i := range mirrors {
		key := client.ObjectKeyFromObject(&mirrors[i])
		if host, err := HostsDir(mirrors[i].Spec.Upstream); err == nil && host == grant.Spec.Host && !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}
