package chaosagent

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/egress"
)

// deploymentSeen is what the manager's cache holds about a guarded Deployment.
type deploymentSeen struct {
	// Deployment is nil when it was not found, not watched or not readable.
	Deployment *appsv1.Deployment
	NotWatched bool
	// Err is a cache read that failed for another reason than NotFound.
	Err error
}

// httpSeen is what an HTTP guard's request got.
type httpSeen struct {
	Status  int
	Latency time.Duration
	// Err is a request without an answer; only egress.Failure's phrase of it is shown.
	Err error
}

// guardVerdict is one guard's result: reason blackadderv1beta1.GuardReasonPassed, or why it failed.
type guardVerdict struct {
	Name    string
	Failed  bool
	Reason  string
	Message string
}

// evaluateDeploymentGuard holds while status.readyReplicas reaches the floor: minReady as a
// count, or as a percentage (rounded up) of the replicas before any agent scaled the
// Deployment (its original-replicas annotation; spec.replicas otherwise), so cancer mode
// does not raise the floor of the Deployment it doubled.
func evaluateDeploymentGuard(g blackadderv1beta1.DeploymentGuard, seen deploymentSeen) (reason, message string, failed bool) {
	key := g.Namespace + "/" + g.Name
	switch {
	case seen.NotWatched:
		return blackadderv1beta1.GuardReasonDeploymentNotWatched, fmt.Sprintf("Deployment %s is in a namespace the operator does not watch", key), true
	case seen.Err != nil:
		return blackadderv1beta1.GuardReasonDeploymentUnreadable, fmt.Sprintf("Deployment %s could not be read from the manager's cache", key), true
	case seen.Deployment == nil:
		return blackadderv1beta1.GuardReasonDeploymentNotFound, fmt.Sprintf("Deployment %s not found", key), true
	}
	d := seen.Deployment
	base := replicasOf(d)
	if original, err := strconv.ParseInt(d.Annotations[AnnotationOriginalReplicas], 10, 32); err == nil && original >= 0 {
		base = int32(original)
	}
	floor, err := intstr.GetScaledValueFromIntOrPercent(&g.MinReady, int(base), true)
	if err != nil {
		// The CRD refuses such a floor; an object stored before the rule trips, safely.
		return blackadderv1beta1.GuardReasonDeploymentBelowFloor, fmt.Sprintf("Deployment %s: minReady %s is not a count or a percentage", key, g.MinReady.String()), true
	}
	of := ""
	if g.MinReady.Type == intstr.String {
		of = fmt.Sprintf(" (%s of %d)", g.MinReady.StrVal, base)
	}
	ready := d.Status.ReadyReplicas
	if int(ready) < floor {
		return blackadderv1beta1.GuardReasonDeploymentBelowFloor, fmt.Sprintf("Deployment %s has %d ready replica(s), below its floor of %d%s", key, ready, floor, of), true
	}
	return blackadderv1beta1.GuardReasonPassed, fmt.Sprintf("Deployment %s has %d ready replica(s), floor %d%s", key, ready, floor, of), false
}

// evaluateHTTPGuard holds while the answer has expectedStatus (200 by default) and, with
// maxLatencyMilliseconds, came in time. A request without an answer says only the fixed
// phrase of egress.Failure, never the error's text.
func evaluateHTTPGuard(g blackadderv1beta1.HTTPGuard, seen httpSeen) (reason, message string, failed bool) {
	want := int(g.ExpectedStatus)
	if want == 0 {
		want = 200
	}
	took := seen.Latency.Round(time.Millisecond)
	switch {
	case seen.Err != nil:
		phrase := egress.Failure(seen.Err)
		if phrase == egress.PhraseAddressRefused {
			return blackadderv1beta1.GuardReasonHTTPAddressRefused, fmt.Sprintf("GET %s not sent: %s; a cluster admin can allow its range with --chaosagent-guard-allowed-cidrs", g.URL, phrase), true
		}
		return blackadderv1beta1.GuardReasonHTTPFailed, fmt.Sprintf("GET %s: %s", g.URL, phrase), true
	case seen.Status != want:
		return blackadderv1beta1.GuardReasonHTTPUnexpectedStatus, fmt.Sprintf("GET %s answered %d in %s, expected %d", g.URL, seen.Status, took, want), true
	case g.MaxLatencyMilliseconds != nil && seen.Latency > time.Duration(*g.MaxLatencyMilliseconds)*time.Millisecond:
		return blackadderv1beta1.GuardReasonHTTPTooSlow, fmt.Sprintf("GET %s answered %d in %s, more than %dms", g.URL, seen.Status, took, *g.MaxLatencyMilliseconds), true
	}
	return blackadderv1beta1.GuardReasonPassed, fmt.Sprintf("GET %s answered %d in %s", g.URL, seen.Status, took), false
}

// guardOrder returns the guards in the order they are checked: Deployment guards first (a
// read of the manager's cache), then HTTP guards (a request each), each kind in the order
// listed. The first that fails trips, so a failing Deployment guard costs no request.
func guardOrder(guards []blackadderv1beta1.SteadyStateGuard) []blackadderv1beta1.SteadyStateGuard {
	out := slices.Clone(guards)
	slices.SortStableFunc(out, func(a, b blackadderv1beta1.SteadyStateGuard) int {
		return guardCost(a) - guardCost(b)
	})
	return out
}

func guardCost(g blackadderv1beta1.SteadyStateGuard) int {
	if g.Deployment != nil {
		return 0
	}
	return 1
}

// firstFailure returns the first failed verdict, or nil.
func firstFailure(verdicts []guardVerdict) *guardVerdict {
	for i := range verdicts {
		if verdicts[i].Failed {
			return &verdicts[i]
		}
	}
	return nil
}

// guardResults turns the verdicts of one check into status.guards entries.
func guardResults(verdicts []guardVerdict, now time.Time) []blackadderv1beta1.GuardResult {
	at := apiTime(now)
	out := make([]blackadderv1beta1.GuardResult, 0, len(verdicts))
	for _, v := range verdicts {
		r := blackadderv1beta1.GuardResult{Name: v.Name, Result: blackadderv1beta1.GuardPassed, Reason: v.Reason, Message: truncate(v.Message, 512), LastCheckTime: &at}
		if v.Failed {
			r.Result = blackadderv1beta1.GuardFailed
		}
		out = append(out, r)
	}
	return out
}

// truncate keeps at most n bytes of s, cut at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
