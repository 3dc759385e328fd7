package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Capability is what containerd may use a mirror for (hosts.toml capabilities).
// +kubebuilder:validation:Enum=pull;resolve
type Capability string

const (
	// CapabilityPull fetches blobs and manifests by digest from the mirror. containerd
	// checks every digest, so a mirror can make a pull fail but cannot change an image.
	CapabilityPull Capability = "pull"
	// CapabilityResolve turns tags into digests through the mirror: the mirror then decides
	// what every tag of the host means on every node. Needed to start images by tag while
	// the upstream cannot be reached.
	CapabilityResolve Capability = "resolve"
)

// MirrorReference names a RegistryMirror.
type MirrorReference struct {
	// namespace of the RegistryMirror.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace,omitempty"`
	// name of the RegistryMirror.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`
}

// RegistryHostGrantSpec lets one RegistryMirror configure every node's container runtime
// for one registry host.
type RegistryHostGrantSpec struct {
	// host is the registry host as image references name it, which is also the directory
	// containerd reads under its hosts root: docker.io for Docker Hub (whose upstream is
	// https://registry-1.docker.io), ghcr.io, registry.example.com:5000. A lower-case DNS
	// name or IPv4 address with an optional port; containerd's catch-all _default cannot be
	// granted.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:[0-9]{1,5})?$`
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Host"
	Host string `json:"host,omitempty"`

	// mirror is the RegistryMirror that may configure the nodes for host. Granting it
	// trusts every editor of its namespace with host's pulls on every node, and shows its
	// readers which images by digest the cluster's pods run from host (the mirror pins and
	// caches them): put such mirrors in a namespace only cluster admins edit. Of several
	// grants for one host, the oldest counts.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Mirror"
	Mirror MirrorReference `json:"mirror,omitzero"`

	// capabilities are what containerd uses the mirror for: pull (fetch by digest, checked
	// by containerd) and optionally resolve (tags, trusted from the mirror; needed to start
	// images by tag while the upstream cannot be reached). Default: [pull].
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:XValidation:rule="self.exists(c, c == 'pull')",message="spec.capabilities must include pull"
	// +listType=set
	// +default=["pull"]
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Capabilities"
	Capabilities []Capability `json:"capabilities,omitempty"`

	// allowCredentials lets a mirror with spec.credentialsSecretRef configure the nodes:
	// every pod on every node can then pull the upstream's private images with no
	// imagePullSecret. Default false: such a mirror is refused.
	// +optional
	AllowCredentials bool `json:"allowCredentials,omitempty"`

	// allowPlainHTTP lets a mirror whose upstream is http:// configure the nodes: their
	// fallback pulls of host then go over plain HTTP. Default false: such a mirror is refused.
	// +optional
	AllowPlainHTTP bool `json:"allowPlainHTTP,omitempty"`
}

// RegistryHostGrant is a cluster admin's consent that one RegistryMirror configures the
// container runtime of every node for one registry host (containerd's hosts.toml), and
// publishes the mirror on every node's loopback address. A RegistryMirror without a grant
// is an in-cluster cache only: no node agents, nothing on the nodes.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=rhg
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.host`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.mirror.namespace`
// +kubebuilder:printcolumn:name="Mirror",type=string,JSONPath=`.spec.mirror.name`
// +kubebuilder:printcolumn:name="Capabilities",type=string,JSONPath=`.spec.capabilities`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Registry Host Grant"
type RegistryHostGrant struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the host and the mirror.
	// +required
	Spec RegistryHostGrantSpec `json:"spec,omitzero"`
}

// RegistryHostGrantList is a list of RegistryHostGrants.
// +kubebuilder:object:root=true
type RegistryHostGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RegistryHostGrant `json:"items"`
}

// HasCapability reports whether the grant lets containerd use the mirror for c (pull
// when none are listed).
func (g *RegistryHostGrant) HasCapability(c Capability) bool {
	if len(g.Spec.Capabilities) == 0 {
		return c == CapabilityPull
	}
	for _, have := range g.Spec.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}
