package chaosagent

import (
	"cmp"
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

// mirrorPodAnnotation marks static pods mirrored by a kubelet; the API server cannot remove them.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

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

// namespaceFilter returns a memoised test of whether objects in a namespace may be touched.
func (s Scope) namespaceFilter(inv Inventory) func(ns string) bool {
	var nsLabels map[string]labels.Set
	if s.NamespaceSelector != nil {
		nsLabels = make(map[string]labels.Set, len(inv.Namespaces))
		for i := range inv.Namespaces {
			nsLabels[inv.Namespaces[i].Name] = inv.Namespaces[i].Labels
		}
	}
	memo := map[string]bool{}
	return func(ns string) bool {
		ok, seen := memo[ns]
		if seen {
			return ok
		}
		ok = s.allows(ns, nsLabels)
		memo[ns] = ok
		return ok
	}
}

func (s Scope) allows(ns string, nsLabels map[string]labels.Set) bool {
	if ns == "" || s.Protected.Has(ns) {
		return false
	}
	if s.Watched.Len() > 0 && !s.Watched.Has(ns) {
		return false
	}
	if s.NamespaceSelector != nil {
		l, found := nsLabels[ns]
		if !found || !s.NamespaceSelector.Matches(l) {
			return false
		}
	}
	return true
}

// Allows reports whether the scope lets an agent touch objects in namespace ns, without the
// namespace selector (which needs the namespace's labels). Actions check it again just before
// they write, as a second guard.
func (s Scope) Allows(ns string) bool {
	return ns != "" && !s.Protected.Has(ns) && (s.Watched.Len() == 0 || s.Watched.Has(ns))
}

// restoreSkip says why restore leaves an object that carries an agent's marks as it is, or
// returns an empty reason when the object is to be put back. Anyone who may label an object
// can put an agent's marks on it, so the marks never take restore where the agent's rounds may
// not go (Allows: protected, excluded and unwatched namespaces; the namespace selector is not
// applied, so a namespace relabelled since the change is still put back), and an immutable
// ConfigMap, whose data the API server refuses to change for ever, is reported instead of
// retried. A skipped object keeps its marks, so that a person can find it by label.
func restoreSkip(scope Scope, namespace string, immutable bool) (reason, detail string) {
	switch {
	case !scope.Allows(namespace):
		return SkipOutOfScope, "namespace is protected, excluded or not watched: left as it is, marks kept"
	case immutable:
		return SkipImmutable, "immutable, so its data cannot be put back: left as it is, marks kept"
	}
	return "", ""
}

// clusterConfigMaps are the ConfigMaps the cluster's own controllers publish into every
// namespace: the API server's CA bundle every pod's service account volume mounts
// (kube-controller-manager's root-ca-cert-publisher; OpenShift's service CA). Lorem ipsum
// there would break in-cluster TLS for every pod started before it is published again:
// chaos against the cluster, not against a workload.
var clusterConfigMaps = []string{"kube-root-ca.crt", "openshift-service-ca.crt"}

// selectCandidates filters the inventory down to what an agent may hit: outside protected,
// excluded and unwatched namespaces, inside the namespace selector; pods matching the pod
// selector and not already terminating (mirror pods never); Deployments not scaled by a
// HorizontalPodAutoscaler; ConfigMaps not known to be immutable and not published by the
// cluster itself (clusterConfigMaps).
func selectCandidates(inv Inventory, scope Scope) Candidates {
	nsOK := scope.namespaceFilter(inv)
	var c Candidates
	for i := range inv.Pods {
		p := &inv.Pods[i]
		if !nsOK(p.Namespace) || p.DeletionTimestamp != nil {
			continue
		}
		if _, mirror := p.Annotations[mirrorPodAnnotation]; mirror {
			continue
		}
		if scope.PodSelector != nil && !scope.PodSelector.Matches(labels.Set(p.Labels)) {
			continue
		}
		pod := Candidate{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		if scope.Workloads {
			pod.Workload = workloadOf(p)
		}
		c.Pods = append(c.Pods, pod)
	}
	autoscaled := hpaTargets(inv.HPAs)
	for i := range inv.Deployments {
		d := &inv.Deployments[i]
		if !nsOK(d.Namespace) || d.DeletionTimestamp != nil || autoscaled.Has(d.Namespace+"/"+d.Name) {
			continue
		}
		c.Deployments = append(c.Deployments, Candidate{Namespace: d.Namespace, Name: d.Name, UID: d.UID, Replicas: replicasOf(d)})
	}
	for i := range inv.ConfigMaps {
		cm := &inv.ConfigMaps[i]
		if !nsOK(cm.Namespace) || cm.DeletionTimestamp != nil || scope.ImmutableConfigMaps.Has(cm.UID) ||
			slices.Contains(clusterConfigMaps, cm.Name) {
			continue
		}
		c.ConfigMaps = append(c.ConfigMaps, Candidate{Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID})
	}
	for _, list := range [][]Candidate{c.Pods, c.Deployments, c.ConfigMaps} {
		slices.SortFunc(list, func(a, b Candidate) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
	}
	return c
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

// hpaTargets returns namespace/name of every Deployment a HorizontalPodAutoscaler scales.
func hpaTargets(hpas []autoscalingv2.HorizontalPodAutoscaler) sets.Set[string] {
	out := sets.New[string]()
	for i := range hpas {
		ref := hpas[i].Spec.ScaleTargetRef
		if ref.Kind != "Deployment" {
			continue
		}
		if gv := ref.APIVersion; gv != "" && gv != "apps/v1" && gv != "apps/v1beta1" && gv != "apps/v1beta2" && gv != "extensions/v1beta1" {
			continue
		}
		out.Insert(hpas[i].Namespace + "/" + ref.Name)
	}
	return out
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
// grow and are not candidates); ipsum hits ConfigMaps. When more than maxActionsPerRound
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
			if d.Replicas < 1 || d.Replicas >= MaxReplicas {
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
