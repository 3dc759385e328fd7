package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RuleType names the kind of object a rule copies.
// The original Python operator's manifests write it in lower case; the Kind spelling is
// accepted too.
// +kubebuilder:validation:Enum=configmap;secret;ConfigMap;Secret
type RuleType string

const (
	RuleTypeConfigMap     RuleType = "configmap"
	RuleTypeSecret        RuleType = "secret"
	RuleTypeConfigMapKind RuleType = "ConfigMap"
	RuleTypeSecretKind    RuleType = "Secret"
)

// IsSecret reports whether the rule copies Secrets (either spelling).
func (t RuleType) IsSecret() bool { return t == RuleTypeSecret || t == RuleTypeSecretKind }

// LabelValue is a Kubernetes label value: at most 63 characters, alphanumeric at both
// ends, with '-', '_' and '.' inside.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// SelectorLabels returns the selector as a plain label map.
func (s CopyratorRuleSpec) SelectorLabels() map[string]string {
	out := make(map[string]string, len(s.Selector))
	for k, v := range s.Selector {
		out[k] = string(v)
	}
	return out
}

// DeletionPolicy says what happens to copies when their rule is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type DeletionPolicy string

const (
	// DeletionPolicyDelete removes every copy with the rule.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain leaves the copies in place, no longer managed.
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// CopiedKey is one key of the sources that copies carry, under its own name or another.
type CopiedKey struct {
	// key is the key in the source's data (or, for a ConfigMap, binaryData).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key,omitempty"`
	// targetKey is the key's name in the copies. Default: key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	TargetKey string `json:"targetKey,omitempty"`
}

// Target returns the key's name in the copies.
func (k CopiedKey) Target() string {
	if k.TargetKey != "" {
		return k.TargetKey
	}
	return k.Key
}

// MetadataKey is a label or annotation key (a qualified name with an optional DNS prefix).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=316
// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
type MetadataKey string

// CopyratorRuleSpec selects source objects in the rule's own namespace and the namespaces
// they are copied into.
// +kubebuilder:validation:XValidation:rule="!(has(self.namespaces) && size(self.namespaces) > 0 && has(self.namespaceSelector))",message="spec.namespaces and spec.namespaceSelector are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="has(self.selector) != has(self.sourceNames)",message="exactly one of spec.selector and spec.sourceNames must be set"
type CopyratorRuleSpec struct {
	// ruleType is the kind of object copied: configmap or secret (ConfigMap and Secret are
	// accepted too).
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Rule Type"
	RuleType RuleType `json:"ruleType,omitempty"`

	// selector is a label map: every object of ruleType in the rule's own namespace whose
	// labels include all of these is a source. A rule never reads other namespaces.
	// Exactly one of selector and sourceNames is set.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 316 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="spec.selector keys must be valid label keys"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Selector"
	Selector map[string]LabelValue `json:"selector,omitempty"`

	// sourceNames names the sources instead of selecting them by label: the objects of
	// ruleType with these names in the rule's own namespace (for objects another tool makes
	// and nobody can label). A name that does not exist, or that is itself a Copyrator
	// copy, is reported in the Ready condition and copied once it exists.
	// Exactly one of selector and sourceNames is set.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +listType=set
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Source Names"
	SourceNames []string `json:"sourceNames,omitempty"`

	// keys limits the copies to these keys of the sources' data, each under its own name
	// or renamed (targetKey). Without it copies carry every key. A key a source lacks is
	// absent from its copies. A typed Secret's copy keeps the type only while it has the
	// keys the type requires (kubernetes.io/tls: tls.crt and tls.key, ...); otherwise it is
	// an Opaque Secret, so a rule can copy just the public half of a TLS Secret.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.key == a.key))",message="spec.keys must not name a key twice"
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, (has(b.targetKey) ? b.targetKey : b.key) == (has(a.targetKey) ? a.targetKey : a.key)))",message="spec.keys must not copy two keys to the same targetKey"
	// +listType=atomic
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Keys"
	Keys []CopiedKey `json:"keys,omitempty"`

	// carryLabels are label keys of a source that its copies carry too, with the source's
	// values (a copy otherwise carries only Copyrator's labels). Copyrator's own keys
	// (app.kubernetes.io/managed-by, copyrator.flant.com/*) cannot be carried.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k != 'app.kubernetes.io/managed-by' && !k.startsWith('copyrator.flant.com/'))",message="spec.carryLabels must not name Copyrator's own labels (app.kubernetes.io/managed-by, copyrator.flant.com/*)"
	// +listType=set
	// +optional
	CarryLabels []MetadataKey `json:"carryLabels,omitempty"`

	// carryAnnotations are annotation keys of a source that its copies carry too, with the
	// source's values. Copyrator's own keys (copyrator.flant.com/*) and
	// kubectl.kubernetes.io/last-applied-configuration (it holds the source's whole
	// content, keys left out by spec.keys included) cannot be carried.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('copyrator.flant.com/') && k != 'kubectl.kubernetes.io/last-applied-configuration')",message="spec.carryAnnotations must not name copyrator.flant.com/* or kubectl.kubernetes.io/last-applied-configuration"
	// +listType=set
	// +optional
	CarryAnnotations []MetadataKey `json:"carryAnnotations,omitempty"`

	// namespaces limits the copies to these namespaces, when set. Without it (and without
	// namespaceSelector) every active namespace is a candidate. Either way a namespace
	// receives copies only when serviceAccountName may create ruleType objects there.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// namespaceSelector limits the copies to namespaces whose labels match, when set.
	// Mutually exclusive with namespaces.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// serviceAccountName is the ServiceAccount of the rule's namespace that the rule acts
	// as: a namespace receives copies only when this ServiceAccount may create ConfigMaps
	// (or Secrets) there, as RBAC decides. The owner of a target namespace consents with a
	// RoleBinding (for example to the quartet-copyrator-target ClusterRole); a cluster admin
	// consents for every namespace with a ClusterRoleBinding. The ServiceAccount need not
	// exist: only its name is checked. Default: copyrator.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +default="copyrator"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Service Account"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// deletionPolicy decides what happens to the copies when the rule is deleted:
	// Delete (default) removes them, Retain leaves them (in namespaces that still consent;
	// elsewhere they are removed), without Copyrator's labels but with the
	// copyrator.flant.com/source annotation that says where they came from.
	// +default="Delete"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Deletion Policy"
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// CopyConflict is a target namespace where an object of the same name exists that
// Copyrator did not create; it is left alone.
type CopyConflict struct {
	// namespace of the foreign object.
	// +required
	Namespace string `json:"namespace,omitempty"`
	// name of the foreign object.
	// +required
	Name string `json:"name,omitempty"`
	// reason says why it is a conflict.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RefusedNamespace is a namespace the rule selects that receives no copies, and why.
type RefusedNamespace struct {
	// namespace that refused.
	// +required
	Namespace string `json:"namespace,omitempty"`
	// reason says what consent is missing.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// CopyratorRuleStatus says what the rule copied.
type CopyratorRuleStatus struct {
	// conditions are Ready (every copy this rule may write is in sync), Degraded (conflicts,
	// failed writes or reads, or an invalid spec) and Authorized (every namespace the rule
	// selects consents to its copies).
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation of the spec the controller last acted on fully (its
	// last pass without error); each condition carries the generation it describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// sourcesMatched is the number of source objects the selector matches.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Sources Matched"
	SourcesMatched int32 `json:"sourcesMatched"`
	// targetNamespaces is the number of namespaces that receive copies.
	// +optional
	TargetNamespaces int32 `json:"targetNamespaces"`
	// copiesInSync is the number of copies equal to their source.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Copies In Sync"
	CopiesInSync int32 `json:"copiesInSync"`
	// conflictCount is the number of target objects left alone because someone else owns them.
	// +optional
	ConflictCount int32 `json:"conflictCount,omitempty"`
	// conflicts lists some of them (at most 20).
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Conflicts []CopyConflict `json:"conflicts,omitempty"`
	// refusedCount is the number of namespaces the rule selects that receive no copies
	// because its ServiceAccount may not create objects there, or because they are protected.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Refused Namespaces"
	RefusedCount int32 `json:"refusedCount,omitempty"`
	// refused lists some of them (at most 20), with what consent is missing.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Refused []RefusedNamespace `json:"refused,omitempty"`
}

// CopyratorRule copies the ConfigMaps or Secrets of its namespace that match a label
// selector into other namespaces, and keeps the copies in sync.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: every copy carries it in a label"
// +kubebuilder:resource:path=copyrators,singular=copyrator,shortName=copyr
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.ruleType`
// +kubebuilder:printcolumn:name="Sources",type=integer,JSONPath=`.status.sourcesMatched`
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targetNamespaces`
// +kubebuilder:printcolumn:name="In-Sync",type=integer,JSONPath=`.status.copiesInSync`
// +kubebuilder:printcolumn:name="Conflicts",type=integer,JSONPath=`.status.conflictCount`
// +kubebuilder:printcolumn:name="Refused",type=integer,JSONPath=`.status.refusedCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Copyrator Rule",resources={{ConfigMap,v1},{Secret,v1}}
type CopyratorRule struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects what is copied where.
	// +required
	Spec CopyratorRuleSpec `json:"spec,omitzero"`
	// status says what was copied.
	// +optional
	Status CopyratorRuleStatus `json:"status,omitempty"`
}

// CopyratorRuleList is a list of CopyratorRules.
// +kubebuilder:object:root=true
type CopyratorRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CopyratorRule `json:"items"`
}
