package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KillMethod says how a tantrum removes a pod.
// +kubebuilder:validation:Enum=Evict;Delete
type KillMethod string

const (
	// KillMethodEvict uses the Eviction API, so PodDisruptionBudgets are respected.
	KillMethodEvict KillMethod = "Evict"
	// KillMethodDelete deletes the pod directly, ignoring PodDisruptionBudgets.
	KillMethodDelete KillMethod = "Delete"
)

// ChaosAgentSpec is what the agent is allowed to break, how eagerly and how often.
type ChaosAgentSpec struct {
	// tantrumMode lets the agent kill pods at random when true, but only while at least
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

	// cancerMode lets the agent double the replicas of randomly chosen Deployments when true,
	// never above 128. Deployments scaled by a HorizontalPodAutoscaler are skipped.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cancer Mode",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	CancerMode bool `json:"cancerMode,omitempty"`

	// ipsumMode lets the agent overwrite every value of randomly chosen ConfigMaps with
	// lorem ipsum when true. Immutable ConfigMaps are skipped.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Ipsum Mode",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	IpsumMode bool `json:"ipsumMode,omitempty"`

	// eagerness is the chance, in percent, that any one candidate object is hit in a round.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +default=20
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Eagerness",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	Eagerness int32 `json:"eagerness,omitempty"`

	// pauseDuration is the number of seconds between two rounds.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +default=30
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pause Duration",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	PauseDuration int32 `json:"pauseDuration,omitempty"`

	// excludedNamespaces are never touched by this agent, in addition to the namespaces the
	// operator protects (its own and kube-system by default).
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Excluded Namespaces"
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`

	// namespaceSelector narrows the targets to namespaces whose labels match, when set.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// podSelector narrows tantrum targets to pods whose labels match, when set.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// dryRun makes the agent record every action it would take (in status and Events) and
	// change nothing, when true. It wins over every other setting.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Dry Run",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	DryRun bool `json:"dryRun,omitempty"`

	// paused stops new rounds when true. With restoreOnDelete the agent also puts back
	// what it changed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paused",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	Paused bool `json:"paused,omitempty"`

	// killMethod is how a tantrum removes a pod: Evict (default, respects
	// PodDisruptionBudgets) or Delete.
	// +default="Evict"
	// +optional
	KillMethod KillMethod `json:"killMethod,omitempty"`

	// maxActionsPerRound caps the number of actions of one round, whatever eagerness says.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +default=10
	// +optional
	MaxActionsPerRound int32 `json:"maxActionsPerRound,omitempty"`

	// restoreOnDelete puts back the replicas and ConfigMap data the agent changed when the
	// agent is deleted or paused (true by default).
	// +default=true
	// +optional
	RestoreOnDelete *bool `json:"restoreOnDelete,omitempty"`

	// seed makes the random choices of every round reproducible, when set.
	// +optional
	Seed *int64 `json:"seed,omitempty"`
}

// ActionKind names what the agent did to an object.
type ActionKind string

const (
	// ActionKillPod removed a pod (eviction or deletion).
	ActionKillPod ActionKind = "KillPod"
	// ActionScaleDeployment doubled a Deployment's replicas.
	ActionScaleDeployment ActionKind = "ScaleDeployment"
	// ActionIpsumConfigMap overwrote a ConfigMap's values with lorem ipsum.
	ActionIpsumConfigMap ActionKind = "IpsumConfigMap"
	// ActionRestoreDeployment put a Deployment's replicas back.
	ActionRestoreDeployment ActionKind = "RestoreDeployment"
	// ActionRestoreConfigMap put a ConfigMap's data back.
	ActionRestoreConfigMap ActionKind = "RestoreConfigMap"
)

// ChaosAction is one thing the agent did, or would have done in dry-run.
type ChaosAction struct {
	// time is when the action was taken.
	// +required
	Time metav1.Time `json:"time,omitempty"`
	// kind is what was done.
	// +required
	Kind ActionKind `json:"kind,omitempty"`
	// target is the object, as namespace/name.
	// +required
	Target string `json:"target,omitempty"`
	// detail says what changed, for humans.
	// +optional
	Detail string `json:"detail,omitempty"`
	// dryRun is true when the action was only recorded.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// result is Succeeded, DryRun (recorded only), or Skipped or Failed with the reason
	// after a colon, e.g. "Skipped: DisruptionBudget".
	// +optional
	Result string `json:"result,omitempty"`
}

// ChaosCounts counts actions since the agent was created.
type ChaosCounts struct {
	// podsKilled counts pods evicted or deleted.
	// +optional
	PodsKilled int64 `json:"podsKilled,omitempty"`
	// deploymentsScaled counts Deployment replica doublings.
	// +optional
	DeploymentsScaled int64 `json:"deploymentsScaled,omitempty"`
	// configMapsIpsumed counts ConfigMaps overwritten with lorem ipsum.
	// +optional
	ConfigMapsIpsumed int64 `json:"configMapsIpsumed,omitempty"`
	// restored counts objects put back.
	// +optional
	Restored int64 `json:"restored,omitempty"`
}

// ChaosAgentStatus is what the agent has done.
type ChaosAgentStatus struct {
	// conditions are Ready (the agent is running rounds), Paused and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// lastRoundTime is when the last round ran.
	// +optional
	LastRoundTime *metav1.Time `json:"lastRoundTime,omitempty"`
	// nextRoundTime is when the next round is due.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Next Round"
	NextRoundTime *metav1.Time `json:"nextRoundTime,omitempty"`
	// rounds counts the rounds run.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Rounds"
	Rounds int64 `json:"rounds,omitempty"`
	// counts of actions since the agent was created.
	// +optional
	Counts ChaosCounts `json:"counts,omitempty"`
	// lastActions are the most recent actions, newest first (at most 20).
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	LastActions []ChaosAction `json:"lastActions,omitempty"`
	// changedObjects is the number of Deployments and ConfigMaps this agent changed and has
	// not put back yet. Their originals are kept in annotations on the objects themselves.
	// +optional
	ChangedObjects int32 `json:"changedObjects,omitempty"`
}

// ChaosAgent is a chaos engineering agent: every pauseDuration seconds it picks, with
// eagerness percent chance each, pods to kill, Deployments to double and ConfigMaps to fill
// with lorem ipsum, outside protected and excluded namespaces.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName=ca
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: the agent labels the objects it changes with its name"
// +kubebuilder:printcolumn:name="Tantrum",type=boolean,JSONPath=`.spec.tantrumMode`,description="Kills Pods randomly"
// +kubebuilder:printcolumn:name="Tolerance",type=integer,JSONPath=`.spec.podTolerance`,description="Total number of Pods to tolerate before randomly killing Pods"
// +kubebuilder:printcolumn:name="Cancer",type=boolean,JSONPath=`.spec.cancerMode`,description="Doubles Deployment replicas randomly"
// +kubebuilder:printcolumn:name="Ipsum",type=boolean,JSONPath=`.spec.ipsumMode`,description="Writes lorem ipsum into ConfigMaps randomly"
// +kubebuilder:printcolumn:name="Eagerness",type=integer,JSONPath=`.spec.eagerness`,description="Chance in percent that an object is hit"
// +kubebuilder:printcolumn:name="Pause",type=integer,JSONPath=`.spec.pauseDuration`,description="Seconds between rounds"
// +kubebuilder:printcolumn:name="Excluded",type=string,JSONPath=`.spec.excludedNamespaces`,description="Namespaces never touched"
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun`,priority=1,description="Only records what it would do"
// +kubebuilder:printcolumn:name="Rounds",type=integer,JSONPath=`.status.rounds`,priority=1,description="Rounds run"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Chaos Agent",resources={{Pod,v1},{Deployment,v1},{ConfigMap,v1}}
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
