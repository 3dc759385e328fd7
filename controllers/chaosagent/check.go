package chaosagent

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/egress"
)

// defaultGuardTimeout is an HTTP guard's timeoutSeconds when the API server did not fill it
// (an agent stored before the field existed, or built by hand).
const defaultGuardTimeout = 5 * time.Second

// HTTPChecker sends the requests of HTTP guards.
type HTTPChecker interface {
	// Get sends GET url and returns the answer's status code and how long it took; err is a
	// request that got no answer within timeout.
	Get(ctx context.Context, url string, timeout time.Duration) (status int, latency time.Duration, err error)
}

// NewHTTPChecker sends guard requests from the manager under the rules of every address a
// custom resource names (egress.NewClient): no redirect is followed (its status is the
// answer), and no loopback, link-local, unspecified, multicast or cloud metadata address is
// dialed unless it lies in allowed (--chaosagent-guard-allowed-cidrs). clk measures the
// latency.
func NewHTTPChecker(clk clock.PassiveClock, allowed []netip.Prefix) HTTPChecker {
	// The client's own timeout is the longest a guard may ask for; each request has its own.
	return &httpChecker{client: egress.NewClient(30*time.Second, allowed), allowed: allowed, clock: clk}
}

type httpChecker struct {
	client  *http.Client
	allowed []netip.Prefix
	clock   clock.PassiveClock
}

func (c *httpChecker) Get(ctx context.Context, url string, timeout time.Duration) (int, time.Duration, error) {
	start := c.clock.Now()
	status, err := egress.Get(ctx, c.client, c.allowed, url, timeout)
	latency := c.clock.Since(start)
	if err != nil {
		// The error's text stays in the log: status and Events say only egress.Failure(err).
		ctrl.LoggerFrom(ctx).V(1).Info("Guard request failed", "url", url, "error", err)
	}
	return status, latency, err
}

// checkGuards checks the guards in guardOrder and stops at the first that fails; it returns
// the verdicts of the guards it checked. Deployments come from the manager's cache (the
// informer every round already uses), and a Deployment guard that fails there is read once
// more from the API server before it counts; HTTP guards each send one request.
func (r *Reconciler) checkGuards(ctx context.Context, guards []blackadderv1beta1.SteadyStateGuard) []guardVerdict {
	var out []guardVerdict
	for _, g := range guardOrder(guards) {
		v := guardVerdict{Name: g.Name}
		switch {
		case g.Deployment != nil:
			v.Reason, v.Message, v.Failed = evaluateDeploymentGuard(*g.Deployment, r.seeDeployment(ctx, *g.Deployment, r.Client))
			if v.Failed && v.Reason != blackadderv1beta1.GuardReasonDeploymentNotWatched {
				// The cache may lag the API server: a failure is confirmed by one read from
				// the API server before it trips, which costs nothing while the guard holds.
				v.Reason, v.Message, v.Failed = evaluateDeploymentGuard(*g.Deployment, r.seeDeployment(ctx, *g.Deployment, r.APIReader))
			}
		case g.HTTP != nil:
			v.Reason, v.Message, v.Failed = evaluateHTTPGuard(*g.HTTP, r.seeHTTP(ctx, *g.HTTP))
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

func (r *Reconciler) seeHTTP(ctx context.Context, g blackadderv1beta1.HTTPGuard) httpSeen {
	timeout := time.Duration(g.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultGuardTimeout
	}
	status, latency, err := r.HTTP.Get(ctx, g.URL, timeout)
	return httpSeen{Status: status, Latency: latency, Err: err}
}
