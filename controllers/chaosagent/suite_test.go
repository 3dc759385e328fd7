package chaosagent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

// env is the full local cluster: the tests need pods that kwok runs, ReplicaSets that replace
// evicted pods, the disruption controller behind PodDisruptionBudgets and garbage collection.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunSuite(m, testenv.Full, &env))
}

// operatorNamespace is the namespace the test manager pretends to run in (always protected).
const operatorNamespace = "quartet-system"

// startManager starts a manager running only this controller, configured like main.go
// (WATCH_NAMESPACE from shared.Watched), and stops it when the test ends. cfg may wrap
// the transport (to count calls). It registers the reconciler Setup would, after modify has
// changed it (a test's clock), and returns it (the benchmarks call its methods).
func startManager(t testing.TB, cfg *rest.Config, opts *Options, shared scope.Namespaces, modify ...func(*Reconciler)) *Reconciler {
	t.Helper()
	var r *Reconciler
	testenv.StartManager(t, cfg, shared, func(mgr ctrl.Manager, shared scope.Namespaces) error {
		if err := opts.complete(); err != nil {
			return err
		}
		var err error
		if r, err = opts.newReconciler(shared); err != nil {
			return err
		}
		for _, m := range modify {
			m(r)
		}
		return opts.register(mgr, r)
	}, func(o *ctrl.Options) {
		for obj, by := range CacheOptions() {
			o.Cache.ByObject[obj] = by
		}
	})
	return r
}

// withClock replaces the real clock of rounds, windows and runs (not the guards' latency
// clock, as in Setup).
func withClock(clk clock.PassiveClock) func(*Reconciler) {
	return func(r *Reconciler) { r.Clock = clk }
}

// selectedBy returns the labels of a test's namespaces: chaos-test=selector, which only that
// test's agents select.
func selectedBy(selector string) map[string]string {
	return map[string]string{"chaos-test": selector}
}

// selectorFor returns a unique value for the chaos-test label of one test's namespaces.
func selectorFor(t *testing.T) string {
	t.Helper()
	return strings.ToLower(fmt.Sprintf("%s-%s", strings.ReplaceAll(t.Name()[strings.LastIndex(t.Name(), "/")+1:], "_", "-"), rand.String(4)))
}

// agentFor returns an agent that only sees namespaces labelled chaos-test=selector, with the
// quick, deterministic settings of the integration tests.
func agentFor(name, selector string, mutate func(*blackadderv1beta1.ChaosAgentSpec)) *blackadderv1beta1.ChaosAgent {
	a := &blackadderv1beta1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + rand.String(4)},
		Spec: blackadderv1beta1.ChaosAgentSpec{
			Eagerness: 100, PauseDuration: 1, MaxActionsPerRound: 10, Seed: ptr.To[int64](1),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: selectedBy(selector)},
		},
	}
	mutate(&a.Spec)
	return a
}

// createAgent creates the agent and, at the end of the test, deletes it and waits until it is gone.
func createAgent(t *testing.T, a *blackadderv1beta1.ChaosAgent) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, a))
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, a)
		assert.Eventually(t, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(a), &blackadderv1beta1.ChaosAgent{}))
		}, time.Minute, 100*time.Millisecond, "agent %s not released", a.Name)
	})
}

// waitAgent polls the agent until ok holds and returns it; on timeout it reports the last
// status seen.
func waitAgent(t *testing.T, name string, ok func(a *blackadderv1beta1.ChaosAgent) bool, msg string) *blackadderv1beta1.ChaosAgent {
	t.Helper()
	var got *blackadderv1beta1.ChaosAgent
	var lastErr error
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		a := &blackadderv1beta1.ChaosAgent{}
		if lastErr = env.Client.Get(context.Background(), client.ObjectKey{Name: name}, a); lastErr != nil {
			continue
		}
		got = a
		if ok(a) {
			return a
		}
	}
	if got == nil {
		t.Fatalf("agent %s: %s; never read: %v", name, msg, lastErr)
	}
	t.Fatalf("agent %s: %s; last status %+v", name, msg, got.Status)
	return nil
}

// readyPods waits until ns holds exactly n Running, not terminating pods labelled app=app and
// returns their UIDs.
func readyPods(t *testing.T, ns, app string, n int) map[string]bool {
	t.Helper()
	var uids map[string]bool
	require.Eventually(t, func() bool {
		pods := &corev1.PodList{}
		if err := env.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return false
		}
		uids = map[string]bool{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				uids[string(p.UID)] = true
			}
		}
		return len(uids) == n && len(pods.Items) == n
	}, 90*time.Second, 200*time.Millisecond, "%d running pods of %s/%s", n, ns, app)
	return uids
}

// hasAction reports whether the agent's lastActions hold an action of kind whose result starts
// with result.
func hasAction(a *blackadderv1beta1.ChaosAgent, kind blackadderv1beta1.ActionKind, result string) bool {
	for _, act := range a.Status.LastActions {
		if act.Kind == kind && strings.HasPrefix(act.Result, result) {
			return true
		}
	}
	return false
}
