package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
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

	// schedule keeps rounds inside time windows, when set: outside every window the agent
	// takes no action, puts back what it changed (with restoreOnDelete) and says in
	// status.nextWindowTime when the next window opens. Without it rounds run at any time.
	// +optional
	Schedule *ChaosSchedule `json:"schedule,omitempty"`

	// durationSeconds bounds a run, when set: that many seconds after the run's first round
	// (status.run.startTime) the agent stops, puts back what it changed (with
	// restoreOnDelete) and stays stopped until runName changes (Chaos Mesh's duration). It
	// counts wall-clock time, paused and outside windows included.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Duration (seconds)",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	DurationSeconds *int32 `json:"durationSeconds,omitempty"`

	// guards are steady-state checks made before every round. When one fails, the agent
	// stops acting, puts back every replica count and ConfigMap it changed (with
	// restoreOnDelete), says which guard tripped (condition GuardTripped, an Event) and stays
	// stopped until runName changes. Deployment guards are checked first (from the
	// manager's cache), then HTTP guards, each in the order listed; the first that fails
	// trips.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Guards []SteadyStateGuard `json:"guards,omitempty"`

	// runName names the current run. A run ends when a guard trips or durationSeconds
	// elapses; the agent then stays stopped until runName is given another value, which
	// starts a new run (and counts durationSeconds afresh). Any value will do: a date, a
	// ticket, a counter.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Run Name",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	RunName string `json:"runName,omitempty"`

	// meanSecondsBetweenKills paces tantrums per workload instead of per pod, when set:
	// every Deployment, StatefulSet or other owner of candidate pods (a pod without an owner
	// counts alone) loses one pod, on average, once per this many seconds, however many pods
	// it has and however many workloads the cluster runs (kube-monkey's mean time between
	// failures). eagerness then applies to cancer and ipsum only; podTolerance and
	// maxActionsPerRound still apply.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Mean Seconds Between Kills",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	MeanSecondsBetweenKills *int32 `json:"meanSecondsBetweenKills,omitempty"`
}

// Weekday is a day of the week, in its three-letter English abbreviation.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// ChaosSchedule says when rounds may run: inside one of the windows, on a day that is not
// excluded, both read in the time zone.
type ChaosSchedule struct {
	// timeZone is the IANA name of the time zone windows and excludedDates are read in,
	// such as "Europe/Berlin" or "America/New_York" (default "UTC"). Windows follow the
	// wall clock across daylight saving changes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self != 'Local' && self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$') && timestamp('2000-01-01T00:00:00Z').getFullYear(self) == 2000",message="timeZone must be an IANA time zone name, such as Europe/Berlin or UTC"
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// windows are the times rounds may run. None: all day, every day but the excluded
	// dates.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Windows []TimeWindow `json:"windows,omitempty"`

	// excludedDates are days without rounds, as YYYY-MM-DD in timeZone (holidays, release
	// days). A window that crosses midnight into an excluded date ends at that midnight.
	// +kubebuilder:validation:MaxItems=366
	// +listType=set
	// +optional
	ExcludedDates []Date `json:"excludedDates,omitempty"`
}

// Date is a calendar day, as YYYY-MM-DD.
// +kubebuilder:validation:MaxLength=10
// +kubebuilder:validation:Pattern=`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`
// +kubebuilder:validation:XValidation:rule="timestamp(self + 'T00:00:00Z').getFullYear() > 0",message="must be a date that exists, as YYYY-MM-DD"
type Date string

// TimeWindow is a time of day, on some days of the week, when rounds may run.
// +kubebuilder:validation:XValidation:rule="self.start != self.end",message="start and end must differ; for a whole day use start 00:00 and end 24:00"
type TimeWindow struct {
	// days are the weekdays the window opens on. None: every day. A window that crosses
	// midnight belongs to the day it opens on (Fri 22:00–02:00 ends on Saturday).
	// +kubebuilder:validation:MaxItems=7
	// +listType=set
	// +optional
	Days []Weekday `json:"days,omitempty"`

	// start is when the window opens, as HH:MM (24-hour clock) in the schedule's time zone.
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	// +required
	Start string `json:"start,omitempty"`

	// end is when the window closes, as HH:MM or 24:00 (midnight at the end of the day).
	// An end earlier than start closes the next day.
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`
	// +required
	End string `json:"end,omitempty"`
}

// SteadyStateGuard is one check of the system's steady state: exactly one of deployment
// and http.
// +kubebuilder:validation:XValidation:rule="has(self.deployment) != has(self.http)",message="exactly one of deployment and http must be set"
type SteadyStateGuard struct {
	// name identifies the guard in status, conditions and Events.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name,omitempty"`

	// deployment fails the guard when a Deployment has fewer ready replicas than a floor.
	// +optional
	Deployment *DeploymentGuard `json:"deployment,omitempty"`

	// http fails the guard when a URL does not answer with the expected status code in time.
	// +optional
	HTTP *HTTPGuard `json:"http,omitempty"`
}

// DeploymentGuard holds while a Deployment has at least minReady ready replicas.
type DeploymentGuard struct {
	// namespace of the Deployment. It may be any namespace the operator watches, protected
	// ones included: the guard only reads it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace,omitempty"`

	// name of the Deployment. A Deployment that does not exist fails the guard.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name,omitempty"`

	// minReady is the floor of status.readyReplicas: a count such as 2, or a percentage
	// such as "75%" of the Deployment's replicas, rounded up. The percentage is of the
	// replicas before any agent scaled it (its blackadder.io/original-replicas
	// annotation), so cancer mode does not move the floor.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="minReady must be a count of at least 1 or a percentage from 1% to 100%"
	// +required
	MinReady intstr.IntOrString `json:"minReady,omitempty"`
}

// HTTPGuard holds while GET url answers with expectedStatus within maxLatencyMilliseconds.
// The manager sends the request: it follows no redirect (a redirect's status is the
// answer) and connects to no loopback, link-local or cloud metadata address unless the
// manager flag --chaosagent-guard-allowed-cidrs allows it.
type HTTPGuard struct {
	// url to GET, http or https, such as http://web.shop.svc:8080/healthz.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="url must be an absolute http or https URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-z]+://[^/?#]*@')",message="url must not carry credentials"
	// +required
	URL string `json:"url,omitempty"`

	// expectedStatus is the status code the answer must have (default 200).
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=599
	// +default=200
	// +optional
	ExpectedStatus int32 `json:"expectedStatus,omitempty"`

	// maxLatencyMilliseconds fails the guard when the answer takes longer, when set.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30000
	// +optional
	MaxLatencyMilliseconds *int32 `json:"maxLatencyMilliseconds,omitempty"`

	// timeoutSeconds is how long the request may take before it fails the guard (default 5).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30
	// +default=5
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
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
	// conditions are Ready (the agent is running rounds), Paused, Degraded, InWindow and
	// GuardTripped.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation of the spec the controller last acted on fully (its
	// last pass without error); each condition carries the generation it describes.
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
	// nextWindowTime is when the next window of spec.schedule opens, while the agent is
	// outside every window.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Next Window"
	NextWindowTime *metav1.Time `json:"nextWindowTime,omitempty"`
	// run is the current run: when it started and, once a guard tripped or
	// spec.durationSeconds elapsed, when and why it ended.
	// +optional
	Run *ChaosRun `json:"run,omitempty"`
	// guards are the results of the last check of each of spec.guards.
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	// +optional
	Guards []GuardResult `json:"guards,omitempty"`
}

// RunEndReason says why a run ended.
// +kubebuilder:validation:Enum=GuardTripped;DurationElapsed
type RunEndReason string

const (
	// RunEndGuardTripped is a run ended by a failed guard.
	RunEndGuardTripped RunEndReason = "GuardTripped"
	// RunEndDurationElapsed is a run ended after spec.durationSeconds.
	RunEndDurationElapsed RunEndReason = "DurationElapsed"
)

// ChaosRun is one run of an agent: from its first round until a guard trips or
// spec.durationSeconds elapses.
type ChaosRun struct {
	// name is spec.runName of this run.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Name string `json:"name,omitempty"`
	// startTime is when the run's first round ran; spec.durationSeconds counts from it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// endTime is when the run ended. The agent runs no round until spec.runName changes.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// endReason is why the run ended: GuardTripped or DurationElapsed.
	// +optional
	EndReason RunEndReason `json:"endReason,omitempty"`
	// endMessage says which guard tripped and why, or how long the run lasted.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	EndMessage string `json:"endMessage,omitempty"`
}

// GuardOutcome is the result of one guard check.
// +kubebuilder:validation:Enum=Passed;Failed
type GuardOutcome string

const (
	// GuardPassed is a guard that held.
	GuardPassed GuardOutcome = "Passed"
	// GuardFailed is a guard that did not hold.
	GuardFailed GuardOutcome = "Failed"
)

// GuardResult is the last check of one guard.
type GuardResult struct {
	// name is the guard's name.
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name,omitempty"`
	// result is Passed or Failed.
	// +optional
	Result GuardOutcome `json:"result,omitempty"`
	// reason is why it failed (CamelCase, such as DeploymentBelowFloor), or Passed.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
	// message says what was seen, for humans.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Message string `json:"message,omitempty"`
	// lastCheckTime is when the guard was checked.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`
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
// +kubebuilder:printcolumn:name="Stopped",type=string,JSONPath=`.status.run.endReason`,priority=1,description="Why the run ended: GuardTripped or DurationElapsed"
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
