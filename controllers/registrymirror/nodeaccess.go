package registrymirror

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// A mirror reaches the nodes only with a cluster admin's consent: a RegistryHostGrant that
// names it for its upstream's host. Without, it is an in-cluster cache.

// nodeAccess is what the grants allow a mirror on the nodes.
type nodeAccess struct {
	Granted         bool     // node agents run, and write hosts.toml with spec.configureNodes
	Capabilities    []string // hosts.toml's, when Granted
	Reason, Message string   // the NodeAccess condition's
}

// effectiveGrant is the oldest grant of host (then the first by name), or nil.
func effectiveGrant(host string, grants []mirrorsv1alpha1.RegistryHostGrant) *mirrorsv1alpha1.RegistryHostGrant {
	var best *mirrorsv1alpha1.RegistryHostGrant
	for i := range grants {
		g := &grants[i]
		if g.Spec.Host != host || !g.DeletionTimestamp.IsZero() {
			continue
		}
		if best == nil || g.CreationTimestamp.Before(&best.CreationTimestamp) ||
			(g.CreationTimestamp.Equal(&best.CreationTimestamp) && g.Name < best.Name) {
			best = g
		}
	}
	return best
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

// condition is the NodeAccess condition; Unknown while not decided (an invalid upstream).
func (a nodeAccess) condition() metav1.Condition {
	c := metav1.Condition{Type: mirrorsv1alpha1.ConditionNodeAccess, Status: metav1.ConditionFalse, Reason: a.Reason, Message: a.Message}
	switch {
	case a.Reason == "":
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, mirrorsv1alpha1.ReasonInvalidUpstream, "Not decided: the upstream is invalid"
	case a.Granted:
		c.Status = metav1.ConditionTrue
	}
	return c
}

// mirrorsOfHost returns the mirrors a grant's change may concern: named, or of its host.
func mirrorsOfHost(grant *mirrorsv1alpha1.RegistryHostGrant, mirrors []mirrorsv1alpha1.RegistryMirror) []types.NamespacedName {
	var out []types.NamespacedName
	for i := range mirrors {
		key := client.ObjectKeyFromObject(&mirrors[i])
		host, err := HostsDir(mirrors[i].Spec.Upstream)
		if (key == types.NamespacedName{Namespace: grant.Spec.Mirror.Namespace, Name: grant.Spec.Mirror.Name}) || (err == nil && host == grant.Spec.Host) {
			out = append(out, key)
		}
	}
	return out
}
