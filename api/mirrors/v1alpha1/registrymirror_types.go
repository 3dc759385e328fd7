package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretReference names a Secret in the mirror's namespace.
type SecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`
}

// RegistryMirrorSpec is the upstream to mirror and how much cache to give it.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.storageClassName) || (has(self.storageClassName) && self.storageClassName == oldSelf.storageClassName)",message="spec.storageClassName is immutable"
type RegistryMirrorSpec struct {
	// upstream is the registry to mirror, as an http(s) URL without a path or credentials,
	// for example https://registry-1.docker.io.
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^/\s]+/?$`
	// +kubebuilder:validation:XValidation:rule="isURL(self)",message="spec.upstream must be a valid URL"
	// +kubebuilder:validation:XValidation:rule="!self.contains('@')",message="spec.upstream must not carry credentials (user:password@host): put them in a Secret with keys username and password in the mirror's namespace and name it in spec.credentialsSecretRef"
	// +kubebuilder:validation:XValidation:rule="self.contains('@') || self.matches('^https?://([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*|[[][0-9a-fA-F:.]+[]])(:[0-9]{1,5})?/?$')",message="spec.upstream's host must be a DNS name or an IP address with an optional port (containerd's _default and other names are refused)"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Upstream"
	Upstream string `json:"upstream,omitempty"`

	// storage is the size of the cache volume. It may grow but never shrink. Default 10Gi.
	// +default="10Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.storage must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="spec.storage may grow but not shrink"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage"
	Storage resource.Quantity `json:"storage,omitempty"`

	// storageClassName is the StorageClass of the cache volume; default: the cluster's
	// default class. Immutable once set.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// credentialsSecretRef names a Secret in this namespace with keys `username` and
	// `password` for an upstream that needs them.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Credentials Secret"
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`

	// cacheTTL is deprecated and ignored: set retention. It was distribution's proxy.ttl,
	// an expiry counted from the first fetch, which never deleted anything (the registry
	// Quartet 0.2.0 rendered had storage deletion off) and whose meaning retention does not
	// share; it is kept so objects that carry it stay valid.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`

	// retention is how long cached content is kept after it was last pulled (a Go duration
	// such as 720h, at least 1h and at most 87600h): every pull, served from the cache or
	// not, keeps an image (its manifest, config and layers) for another retention; content
	// not pulled for longer is deleted. Default 720h (30 days), long enough to ride out an
	// outage of the upstream.
	// +default="720h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="spec.retention must be at least 1h"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('87600h')",message="spec.retention must be at most 87600h (10 years)"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Retention"
	Retention *metav1.Duration `json:"retention,omitempty"`

	// maxDiskPercent bounds the cache's disk: above this fill of the cache volume (used
	// bytes of the whole volume, in percent) the least recently pulled content is deleted
	// first until the fill is below it again, except content pulled or unpinned within the
	// last 10 minutes. 0 turns the bound off (only retention deletes). Default 85.
	// +default=85
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max Disk Percent"
	MaxDiskPercent *int32 `json:"maxDiskPercent,omitempty"`

	// replicas is the number of registries serving the mirror, each with its own cache
	// volume of spec.storage, preferring nodes apart: 2 keeps pulls served while one of them
	// is down (a node drained or lost during an outage of the upstream). Every replica
	// fills and warms its own cache from the upstream, so each holds what was pulled through
	// it and every image the pods run. The first replica's StatefulSet and volume are the
	// ones a single-replica mirror has; lowering replicas deletes the others' StatefulSets
	// and cache volumes. Default 1.
	// +default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	Replicas *int32 `json:"replicas,omitempty"`

	// resources of the registry container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// configureNodes makes the node agent write containerd's hosts.toml for the upstream's
	// host on every node when true, so the container runtime pulls through the mirror. Node
	// agents run only for a mirror that a cluster admin's RegistryHostGrant names for the
	// upstream's host; without one the mirror is an in-cluster cache and says so.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Configure Nodes",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	ConfigureNodes bool `json:"configureNodes,omitempty"`

	// hostPort is the port on each node's loopback address (127.0.0.1) where the node agent
	// serves the mirror to the node's container runtime. Default: the operator picks the
	// lowest port in 35000-35999 that no other RegistryMirror's node agent uses, and keeps it.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	HostPort *int32 `json:"hostPort,omitempty"`

	// warmPlatforms are the platforms, os/arch or os/arch/variant (linux/arm64,
	// linux/arm/v7), whose manifests, configs and layers the registry fetches when it warms
	// a multi-platform image the pods run. Default: the platform of the registry's node. A
	// cluster whose nodes have several architectures lists each, so that every node finds
	// its platform cached when the upstream is down.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$`
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Warm Platforms"
	WarmPlatforms []string `json:"warmPlatforms,omitempty"`
}

// RegistryMirrorStatus says whether the mirror serves and where.
type RegistryMirrorStatus struct {
	// conditions are Ready (registry and node agents ready) and Degraded (an object could
	// not be applied, or one of the same name belongs to someone else).
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation of the spec the controller last acted on fully (its
	// last pass without error); each condition carries the generation it describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// endpoint is the in-cluster address of the mirror (http://<service>.<namespace>.svc:5000).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Endpoint",xDescriptors="urn:alm:descriptor:org.w3:link"
	Endpoint string `json:"endpoint,omitempty"`
	// readyReplicas is the number of registry replicas ready, of spec.replicas.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// nodesReady is the number of nodes whose node agent is ready.
	// +optional
	NodesReady int32 `json:"nodesReady,omitempty"`
	// nodesDesired is the number of nodes that should run the node agent.
	// +optional
	NodesDesired int32 `json:"nodesDesired,omitempty"`
	// nodeEndpoint is the address of the mirror on every node, for the node's container
	// runtime (http://127.0.0.1:<hostPort>).
	// +optional
	NodeEndpoint string `json:"nodeEndpoint,omitempty"`
	// imagesInUse is the number of distinct images, by digest, that the cluster's pods run
	// from the mirror's host. A mirror with node access serves those pulls: it pins these
	// images (never evicted) and fetches those its cache does not hold, images pulled
	// before the mirror existed included. Unset without node access.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ImagesInUse *int32 `json:"imagesInUse,omitempty"`
	// imagesCached is how many of the pinned images the registry holds whole (the
	// manifest, of an index its node platform's, configs and layers), as it last reported.
	// Unset until it has reported.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ImagesCached *int32 `json:"imagesCached,omitempty"`
	// cacheUsedPercent is how full the cache volume is, in whole percent, as the registry
	// last measured it (statfs of the volume: on a hostPath or local volume, the node's
	// filesystem). Above spec.maxDiskPercent the registry evicts the least recently pulled
	// unpinned content not pulled within the last 10 minutes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	CacheUsedPercent *int32 `json:"cacheUsedPercent,omitempty"`
	// cacheCapacity is the cache volume's size (used plus available), as the registry last
	// measured it.
	// +optional
	CacheCapacity *resource.Quantity `json:"cacheCapacity,omitempty"`
	// cacheHitPercent is the share of blob pulls (layers and configs) the registry served
	// from its cache rather than from the upstream, in whole percent, since the registry
	// last started, as it last reported. Unset before its first blob pull.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	CacheHitPercent *int32 `json:"cacheHitPercent,omitempty"`
}

// RegistryMirror runs a pull-through cache of one upstream registry: two Services, a
// StatefulSet with Quartet's mirror-registry (the CNCF distribution registry in proxy mode,
// keeping what was pulled within spec.retention) and its PVC; a DaemonSet that makes the
// mirror reachable from every node only for a host a cluster admin grants it (RegistryHostGrant).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rm
// +kubebuilder:printcolumn:name="Upstream",type=string,JSONPath=`.spec.upstream`
// +kubebuilder:printcolumn:name="Storage",type=string,JSONPath=`.spec.storage`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="In Use",type=integer,JSONPath=`.status.imagesInUse`,priority=1
// +kubebuilder:printcolumn:name="Cached",type=integer,JSONPath=`.status.imagesCached`,priority=1
// +kubebuilder:printcolumn:name="Cache Used %",type=integer,JSONPath=`.status.cacheUsedPercent`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 40 characters starting with a letter (the mirror's Services and StatefulSet are named after it)"
// +operator-sdk:csv:customresourcedefinitions:displayName="Registry Mirror",resources={{Service,v1},{StatefulSet,v1},{DaemonSet,v1},{PersistentVolumeClaim,v1}}
type RegistryMirror struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the upstream and the cache size.
	// +required
	Spec RegistryMirrorSpec `json:"spec,omitzero"`
	// status says whether the mirror serves.
	// +optional
	Status RegistryMirrorStatus `json:"status,omitempty"`
}

// RegistryMirrorList is a list of RegistryMirrors.
// +kubebuilder:object:root=true
type RegistryMirrorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RegistryMirror `json:"items"`
}
