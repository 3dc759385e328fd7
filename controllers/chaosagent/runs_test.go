package chaosagent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The integration tests of issue 25's ChaosAgent part: guards that stop and restore,
// bounded runs, and time windows on a shifted clock.

// readyReplicas waits until the Deployment has exactly n ready replicas, read from the API
// server.
func readyReplicas(t *testing.T, ns, name string, n int32) {
	t.Helper()
	require.Eventually(t, func() bool {
		d := &appsv1.Deployment{}
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d) == nil &&
			d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == n
	}, 90*time.Second, 100*time.Millisecond, "Deployment %s/%s with %d ready replicas", ns, name, n)
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	require.NoError(t, env.Client.Patch(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		client.RawPatch(types.MergePatchType, patch)))
}

func replicasNow(t *testing.T, ns, name string) int32 {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d))
	assert.NotContains(t, d.Labels, LabelAgent, "%s/%s: no marks once restored", ns, name)
	return *d.Spec.Replicas
}

func configMapData(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm))
	return cm.Data
}

func patchSpec(t *testing.T, name, patch string) {
	t.Helper()
	require.NoError(t, env.Client.Patch(context.Background(), &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: name}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":`+patch+`}`))))
}

// testDeploymentGuardTrips is the claim of issue 25 on kwok pods: an agent doubles a
// Deployment and overwrites a ConfigMap while a guard watches another Deployment (in a
// namespace the agent does not select); when that one loses a ready replica, the guard trips
// at the next round, and in that same pass the agent puts the replicas and the data back,
// says which guard tripped and why, and then acts no more until spec.runName changes.
func testDeploymentGuardTrips(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "guarded", selectedBy(sel))
	backend := testenv.Namespace(t, env.Client, "backend", nil)
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(backend, "db", 2)))
	original := map[string]string{"greeting": "hello"}
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: original}))
	readyReplicas(t, backend, "db", 2)

	const pause = 2
	agent := agentFor("guarded", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.CancerMode, s.IpsumMode, s.PauseDuration, s.RunName = true, true, pause, "first"
		s.Guards = []blackadderv1beta1.SteadyStateGuard{{Name: "db-ready", Deployment: &blackadderv1beta1.DeploymentGuard{
			Namespace: backend, Name: "db", MinReady: intstr.FromInt32(2)}}}
	})
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Counts.DeploymentsScaled >= 1 && a.Status.Counts.ConfigMapsIpsumed >= 1
	}, "web doubled and settings overwritten")
	assert.Equal(t, metav1.ConditionFalse, testenv.Condition(got.Status.Conditions, blackadderv1beta1.ConditionGuardTripped).Status)
	require.Len(t, got.Status.Guards, 1)
	assert.Equal(t, blackadderv1beta1.GuardPassed, got.Status.Guards[0].Result)
	assert.Contains(t, got.Status.Guards[0].Message, "has 2 ready replica(s), floor 2")
	require.NotNil(t, got.Status.Run)
	assert.Equal(t, "first", got.Status.Run.Name)
	assert.NotNil(t, got.Status.Run.StartTime)

	// The system suffers: db loses a ready replica.
	scale(t, backend, "db", 1)
	readyReplicas(t, backend, "db", 1)
	seenFailing := waitAgent(t, agent.Name, func(*blackadderv1beta1.ChaosAgent) bool { return true }, "")
	tripped := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return meta.IsStatusConditionTrue(a.Status.Conditions, blackadderv1beta1.ConditionGuardTripped)
	}, "the guard tripped")
	// The manager's cache may lag the test's read by a round at most.
	assert.LessOrEqual(t, tripped.Status.Rounds-seenFailing.Status.Rounds, int64(1), "at most one round after the guard failed")
	// The status that reports the trip is written after the restore of the same pass.
	assert.EqualValues(t, 1, replicasNow(t, ns, "web"), "replicas put back")
	assert.Equal(t, original, configMapData(t, ns, "settings"), "data put back")
	assert.Zero(t, tripped.Status.ChangedObjects)
	gt := testenv.Condition(tripped.Status.Conditions, blackadderv1beta1.ConditionGuardTripped)
	assert.Equal(t, blackadderv1beta1.GuardReasonDeploymentBelowFloor, gt.Reason)
	assert.Contains(t, gt.Message, `guard "db-ready" tripped: Deployment `+backend+`/db has 1 ready replica(s), below its floor of 2`)
	assert.Equal(t, blackadderv1beta1.ReasonGuardTripped, testenv.Condition(tripped.Status.Conditions, blackadderv1beta1.ConditionReady).Reason)
	assert.Equal(t, metav1.ConditionTrue, testenv.Condition(tripped.Status.Conditions, blackadderv1beta1.ConditionPaused).Status)
	require.NotNil(t, tripped.Status.Run)
	assert.Equal(t, blackadderv1beta1.RunEndGuardTripped, tripped.Status.Run.EndReason)
	assert.Equal(t, 1.0, testutil.ToFloat64(roundsSkipped.WithLabelValues(agent.Name, skipGuardTripped)), "the round that was due is skipped")
	assert.True(t, hasAction(tripped, blackadderv1beta1.ActionRestoreDeployment, ResultSucceeded))
	assert.True(t, hasAction(tripped, blackadderv1beta1.ActionRestoreConfigMap, ResultSucceeded))
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, testenv.EventReasons(c, env.Client, "default", "ChaosAgent", agent.Name), blackadderv1beta1.ReasonGuardTripped)
	}, 30*time.Second, 200*time.Millisecond)

	// Stopped: no round in three pauses, nothing changed again.
	time.Sleep(3 * pause * time.Second)
	still := waitAgent(t, agent.Name, func(*blackadderv1beta1.ChaosAgent) bool { return true }, "")
	assert.Equal(t, tripped.Status.Rounds, still.Status.Rounds, "no round after the trip")
	assert.EqualValues(t, 1, replicasNow(t, ns, "web"))

	// The system recovers and the user starts a new run.
	scale(t, backend, "db", 2)
	readyReplicas(t, backend, "db", 2)
	patchSpec(t, agent.Name, `{"runName":"second"}`)
	resumed := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Rounds > tripped.Status.Rounds && a.Status.Run != nil && a.Status.Run.Name == "second" &&
			a.Status.Counts.DeploymentsScaled > tripped.Status.Counts.DeploymentsScaled
	}, "a new run acting again")
	assert.Nil(t, resumed.Status.Run.EndTime)
	assert.Equal(t, blackadderv1beta1.ReasonGuardsPassed, testenv.Condition(resumed.Status.Conditions, blackadderv1beta1.ConditionGuardTripped).Reason)
	assert.Equal(t, metav1.ConditionFalse, testenv.Condition(resumed.Status.Conditions, blackadderv1beta1.ConditionPaused).Status)
	patchSpec(t, agent.Name, `{"paused":true}`) // no more doublings while the test ends
}

// testHTTPGuardTrips: an HTTP guard (a server on loopback, which the manager may dial only
// because --chaosagent-guard-allowed-cidrs allows it here) trips when the server answers 503;
// the status says so with the answer, never an error's text.
func testHTTPGuardTrips(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "http", selectedBy(sel))
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
	agent := agentFor("http", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.CancerMode, s.PauseDuration = true, 2
		s.Guards = []blackadderv1beta1.SteadyStateGuard{{Name: "web-answers", HTTP: &blackadderv1beta1.HTTPGuard{
			URL: srv.URL + "/healthz", ExpectedStatus: 200, TimeoutSeconds: 5, MaxLatencyMilliseconds: ptr.To[int32](5000)}}}
	})
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Counts.DeploymentsScaled >= 1 }, "web doubled")
	require.Len(t, got.Status.Guards, 1)
	assert.Contains(t, got.Status.Guards[0].Message, "answered 200")

	healthy.Store(false)
	tripped := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return meta.IsStatusConditionTrue(a.Status.Conditions, blackadderv1beta1.ConditionGuardTripped)
	}, "the HTTP guard tripped")
	assert.EqualValues(t, 1, replicasNow(t, ns, "web"), "replicas put back")
	gt := testenv.Condition(tripped.Status.Conditions, blackadderv1beta1.ConditionGuardTripped)
	assert.Equal(t, blackadderv1beta1.GuardReasonHTTPUnexpectedStatus, gt.Reason)
	assert.Contains(t, gt.Message, "answered 503")
	assert.Contains(t, gt.Message, "expected 200")
	assert.Equal(t, blackadderv1beta1.GuardFailed, tripped.Status.Guards[0].Result)
	assert.NotContains(t, tripped.Status.Guards[0].Message, "dial tcp")
}

// testDurationElapsed: with durationSeconds 5 and a pause of an hour, the agent acts in its
// first round, wakes by itself when the run's time is up, puts everything back and says so.
func testDurationElapsed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "duration", selectedBy(sel))
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
	original := map[string]string{"k": "v"}
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: original}))
	agent := agentFor("duration", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.CancerMode, s.IpsumMode, s.PauseDuration, s.DurationSeconds = true, true, 3600, ptr.To[int32](5)
	})
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Counts.DeploymentsScaled == 1 }, "web doubled")
	require.NotNil(t, got.Status.Run)
	require.NotNil(t, got.Status.Run.StartTime)

	ended := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Run != nil && a.Status.Run.EndReason == blackadderv1beta1.RunEndDurationElapsed
	}, "the run ended after 5 s")
	took := ended.Status.Run.EndTime.Sub(ended.Status.Run.StartTime.Time)
	assert.GreaterOrEqual(t, took, 5*time.Second)
	assert.Less(t, took, 30*time.Second, "woken by the deadline, not by the hour-long pause")
	assert.EqualValues(t, 1, ended.Status.Rounds)
	assert.EqualValues(t, 1, replicasNow(t, ns, "web"), "replicas put back")
	assert.Equal(t, original, configMapData(t, ns, "settings"), "data put back")
	assert.Equal(t, blackadderv1beta1.ReasonDurationElapsed, testenv.Condition(ended.Status.Conditions, blackadderv1beta1.ConditionPaused).Reason)
	assert.Equal(t, metav1.ConditionTrue, testenv.Condition(ended.Status.Conditions, blackadderv1beta1.ConditionPaused).Status)
	assert.Equal(t, blackadderv1beta1.ReasonDurationElapsed, testenv.Condition(ended.Status.Conditions, blackadderv1beta1.ConditionReady).Reason)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, testenv.EventReasons(c, env.Client, "default", "ChaosAgent", agent.Name), blackadderv1beta1.ReasonDurationElapsed)
	}, 30*time.Second, 200*time.Millisecond)
}

// shiftedClock is the real clock moved to another instant: time runs, so the controller's
// timers (RequeueAfter) and the agent's times agree, and a test starts just before a
// window opens or closes.
type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *shiftedClock) Set(t time.Time)                 { c.offset.Store(int64(time.Until(t))) }

// TestChaosAgentScheduleOnAShiftedClock runs a manager whose clock the test sets: an agent
// outside its office hours acts on nothing and says when they start; a window opens on the
// agent's own timer; a window that closes puts back what the agent changed. It runs after
// TestChaosAgentOnCluster has stopped its manager.
func TestChaosAgentScheduleOnAShiftedClock(t *testing.T) {
	env.Require(t)
	clk := &shiftedClock{}
	startManager(t, env.Config, &Options{}, scope.Namespaces{Operator: operatorNamespace}, withClock(clk))
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	office := &blackadderv1beta1.ChaosSchedule{TimeZone: "Europe/Berlin",
		Windows: []blackadderv1beta1.TimeWindow{{Days: []blackadderv1beta1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri"}, Start: "09:00", End: "17:00"}}}
	mondayNine := time.Date(2026, 11, 30, 9, 0, 0, 0, berlin)

	t.Run("ClosedWindowActsOnNothing", func(t *testing.T) {
		clk.Set(time.Date(2026, 11, 28, 3, 0, 0, 0, berlin)) // Saturday night
		ctx := context.Background()
		sel := selectorFor(t)
		ns := testenv.Namespace(t, env.Client, "closed", selectedBy(sel))
		require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 2)))
		original := map[string]string{"k": "v"}
		require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: original}))
		before := readyPods(t, ns, "web", 2)
		agent := agentFor("closed", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
			s.TantrumMode, s.CancerMode, s.IpsumMode, s.Schedule = true, true, true, office
		})
		createAgent(t, agent)
		got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
			return a.Status.ObservedGeneration == a.Generation && meta.IsStatusConditionFalse(a.Status.Conditions, blackadderv1beta1.ConditionInWindow)
		}, "outside its window")
		require.NotNil(t, got.Status.NextWindowTime)
		assert.True(t, mondayNine.Equal(got.Status.NextWindowTime.Time), "next window %s", got.Status.NextWindowTime)
		ready := testenv.Condition(got.Status.Conditions, blackadderv1beta1.ConditionReady)
		assert.Equal(t, metav1.ConditionTrue, ready.Status)
		assert.Equal(t, blackadderv1beta1.ReasonWaitingForWindow, ready.Reason)
		assert.Contains(t, ready.Message, "2026-11-30T09:00:00+01:00 (Mon 09:00 Europe/Berlin)")

		time.Sleep(3 * time.Second) // three pauses of the agent
		got = waitAgent(t, agent.Name, func(*blackadderv1beta1.ChaosAgent) bool { return true }, "")
		assert.Zero(t, got.Status.Rounds)
		assert.Empty(t, got.Status.LastActions)
		assert.Nil(t, got.Status.NextRoundTime)
		assert.EqualValues(t, 2, replicasNow(t, ns, "web"))
		assert.Equal(t, original, configMapData(t, ns, "settings"))
		assert.Equal(t, before, readyPods(t, ns, "web", 2), "no pod killed")
		assert.Equal(t, 1.0, testutil.ToFloat64(roundsSkipped.WithLabelValues(agent.Name, skipOutsideWindow)),
			"the round due at creation, counted once: the agent does not wake per pause outside its windows")
	})

	t.Run("WindowOpensOnTheAgentsTimer", func(t *testing.T) {
		clk.Set(mondayNine.Add(-3 * time.Second))
		ctx := context.Background()
		sel := selectorFor(t)
		ns := testenv.Namespace(t, env.Client, "opens", selectedBy(sel))
		require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
		agent := agentFor("opens", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
			s.CancerMode, s.PauseDuration, s.Schedule = true, 3600, office
		})
		createAgent(t, agent)
		got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Rounds == 1 }, "the first round, at 09:00")
		assert.False(t, got.Status.LastRoundTime.Before(&metav1.Time{Time: mondayNine}), "not before the window: %s", got.Status.LastRoundTime)
		assert.EqualValues(t, 2, *mustDeployment(t, ns, "web").Spec.Replicas, "doubled inside the window")
		assert.Equal(t, blackadderv1beta1.ReasonInsideWindow, testenv.Condition(got.Status.Conditions, blackadderv1beta1.ConditionInWindow).Reason)
		assert.Contains(t, testenv.Condition(got.Status.Conditions, blackadderv1beta1.ConditionInWindow).Message, "until 2026-11-30T17:00:00+01:00")
		assert.Nil(t, got.Status.NextWindowTime)
	})

	t.Run("WindowClosesAndRestores", func(t *testing.T) {
		closes := time.Date(2026, 11, 27, 17, 0, 0, 0, berlin) // Friday
		clk.Set(closes.Add(-10 * time.Second))
		ctx := context.Background()
		sel := selectorFor(t)
		ns := testenv.Namespace(t, env.Client, "closes", selectedBy(sel))
		require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
		agent := agentFor("closes", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
			s.CancerMode, s.PauseDuration, s.Schedule = true, 3600, office
		})
		createAgent(t, agent)
		waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Counts.DeploymentsScaled == 1 }, "doubled before 17:00")
		closed := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
			return a.Status.Counts.Restored == 1 && meta.IsStatusConditionFalse(a.Status.Conditions, blackadderv1beta1.ConditionInWindow)
		}, "put back when the window closed")
		assert.EqualValues(t, 1, replicasNow(t, ns, "web"))
		assert.EqualValues(t, 1, closed.Status.Rounds)
		assert.Zero(t, closed.Status.ChangedObjects)
		require.NotNil(t, closed.Status.NextWindowTime)
		assert.True(t, mondayNine.Equal(closed.Status.NextWindowTime.Time), "Friday evening to Monday morning: %s", closed.Status.NextWindowTime)
		assert.Equal(t, 1.0, testutil.ToFloat64(roundsSkipped.WithLabelValues(agent.Name, skipOutsideWindow)), "the closed window holds back the 17:59:50 round")
	})
}

func mustDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d))
	return d
}
