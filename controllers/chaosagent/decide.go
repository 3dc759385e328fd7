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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// MaxReplicas is the ceiling of cancer mode, as in the original.
const MaxReplicas = 128

// Action is one thing a round decided to do.
type Action struct {
	Kind     blackadderv1beta1.ActionKind
	Target   Candidate
	Replicas int32 // a ScaleDeployment's new replica count
}

// workloadOf returns Kind/namespace/name of the workload a pod belongs to, from its metadata:
// its controller, except that a ReplicaSet a Deployment made (<deployment>-<pod-template-hash>,
// the hash also the pod's label) stands for that Deployment, so all its revisions are one
// workload; a pod without a controller is a workload of its own.
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
func replicasOf(d *appsv1.Deployment) int32 { return ptr.Deref(d.Spec.Replicas, 1) }

// decide is one round of the original loop, as a pure function of a spec with defaults:
// every candidate is hit with probability eagerness/100; a tantrum needs at least podTolerance
// candidate pods (Running ones: the cache holds no others, see runningPods), or is paced per
// workload with meanSecondsBetweenKills (paceKills); cancer leaves out the Deployments it
// cannot double (growable). Of more than maxActionsPerRound hits, a uniformly random subset
// of that size is kept, in candidate order.
func decide(spec blackadderv1beta1.ChaosAgentSpec, c Candidates, rng *rand.Rand) []Action {
	hit := func() bool { return rng.IntN(100) < int(spec.Eagerness) }
	var actions []Action
	if mayKill(spec, c) {
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
			if _, _, refused := growable(d.Replicas); !refused && hit() {
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

// mayKill says whether tantrum may kill in a round: candidate pods, at least podTolerance of them.
func mayKill(spec blackadderv1beta1.ChaosAgentSpec, c Candidates) bool {
	return spec.TantrumMode && len(c.Pods) > 0 && len(c.Pods) >= int(spec.PodTolerance)
}

// Reasons of quartet_chaosagent_rounds_skipped_total: why a round that came due did no action.
const (
	skipOutsideWindow = blackadderv1beta1.ReasonOutsideWindow
	skipGuardTripped  = blackadderv1beta1.ReasonGuardTripped
	skipNoCandidates  = "NoCandidates"
	skipNoneChosen    = "NoneChosen"
)

// idleReason says why a round decided no action ("" when it decided some): NoCandidates when
// its modes had nothing they may act on, NoneChosen when chance hit none of the candidates.
func idleReason(spec blackadderv1beta1.ChaosAgentSpec, c Candidates, actions []Action) string {
	doublable := func(d Candidate) bool { _, _, refused := growable(d.Replicas); return !refused }
	switch {
	case len(actions) > 0:
		return ""
	case mayKill(spec, c), spec.CancerMode && slices.ContainsFunc(c.Deployments, doublable), spec.IpsumMode && len(c.ConfigMaps) > 0:
		return skipNoneChosen
	}
	return skipNoCandidates
}

// heldBack says whether a closed window holds back a round: one is due at now after the last
// (nil: none yet), or comes due before the window opens again (reopen; nil: not in sight).
func heldBack(spec blackadderv1beta1.ChaosAgentSpec, last *time.Time, now time.Time, reopen *time.Time) bool {
	due, next := roundDue(last, time.Duration(spec.PauseDuration)*time.Second, now)
	return due || reopen == nil || next.Before(*reopen)
}

// killChance is 1 - e^(-pause/mean): kills as a Poisson process, over the nominal pause so
// that the first round after a night outside the windows is no harsher than any other.
func killChance(pauseSeconds, meanSeconds int32) float64 {
	if meanSeconds <= 0 {
		return 1
	}
	return -math.Expm1(-float64(pauseSeconds) / float64(meanSeconds))
}

// paceKills is tantrum paced per workload: every workload (in key order) loses one pod, chosen
// uniformly, with probability chance, so its kill rate is the same with one pod or a hundred.
// pods must be sorted (selectCandidates).
func paceKills(pods []Candidate, chance float64, rng *rand.Rand) []Action {
	byWorkload := map[string][]Candidate{}
	for _, p := range pods {
		byWorkload[p.Workload] = append(byWorkload[p.Workload], p)
	}
	var out []Action
	for _, k := range sets.List(sets.KeySet(byWorkload)) {
		if rng.Float64() < chance {
			group := byWorkload[k]
			out = append(out, Action{Kind: blackadderv1beta1.ActionKillPod, Target: group[rng.IntN(len(group))]})
		}
	}
	return out
}

func doubled(r int32) int32 { return min(2*r, MaxReplicas) }

// capActions keeps a uniformly random subset of at most limit actions, in their original order.
func capActions(actions []Action, limit int, rng *rand.Rand) []Action {
	limit = max(limit, 0)
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

// withDefaults fills what the API server defaults, for agents stored before a default existed.
func withDefaults(spec blackadderv1beta1.ChaosAgentSpec) blackadderv1beta1.ChaosAgentSpec {
	if spec.Eagerness <= 0 {
		spec.Eagerness = 20
	}
	spec.Eagerness = min(spec.Eagerness, 100)
	if spec.PauseDuration <= 0 {
		spec.PauseDuration = 30
	}
	spec.KillMethod = cmp.Or(spec.KillMethod, blackadderv1beta1.KillMethodEvict)
	if spec.MaxActionsPerRound <= 0 {
		spec.MaxActionsPerRound = 10
	}
	spec.RestoreOnDelete = cmp.Or(spec.RestoreOnDelete, ptr.To(true))
	return spec
}

// phase is what a pass does with an agent whose spec is valid.
type phase string

// Paused, Stopped (the run ended) and OutsideWindow restore; Active runs rounds.
const (
	phasePaused        phase = "Paused"
	phaseStopped       phase = "Stopped"
	phaseOutsideWindow phase = "OutsideWindow"
	phaseActive        phase = "Active"
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

// currentRun returns the run spec.runName names: the recorded one (ended or not), or a new one.
func currentRun(recorded *blackadderv1beta1.ChaosRun, runName string) blackadderv1beta1.ChaosRun {
	if recorded != nil && recorded.Name == runName {
		return *recorded.DeepCopy()
	}
	return blackadderv1beta1.ChaosRun{Name: runName}
}

// runDeadline returns when a started run's spec.durationSeconds runs out, or nil.
func runDeadline(spec blackadderv1beta1.ChaosAgentSpec, run blackadderv1beta1.ChaosRun) *time.Time {
	if spec.DurationSeconds == nil || run.StartTime == nil {
		return nil
	}
	return ptr.To(run.StartTime.Add(time.Duration(*spec.DurationSeconds) * time.Second))
}

// expireRun ends run with DurationElapsed when its deadline has come, and says whether it did.
func expireRun(spec blackadderv1beta1.ChaosAgentSpec, run blackadderv1beta1.ChaosRun, now time.Time) (blackadderv1beta1.ChaosRun, bool) {
	deadline := runDeadline(spec, run)
	if run.EndTime != nil || deadline == nil || now.Before(*deadline) {
		return run, false
	}
	return endRun(run, blackadderv1beta1.RunEndDurationElapsed,
		fmt.Sprintf("spec.durationSeconds (%ds) elapsed: the run started at %s", *spec.DurationSeconds, run.StartTime.UTC().Format(time.RFC3339)), now), true
}

func endRun(run blackadderv1beta1.ChaosRun, reason blackadderv1beta1.RunEndReason, message string, now time.Time) blackadderv1beta1.ChaosRun {
	run.EndTime, run.EndReason, run.EndMessage = ptr.To(apiTime(now)), reason, truncate(message, 1024)
	return run
}

// roundDue says whether a round is due at now after the last one (nil: never), and when the next is.
func roundDue(last *time.Time, pause time.Duration, now time.Time) (due bool, next time.Time) {
	if last == nil || !now.Before(last.Add(pause)) {
		return true, now.Add(pause)
	}
	return false, last.Add(pause)
}

// requeueAfter is the shortest of the waits that are set (> 0).
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
