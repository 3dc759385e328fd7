package chaosagent

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/egress"
)

// Steady-state guards: checkGuards reads what they look at, the evaluate functions judge it.

// defaultGuardTimeout is an HTTP guard's timeoutSeconds when the API server did not fill it.
const defaultGuardTimeout = 5 * time.Second

// HTTPChecker sends the requests of HTTP guards under egress.NewClient's rules for the addresses
// a custom resource names (no redirect; no refused address unless --chaosagent-guard-allowed-cidrs).
type HTTPChecker struct {
	client  *http.Client
	allowed []netip.Prefix
	clock   clock.PassiveClock // measures the latency
}

// NewHTTPChecker returns the checker; the client's timeout is the longest a guard may ask for.
func NewHTTPChecker(clk clock.PassiveClock, allowed []netip.Prefix) *HTTPChecker {
	return &HTTPChecker{client: egress.NewClient(30*time.Second, allowed), allowed: allowed, clock: clk}
}

// Get sends GET url: the answer's status code, how long it took, or no answer within timeout.
func (c *HTTPChecker) Get(ctx context.Context, url string, timeout time.Duration) (int, time.Duration, error) {
	start := c.clock.Now()
	status, err := egress.Get(ctx, c.client, c.allowed, url, timeout)
	latency := c.clock.Since(start)
	if err != nil {
		// The error's text stays in the log: status and Events say only egress.Failure(err).
		ctrl.LoggerFrom(ctx).V(1).Info("Guard request failed", "url", url, "error", err)
	}
	return status, latency, err
}

// checkGuards checks the guards in guardOrder up to the first that fails. A Deployment guard
// reads the manager's cache; one that fails there is confirmed by a read from the API server
// (the cache may lag). An HTTP guard sends one request.
func (r *Reconciler) checkGuards(ctx context.Context, guards []blackadderv1beta1.SteadyStateGuard) []guardVerdict {
	var out []guardVerdict
	for _, g := range guardOrder(guards) {
		v := guardVerdict{Name: g.Name}
		switch {
		case g.Deployment != nil:
			v.Reason, v.Message, v.Failed = evaluateDeploymentGuard(*g.Deployment, r.seeDeployment(ctx, *g.Deployment, r.Client))
			if v.Failed && v.Reason != blackadderv1beta1.GuardReasonDeploymentNotWatched {
				v.Reason, v.Message, v.Failed = evaluateDeploymentGuard(*g.Deployment, r.seeDeployment(ctx, *g.Deployment, r.APIReader))
			}
		case g.HTTP != nil:
			var seen httpSeen
			timeout := cmp.Or(time.Duration(max(g.HTTP.TimeoutSeconds, 0))*time.Second, defaultGuardTimeout)
			seen.Status, seen.Latency, seen.Err = r.HTTP.Get(ctx, g.HTTP.URL, timeout)
			v.Reason, v.Message, v.Failed = evaluateHTTPGuard(*g.HTTP, seen)
		default:
			continue // the CRD refuses a guard with neither
		}
		out = append(out, v)
		if v.Failed {
			break
		}
	}
	return out
}

// seeDeployment reads a guarded Deployment through reader: the cache, or the API server.
func (r *Reconciler) seeDeployment(ctx context.Context, g blackadderv1beta1.DeploymentGuard, reader client.Reader) deploymentSeen {
	if r.Watched.Len() > 0 && !r.Watched.Has(g.Namespace) {
		return deploymentSeen{NotWatched: true}
	}
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	d := &appsv1.Deployment{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: g.Namespace, Name: g.Name}, d)
	switch {
	case apierrors.IsNotFound(err):
		return deploymentSeen{}
	case err != nil:
		ctrl.LoggerFrom(ctx).Info("Reading a guarded Deployment failed", "deployment", g.Namespace+"/"+g.Name, "error", err)
		return deploymentSeen{Err: err}
	}
	return deploymentSeen{Deployment: d}
}

// deploymentSeen is what a read found of a guarded Deployment.
type deploymentSeen struct {
	Deployment *appsv1.Deployment
	NotWatched bool
	Err        error
}

// httpSeen is what an HTTP guard's request got; of Err only egress.Failure's phrase is shown.
type httpSeen struct {
	Status  int
	Latency time.Duration
	Err     error
}

// guardVerdict is one guard's result: reason GuardReasonPassed, or why it failed.
type guardVerdict struct {
	Name            string
	Failed          bool
	Reason, Message string
}

// evaluateDeploymentGuard holds while status.readyReplicas reaches minReady, a count or a
// percentage (rounded up) of the replicas before any agent scaled the Deployment.
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

// evaluateHTTPGuard holds while the answer has expectedStatus and came in time; a request
// without an answer says only egress.Failure's fixed phrase, never the error's text.
func evaluateHTTPGuard(g blackadderv1beta1.HTTPGuard, seen httpSeen) (reason, message string, failed bool) {
	want := cmp.Or(int(g.ExpectedStatus), 200)
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

// guardOrder puts Deployment guards (a cache read) before HTTP guards (a request each).
func guardOrder(guards []blackadderv1beta1.SteadyStateGuard) []blackadderv1beta1.SteadyStateGuard {
	isHTTP := func(g blackadderv1beta1.SteadyStateGuard) bool { return g.Deployment == nil }
	isDeployment := func(g blackadderv1beta1.SteadyStateGuard) bool { return g.Deployment != nil }
	return append(slices.DeleteFunc(slices.Clone(guards), isHTTP), slices.DeleteFunc(slices.Clone(guards), isDeployment)...)
}

func firstFailure(verdicts []guardVerdict) *guardVerdict {
	if i := slices.IndexFunc(verdicts, func(v guardVerdict) bool { return v.Failed }); i >= 0 {
		return &verdicts[i]
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
