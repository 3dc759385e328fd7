package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChaosAgentSpec is the article's first ChaosAgent: tantrum mode and a pod tolerance.
// Objects written as v1alpha1 are stored as v1beta1 (the same fields, plus the v1beta1
// defaults); reading them as v1alpha1 shows only these two fields.
type ChaosAgentSpec struct {
	// tantrumMode, when true, lets the agent kill pods at random, but only while at least
	// podTolerance candidate pods exist.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Tantrum Mode",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	TantrumMode bool `json:"tantrumMode,omitempty"`

	// podTolerance is the number of candidate pods that must exist before a tantrum kills any.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Tolerance",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	PodTolerance int32 `json:"podTolerance,omitempty"`
}

// ChaosAgentStatus is the part of the agent's status that v1alpha1 shows.
type ChaosAgentStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready (the agent is running rounds), Paused, Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ChaosAgent is a chaos engineering agent (v1alpha1: tantrum mode only). Prefer v1beta1.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ca
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: the agent labels the objects it changes with its name"
// +kubebuilder:printcolumn:name="Tantrum",type=boolean,JSONPath=`.spec.tantrumMode`,description="Kills Pods randomly"
// +kubebuilder:printcolumn:name="Tolerance",type=integer,JSONPath=`.spec.podTolerance`,description="Total number of Pods to tolerate before randomly killing Pods"
// +operator-sdk:csv:customresourcedefinitions:displayName="Chaos Agent (v1alpha1)",resources={{Pod,v1}}
type ChaosAgent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what the agent may break.
	// +optional
	Spec ChaosAgentSpec `json:"spec,omitempty"`
	// status says what the agent did.
	// +optional
	Status ChaosAgentStatus `json:"status,omitempty"`
}

// ChaosAgentList is a list of ChaosAgents.
// +kubebuilder:object:root=true
type ChaosAgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ChaosAgent `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ChaosAgent{}, &ChaosAgentList{})
}
