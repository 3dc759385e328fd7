package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// ChaosAgentSpec and ChaosAgentStatus are v1beta1's. The original Python operator's
// v1alpha1 manifests use only tantrumMode and podTolerance, and they still apply unchanged;
// serving the full v1beta1 schema here too makes the webhook-free conversion (strategy
// None) lossless: an agent written through v1alpha1 keeps every v1beta1 field (dryRun
// included) instead of having them pruned to their defaults.
type (
	ChaosAgentSpec   = blackadderv1beta1.ChaosAgentSpec
	ChaosAgentStatus = blackadderv1beta1.ChaosAgentStatus
)

// ChaosAgent is the chaos engineering agent version of the original Python operator, kept
// so its manifests apply unchanged; it has the v1beta1 schema. Prefer v1beta1.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ca
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: the agent labels the objects it changes with its name"
// +kubebuilder:printcolumn:name="Tantrum",type=boolean,JSONPath=`.spec.tantrumMode`,description="Kills Pods randomly"
// +kubebuilder:printcolumn:name="Tolerance",type=integer,JSONPath=`.spec.podTolerance`,description="Total number of Pods to tolerate before randomly killing Pods"
// +operator-sdk:csv:customresourcedefinitions:displayName="Chaos Agent (v1alpha1)",resources={{Pod,v1}}
type ChaosAgent struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
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
