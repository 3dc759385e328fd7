package chaosagent

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// MaxReplicas is the ceiling of cancer mode, as in the original: replicas are doubled up to
// 128 and never above.
const MaxReplicas = 128

// Candidate is one object a round may hit.
type Candidate struct {
	Namespace string
	Name      string
	UID       types.UID
	// Replicas is the Deployment's spec.replicas (Deployments only).
	Replicas int32
	// Workload is Kind/namespace/name of what owns the pod (pods only): its Deployment,
	// StatefulSet or other controller, or the pod itself when nothing does.
	Workload string
}

// Key returns namespace/name.
func (c Candidate) Key() string { return c.Namespace + "/" + c.Name }

// Candidates are the objects a round chooses from, each list sorted by namespace and name so
// that a seeded round is reproducible.
type Candidates struct {
	Pods        []Candidate
	Deployments []Candidate
	ConfigMaps  []Candidate
}

// Action is one thing a round decided to do.
type Action struct {
	Kind   blackadderv1beta1.ActionKind
	Target Candidate
	// Replicas is the new replica count of a ScaleDeployment.
	Replicas int32
}

// Inventory is what the informer cache holds for one round. Only the lists the agent's modes
// need are filled.
type Inventory struct {
	// Namespaces (metadata) are read only when the agent has a namespaceSelector.
	Namespaces  []metav1.PartialObjectMetadata
	Pods        []metav1.PartialObjectMetadata
	Deployments []appsv1.Deployment
	HPAs        []autoscalingv2.HorizontalPodAutoscaler
	ConfigMaps  []metav1.PartialObjectMetadata
}

// Scope says which namespaces and objects an agent may touch.
type Scope struct {
	// Protected holds the operator's protected namespaces and the agent's excludedNamespaces.
	Protected sets.Set[string]
	// Watched are the namespaces the manager watches; empty means all.
	Watched sets.Set[string]
	// NamespaceSelector, when not nil, must match a namespace's labels.
	NamespaceSelector labels.Selector
	// PodSelector, when not nil, must match a pod's labels.
	PodSelector labels.Selector
	// ImmutableConfigMaps are ConfigMaps found immutable earlier (the metadata cache cannot tell).
	ImmutableConfigMaps sets.Set[types.UID]
	// Workloads asks for each pod's workload (Candidate.Workload), which pacing per workload
	// needs; without it no round pays for it.
	Workloads bool
}

// Allows reports whether the scope lets an agent touch objects in namespace ns: whether
// scopeChain admits it, which leaves out the namespace selector (it needs the namespace's
// labels). Actions check it again just before they write, as a second guard.
func (s Scope) Allows(ns string) bool {
	_, _, refused := scopeChain.Evaluate(namespaceInput{Name: ns, Scope: s})
	return !refused
}

// restoreInput is what the restore checks look at: an object that carries an agent's marks.
type restoreInput struct {
	Scope     Scope
	Namespace string
	// Immutable is a ConfigMap's immutable field, as read from the API server.
	Immutable bool
}

// restoreChain says which objects that carry an agent's marks restore leaves as they are.
// Anyone who may label an object can put an agent's marks on it, so the marks never take
// restore where the agent's rounds may not go (restoreInScope), and an immutable ConfigMap,
// whose data the API server refuses to change for ever, is reported instead of retried
// (restoreMutable). A skipped object keeps its marks, so that a person can find it by label.
// The reason and message of a refusal are the Skipped result and the detail of the object's
// status.lastActions entry and Events.
var restoreChain = chain[restoreInput]{restoreInScope, restoreMutable}

// restoreInScope refuses objects outside Allows: protected, excluded and unwatched
// namespaces. The namespace selector is not applied, so a namespace relabelled since the
// change is still put back.
func restoreInScope(in restoreInput) (reason, message string, refused bool) {
	if !in.Scope.Allows(in.Namespace) {
		return SkipOutOfScope, "namespace is protected, excluded or not watched: left as it is, marks kept", true
	}
	return "", "", false
}

// restoreMutable refuses immutable ConfigMaps.
func restoreMutable(in restoreInput) (reason, message string, refused bool) {
	if in.Immutable {
		return SkipImmutable, "immutable, so its data cannot be put back: left as it is, marks kept", true
	}
	return "", "", false
}

// restoreSkip says why restore leaves an object that carries an agent's marks as it is
// (restoreChain's first refusal), or returns an empty reason when the object is to be put back.
func restoreSkip(scope Scope, namespace string, immutable bool) (reason, detail string) {
	reason, detail, _ = restoreChain.Evaluate(restoreInput{Scope: scope, Namespace: namespace, Immutable: immutable})
	return reason, detail
}

// workloadOf returns Kind/namespace/name of the workload a pod belongs to: its controller,
// except that a ReplicaSet a Deployment made (named <deployment>-<pod-template-hash>, the
// hash also the pod's label) stands for that Deployment, so every revision of a
// Deployment is one workload; a pod without a controller is a workload of its own. Only
// metadata is needed, which is all the cache holds of pods.
func workloadOf(p *metav1.PartialObjectMetadata) string {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return "Pod/" + p.Namespace + "/" + p.Name
	}
	if ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.APIVersion, "apps/") {
		if hash := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; hash != "" && strings.HasSuffix(ref.Name, "-"+hash) {
			return "Deployment/" + p.Namespace + "/" + strings.TrimSuffix(ref.Name, "-"+hash)
		}
	}
	return ref.Kind + "/" + p.Namespace + "/" + ref.Name
}

// replicasOf returns a Deployment's desired replicas (1 when unset, as the API defaults it).
func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// decide is one round of the original loop, as a pure function: every candidate is hit with
// probability eagerness/100; a tantrum only happens while at least podTolerance candidate pods
// exist; cancer doubles replicas up to MaxReplicas (Deployments at 0 or at the ceiling cannot
// grow and are not candidates: growable); ipsum hits ConfigMaps. When more than maxActionsPerRound
// objects are hit, a uniformly random subset of that size is kept, in candidate order.
// With meanSecondsBetweenKills the tantrum is paced per workload instead (paceKills), which
// needs the pods' workloads (Scope.Workloads). spec must have its defaults filled
// (withDefaults).
func decide(spec blackadderv1beta1.ChaosAgentSpec, c Candidates, rng *rand.Rand) []Action {
	hit := func() bool { return rng.IntN(100) < int(spec.Eagerness) }
	var actions []Action
	if spec.TantrumMode && len(c.Pods) > 0 && len(c.Pods) >= int(spec.PodTolerance) {
		if spec.MeanSecondsBetweenKills != nil {
			actions = append(actions, paceKills(c.Pods, killChance(spec.PauseDuration, *spec.MeanSecondsBetweenKills), rng)...)
		} else {
			for _, p := range c.Pods {
				if hit() {
					actions = append(actions, Action{Kind: blackadderv1beta1.ActionKillPod, Target: p})
				}
			}
		}
	}
	if spec.CancerMode {
		for _, d := range c.Deployments {
			if _, _, refused := growable(d.Replicas); refused {
				continue
			}
			if hit() {
				actions = append(actions, Action{Kind: blackadderv1beta1.ActionScaleDeployment, Target: d, Replicas: doubled(d.Replicas)})
			}
		}
	}
	if spec.IpsumMode {
		for _, cm := range c.ConfigMaps {
			if hit() {
				actions = append(actions, Action{Kind: blackadderv1beta1.ActionIpsumConfigMap, Target: cm})
			}
		}
	}
	return capActions(actions, int(spec.MaxActionsPerRound), rng)
}

// killChance is the chance that a workload loses a pod in one round when kills come at
// random with a mean of meanSeconds between them (a Poisson process): 1 - e^(-pause/mean).
// It uses the nominal pause, not the time since the last round, so a round after a night
// outside the schedule's windows is no harsher than any other.
func killChance(pauseSeconds, meanSeconds int32) float64 {
	if meanSeconds <= 0 {
		return 1
	}
	return -math.Expm1(-float64(pauseSeconds) / float64(meanSeconds))
}

// paceKills is tantrum paced per workload: every workload (in the order of its key) loses
// one pod, chosen uniformly among its candidates, with probability chance. The kill rate of
// a workload is then the same whether it runs one pod or a hundred, and the cluster's rate
// grows with the number of workloads only. pods must be sorted (selectCandidates).
func paceKills(pods []Candidate, chance float64, rng *rand.Rand) []Action {
	byWorkload := map[string][]Candidate{}
	for _, p := range pods {
		byWorkload[p.Workload] = append(byWorkload[p.Workload], p)
	}
	keys := make([]string, 0, len(byWorkload))
	for k := range byWorkload {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []Action
	for _, k := range keys {
		if rng.Float64() < chance {
			group := byWorkload[k]
			out = append(out, Action{Kind: blackadderv1beta1.ActionKillPod, Target: group[rng.IntN(len(group))]})
		}
	}
	return out
}

// doubled returns twice r, at most MaxReplicas.
func doubled(r int32) int32 {
	return min(2*r, MaxReplicas)
}

// capActions keeps a uniformly random subset of at most limit actions, in their original order.
func capActions(actions []Action, limit int, rng *rand.Rand) []Action {
	if limit < 0 {
		limit = 0
	}
	if len(actions) <= limit {
		return actions
	}
	idx := make([]int, len(actions))
	for i := range idx {
		idx[i] = i
	}
	// Partial Fisher-Yates: the first limit entries become a uniform sample.
	for i := 0; i < limit; i++ {
		j := i + rng.IntN(len(idx)-i)
		idx[i], idx[j] = idx[j], idx[i]
	}
	chosen := idx[:limit]
	slices.Sort(chosen)
	out := make([]Action, 0, limit)
	for _, i := range chosen {
		out = append(out, actions[i])
	}
	return out
}

// withDefaults fills what the API server defaults, for agents stored before a default existed
// and for tests that build specs by hand.
func withDefaults(spec blackadderv1beta1.ChaosAgentSpec) blackadderv1beta1.ChaosAgentSpec {
	if spec.Eagerness <= 0 {
		spec.Eagerness = 20
	}
	if spec.Eagerness > 100 {
		spec.Eagerness = 100
	}
	if spec.PauseDuration <= 0 {
		spec.PauseDuration = 30
	}
	if spec.KillMethod == "" {
		spec.KillMethod = blackadderv1beta1.KillMethodEvict
	}
	if spec.MaxActionsPerRound <= 0 {
		spec.MaxActionsPerRound = 10
	}
	if spec.RestoreOnDelete == nil {
		t := true
		spec.RestoreOnDelete = &t
	}
	return spec
}

// phase is what a pass does with an agent whose spec is valid.
type phase string

const (
	// phasePaused: spec.paused; restore (with restoreOnDelete).
	phasePaused phase = "Paused"
	// phaseStopped: the run ended (a guard tripped, or durationSeconds elapsed); restore
	// (with restoreOnDelete) and wait for a new spec.runName.
	phaseStopped phase = "Stopped"
	// phaseOutsideWindow: no window of spec.schedule is open; restore (with
	// restoreOnDelete) and wait for the next window.
	phaseOutsideWindow phase = "OutsideWindow"
	// phaseActive: check the guards and run a round when one is due.
	phaseActive phase = "Active"
)

// phaseOf decides what a pass does: a pause wins, then an ended run, then the schedule.
func phaseOf(spec blackadderv1beta1.ChaosAgentSpec, run blackadderv1beta1.ChaosRun, open bool) phase {
	switch {
	case spec.Paused:
		return phasePaused
	case run.EndTime != nil:
		return phaseStopped
	case !open:
		return phaseOutsideWindow
	}
	return phaseActive
}

// currentRun returns the run spec.runName names: the recorded one while the names match
// (ended or not), else a new run that has not started yet.
func currentRun(recorded *blackadderv1beta1.ChaosRun, runName string) blackadderv1beta1.ChaosRun {
	if recorded != nil && recorded.Name == runName {
		return *recorded.DeepCopy()
	}
	return blackadderv1beta1.ChaosRun{Name: runName}
}

// runDeadline returns when a started run's spec.durationSeconds runs out (nil: no duration,
// or the run has not started).
func runDeadline(spec blackadderv1beta1.ChaosAgentSpec, run blackadderv1beta1.ChaosRun) *time.Time {
	if spec.DurationSeconds == nil || run.StartTime == nil {
		return nil
	}
	t := run.StartTime.Add(time.Duration(*spec.DurationSeconds) * time.Second)
	return &t
}

// expireRun ends run with DurationElapsed when its deadline has come at now, and says
// whether it did.
func expireRun(spec blackadderv1beta1.ChaosAgentSpec, run blackadderv1beta1.ChaosRun, now time.Time) (blackadderv1beta1.ChaosRun, bool) {
	deadline := runDeadline(spec, run)
	if run.EndTime != nil || deadline == nil || now.Before(*deadline) {
		return run, false
	}
	return endRun(run, blackadderv1beta1.RunEndDurationElapsed,
		fmt.Sprintf("spec.durationSeconds (%ds) elapsed: the run started at %s", *spec.DurationSeconds, run.StartTime.UTC().Format(time.RFC3339)), now), true
}

// endRun returns run ended at now for reason.
func endRun(run blackadderv1beta1.ChaosRun, reason blackadderv1beta1.RunEndReason, message string, now time.Time) blackadderv1beta1.ChaosRun {
	at := apiTime(now)
	run.EndTime, run.EndReason, run.EndMessage = &at, reason, truncate(message, 1024)
	return run
}

// requeueAfter is the shortest of the waits that are set (> 0), so the agent wakes for
// the next round, the window's end or the run's deadline, whichever comes first.
func requeueAfter(now time.Time, waits ...*time.Time) time.Duration {
	var out time.Duration
	for _, w := range waits {
		if w == nil {
			continue
		}
		d := w.Sub(now)
		if d <= 0 {
			d = time.Second // due already: come back at once, without a hot loop
		}
		if out == 0 || d < out {
			out = d
		}
	}
	return out
}
