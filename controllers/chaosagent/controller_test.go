package chaosagent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestChaosAgentOnCluster runs every integration test against one manager, as in production:
// agents of parallel tests coexist, each confined to its own namespaces by a label selector.
func TestChaosAgentOnCluster(t *testing.T) {
	env.Require(t)
	// HTTP guards of the tests ask servers on loopback, which only the flag allows.
	startManager(t, env.Config, &Options{GuardAllowedCIDRs: "127.0.0.0/8"}, scope.Namespaces{Operator: operatorNamespace})
	t.Run("parallel", func(t *testing.T) {
		t.Run("EvictedPodIsReplacedByItsReplicaSet", func(t *testing.T) { t.Parallel(); testKill(t, blackadderv1beta1.KillMethodEvict) })
		t.Run("DeletedPodIsReplacedByItsReplicaSet", func(t *testing.T) { t.Parallel(); testKill(t, blackadderv1beta1.KillMethodDelete) })
		t.Run("DisruptionBudgetBlocksEviction", func(t *testing.T) { t.Parallel(); testDisruptionBudget(t) })
		t.Run("CancerAndIpsumUndoneOnDelete", func(t *testing.T) { t.Parallel(); testCancerIpsumRestoreOnDelete(t) })
		t.Run("PauseRestores", func(t *testing.T) { t.Parallel(); testPauseRestores(t) })
		t.Run("DryRunChangesNothing", func(t *testing.T) { t.Parallel(); testDryRun(t) })
		t.Run("V1alpha1AgentRuns", func(t *testing.T) { t.Parallel(); testV1alpha1(t) })
		t.Run("NameLongerThanALabelValueRefused", func(t *testing.T) { t.Parallel(); testLongName(t) })
		t.Run("RestoreKeepsToScopeAndSkipsImmutable", func(t *testing.T) { t.Parallel(); testRestoreKeepsToScope(t) })
		t.Run("RestoreOnDeleteFalseReleasesAWedgedAgent", func(t *testing.T) { t.Parallel(); testRestoreOnDeleteFalse(t) })
		t.Run("ObservedGenerationOnFailedPass", func(t *testing.T) { t.Parallel(); testObservedGenerationOnFailure(t) })
		t.Run("DeploymentGuardTripsStopsAndRestoresWithinOneRound", func(t *testing.T) { t.Parallel(); testDeploymentGuardTrips(t) })
		t.Run("HTTPGuardTripsStopsAndRestores", func(t *testing.T) { t.Parallel(); testHTTPGuardTrips(t) })
		t.Run("DurationElapsedPausesAndRestores", func(t *testing.T) { t.Parallel(); testDurationElapsed(t) })
		t.Run("OnlyRunningPodsCountTowardTolerance", func(t *testing.T) { t.Parallel(); testOnlyRunningPodsCount(t) })
	})
}

func testKill(t *testing.T, method blackadderv1beta1.KillMethod) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "tantrum", selectedBy(sel))
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 2)))
	before := readyPods(t, ns, "web", 2)

	agent := agentFor("tantrum", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.TantrumMode, s.MaxActionsPerRound, s.KillMethod = true, 1, method
	})
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Counts.PodsKilled >= 1 }, "a pod killed")
	// Stop the tantrum, then watch the ReplicaSet heal.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Paused = true
	require.NoError(t, env.Client.Patch(ctx, got, patch))
	waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return meta.IsStatusConditionTrue(a.Status.Conditions, blackadderv1beta1.ConditionPaused)
	}, "paused")

	after := readyPods(t, ns, "web", 2)
	replaced := 0
	for uid := range before {
		if !after[uid] {
			replaced++
		}
	}
	assert.GreaterOrEqual(t, replaced, 1, "at least one pod replaced by a new one")
	got = waitAgent(t, agent.Name, func(*blackadderv1beta1.ChaosAgent) bool { return true }, "")
	require.NotEmpty(t, got.Status.LastActions)
	killed := got.Status.LastActions[len(got.Status.LastActions)-1]
	assert.Equal(t, blackadderv1beta1.ActionKillPod, killed.Kind)
	assert.Equal(t, ResultSucceeded, killed.Result)
	assert.Contains(t, killed.Detail, map[blackadderv1beta1.KillMethod]string{blackadderv1beta1.KillMethodEvict: "evicted", blackadderv1beta1.KillMethodDelete: "deleted"}[method])
	podName := killed.Target[len(ns)+1:]
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "Pod", podName), "KilledPod", "event on the victim")
		assert.Contains(c, testenv.EventReasons(c, env.Client, "default", "ChaosAgent", agent.Name), "KilledPod", "event on the agent")
	}, 30*time.Second, 200*time.Millisecond)
	var m dto.Metric
	require.NoError(t, actionsTotal.WithLabelValues(agent.Name, string(blackadderv1beta1.ActionKillPod), "succeeded").Write(&m))
	assert.GreaterOrEqual(t, m.GetCounter().GetValue(), 1.0, "quartet_chaosagent_actions_total counted the kill")
}

// testOnlyRunningPodsCount reproduces finding 5 of the security review of 2026-12-06: a
// tenant in the agent's scope creates unschedulable pods matching podSelector to push the
// agent past its podTolerance, so that kills start on another tenant's pods. Pending pods do
// not count (nor are they killed): with 2 Running pods in one namespace, 10 Pending ones in
// the tenant's and a tolerance of 3, rounds kill nothing; a third Running pod reaches the
// tolerance, and kills start, in the namespace with the Running pods only.
func testOnlyRunningPodsCount(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	victim := testenv.Namespace(t, env.Client, "running", selectedBy(sel))
	tenant := testenv.Namespace(t, env.Client, "pending", selectedBy(sel))
	web := testenv.Deployment(victim, "web", 2)
	require.NoError(t, env.Client.Create(ctx, web))
	running := readyPods(t, victim, "web", 2)
	pending := pendingPods(t, tenant, "web", 10)

	agent := agentFor("tolerance", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.TantrumMode, s.PodTolerance, s.MaxActionsPerRound, s.KillMethod = true, 3, 1, blackadderv1beta1.KillMethodDelete
		s.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	})
	createAgent(t, agent)
	// Eagerness 100: had the 12 pods counted, the first round would have killed one.
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Rounds >= 3 }, "three rounds")
	assert.Zero(t, got.Status.Counts.PodsKilled, "2 Running pods are below the tolerance of 3, whatever is Pending")
	assert.Empty(t, got.Status.LastActions)
	assert.Equal(t, running, readyPods(t, victim, "web", 2), "the same pods still run")
	assert.Equal(t, pending, pendingPods(t, tenant, "web", 0), "the Pending pods are left alone")

	// A third Running pod reaches the tolerance: a controller that never kills fails here.
	patch := client.MergeFrom(web.DeepCopy())
	web.Spec.Replicas = ptr.To[int32](3)
	require.NoError(t, env.Client.Patch(ctx, web, patch))
	got = waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Counts.PodsKilled >= 1 }, "a pod killed at the tolerance")
	for _, act := range got.Status.LastActions {
		assert.Equal(t, blackadderv1beta1.ActionKillPod, act.Kind)
		assert.True(t, strings.HasPrefix(act.Target, victim+"/"), "killed %s: only Running pods are candidates", act.Target)
	}
	assert.Equal(t, pending, pendingPods(t, tenant, "web", 0), "the Pending pods are still left alone")
}

// pendingPods creates n pods labelled app=app in ns that no scheduler binds (a tenant's
// unschedulable pods), when n > 0, and returns the UIDs of the Pending pods labelled app=app
// in ns, after checking that each is Pending.
func pendingPods(t *testing.T, ns, app string, n int) map[string]bool {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i), Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{SchedulerName: "nobody", AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/fake:1"}}},
		}
		// The ServiceAccount admission plugin refuses pods until the namespace has its default account.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			err := env.Client.Create(ctx, pod)
			assert.True(c, err == nil || apierrors.IsAlreadyExists(err), "creating %s/%s: %v", ns, pod.Name, err)
		}, 30*time.Second, 200*time.Millisecond)
	}
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": app}))
	uids := map[string]bool{}
	for _, p := range pods.Items {
		require.Equal(t, corev1.PodPending, p.Status.Phase, "%s/%s", p.Namespace, p.Name)
		require.Nil(t, p.DeletionTimestamp, "%s/%s", p.Namespace, p.Name)
		uids[string(p.UID)] = true
	}
	return uids
}

func testDisruptionBudget(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "pdb", selectedBy(sel))
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "db", 2)))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}
	require.NoError(t, env.Client.Create(ctx, pdb))
	before := readyPods(t, ns, "db", 2)
	require.Eventually(t, func() bool {
		got := &policyv1.PodDisruptionBudget{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), got) == nil &&
			got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == 2
	}, 60*time.Second, 200*time.Millisecond, "disruption controller observed the budget")

	agent := agentFor("pdb", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode = true })
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Rounds >= 2 && hasAction(a, blackadderv1beta1.ActionKillPod, skipped(SkipDisruptionBudget).String())
	}, "evictions refused by the budget")
	assert.Zero(t, got.Status.Counts.PodsKilled)
	assert.False(t, hasAction(got, blackadderv1beta1.ActionKillPod, ResultSucceeded))
	assert.Equal(t, before, readyPods(t, ns, "db", 2), "the same pods still run")
}

func testCancerIpsumRestoreOnDelete(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "cancer", selectedBy(sel))
	excluded := testenv.Namespace(t, env.Client, "excluded", selectedBy(sel)) // selected, but listed in excludedNamespaces
	for _, d := range []*appsv1.Deployment{testenv.Deployment(ns, "web", 2), testenv.Deployment(ns, "autoscaled", 2), testenv.Deployment(excluded, "web", 2)} {
		require.NoError(t, env.Client.Create(ctx, d))
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "autoscaled"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "autoscaled"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 4,
		},
	}
	require.NoError(t, env.Client.Create(ctx, hpa))
	original := map[string]string{"greeting": "hello", "answer": "42"}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: original},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "frozen"}, Data: original, Immutable: ptr.To(true)},
		{ObjectMeta: metav1.ObjectMeta{Namespace: excluded, Name: "settings"}, Data: original},
	} {
		require.NoError(t, env.Client.Create(ctx, cm))
	}

	// One round only (a long pause), so the doubling is exact.
	agent := agentFor("cancer", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.CancerMode, s.IpsumMode, s.PauseDuration, s.ExcludedNamespaces = true, true, 3600, []string{excluded}
	})
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Rounds >= 1 }, "first round")
	assert.EqualValues(t, 1, got.Status.Counts.DeploymentsScaled, "web only: autoscaled and excluded left alone")
	// settings, and kube-root-ca.crt when the root CA publisher has created it already (the
	// original hits it too; the publisher puts it back).
	assert.GreaterOrEqual(t, got.Status.Counts.ConfigMapsIpsumed, int64(1))
	assert.EqualValues(t, 1+got.Status.Counts.ConfigMapsIpsumed, got.Status.ChangedObjects)
	assert.True(t, hasAction(got, blackadderv1beta1.ActionIpsumConfigMap, skipped(SkipImmutable).String()), "frozen is immutable")

	web := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, web))
	assert.EqualValues(t, 4, *web.Spec.Replicas, "cancer doubled 2 to 4")
	assert.Equal(t, "2", web.Annotations[AnnotationOriginalReplicas])
	assert.Equal(t, agent.Name, web.Labels[LabelAgent])
	settings := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, settings))
	assert.NotEqual(t, original, settings.Data, "ipsum rewrote the data")
	assert.Len(t, settings.Data, 2)
	assert.Contains(t, settings.Annotations, AnnotationOriginalData)
	for _, key := range []client.ObjectKey{{Namespace: ns, Name: "autoscaled"}, {Namespace: excluded, Name: "web"}} {
		d := &appsv1.Deployment{}
		require.NoError(t, env.Client.Get(ctx, key, d))
		assert.EqualValues(t, 2, *d.Spec.Replicas, "%s untouched", key)
		assert.NotContains(t, d.Labels, LabelAgent)
	}
	for _, key := range []client.ObjectKey{{Namespace: ns, Name: "frozen"}, {Namespace: excluded, Name: "settings"}} {
		cm := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(ctx, key, cm))
		assert.Equal(t, original, cm.Data, "%s untouched", key)
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "Deployment", "web"), "ScaledDeployment")
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "ConfigMap", "settings"), "OverwroteConfigMap")
	}, 30*time.Second, 200*time.Millisecond)

	// Deleting the agent puts everything back before the agent goes away.
	require.NoError(t, env.Client.Delete(ctx, got))
	require.Eventually(t, func() bool {
		return client.IgnoreNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(got), &blackadderv1beta1.ChaosAgent{})) == nil &&
			env.Client.Get(ctx, client.ObjectKeyFromObject(got), &blackadderv1beta1.ChaosAgent{}) != nil
	}, 60*time.Second, 100*time.Millisecond, "agent released after restoring")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(web), web))
	assert.EqualValues(t, 2, *web.Spec.Replicas, "replicas restored")
	assert.NotContains(t, web.Labels, LabelAgent)
	assert.NotContains(t, web.Annotations, AnnotationOriginalReplicas)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(settings), settings))
	assert.Equal(t, original, settings.Data, "data restored")
	assert.NotContains(t, settings.Labels, LabelAgent)
	assert.NotContains(t, settings.Annotations, AnnotationOriginalData)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "Deployment", "web"), "RestoredDeployment")
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "ConfigMap", "settings"), "RestoredConfigMap")
	}, 30*time.Second, 200*time.Millisecond)
}

func testPauseRestores(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "pause", selectedBy(sel))
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 3)))
	agent := agentFor("pause", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.CancerMode, s.PauseDuration = true, 3600 })
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Counts.DeploymentsScaled == 1 }, "scaled once")
	web := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, web))
	require.EqualValues(t, 6, *web.Spec.Replicas)

	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Paused = true
	require.NoError(t, env.Client.Patch(ctx, got, patch))
	got = waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Counts.Restored == 1 && a.Status.ChangedObjects == 0
	}, "restored on pause")
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, blackadderv1beta1.ConditionPaused))
	assert.Nil(t, got.Status.NextRoundTime)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(web), web))
	assert.EqualValues(t, 3, *web.Spec.Replicas)
	assert.NotContains(t, web.Labels, LabelAgent)
}

func testDryRun(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "dryrun", selectedBy(sel))
	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 2)))
	original := map[string]string{"k": "v"}
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: original}))
	before := readyPods(t, ns, "web", 2)

	agent := agentFor("dryrun", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.DryRun, s.TantrumMode, s.CancerMode, s.IpsumMode, s.KillMethod = true, true, true, true, blackadderv1beta1.KillMethodDelete
	})
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Rounds >= 3 && hasAction(a, blackadderv1beta1.ActionKillPod, ResultDryRun) &&
			hasAction(a, blackadderv1beta1.ActionScaleDeployment, ResultDryRun) && hasAction(a, blackadderv1beta1.ActionIpsumConfigMap, ResultDryRun)
	}, "three rounds recording every kind of action")
	for _, a := range got.Status.LastActions {
		assert.True(t, a.DryRun, "%+v", a)
		assert.Equal(t, ResultDryRun, a.Result)
	}
	assert.Equal(t, blackadderv1beta1.ChaosCounts{}, got.Status.Counts)
	assert.Contains(t, testenv.Condition(got.Status.Conditions, blackadderv1beta1.ConditionReady).Message, "dry run")

	assert.Equal(t, before, readyPods(t, ns, "web", 2), "no pod killed")
	web := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, web))
	assert.EqualValues(t, 2, *web.Spec.Replicas)
	assert.NotContains(t, web.Labels, LabelAgent)
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm))
	assert.Equal(t, original, cm.Data)
	assert.NotContains(t, cm.Annotations, AnnotationOriginalData)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "Deployment", "web"), "WouldScaleDeployment")
		assert.Contains(c, testenv.EventReasons(c, env.Client, ns, "ConfigMap", "settings"), "WouldOverwriteConfigMap")
	}, 30*time.Second, 200*time.Millisecond)
}

// testV1alpha1 creates a v1alpha1 agent (only tantrumMode and podTolerance, the first
// version's fields) with a tolerance no test reaches: it is served as v1beta1 with the v1beta1
// defaults, runs rounds everywhere but never acts.
func testV1alpha1(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "blackadder.io/v1alpha1", "kind": "ChaosAgent",
		"metadata": map[string]any{"name": "princeedmund-" + selectorFor(t)[:4]},
		"spec":     map[string]any{"tantrumMode": true, "podTolerance": int64(1000000)},
	}}
	require.NoError(t, env.Client.Create(ctx, u))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, u) })
	got := waitAgent(t, u.GetName(), func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Rounds >= 1 && meta.IsStatusConditionTrue(a.Status.Conditions, blackadderv1beta1.ConditionReady)
	}, "a round under v1beta1 defaults")
	assert.Empty(t, got.Status.LastActions, "tolerance not reached")
	assert.Contains(t, got.Finalizers, Finalizer)
	assert.NotNil(t, got.Status.NextRoundTime)
	assert.InDelta(t, 30, got.Status.NextRoundTime.Sub(got.Status.LastRoundTime.Time).Seconds(), 1, "default pause of 30 s")
}

// TestWatchNamespacesAndOperatorNamespace runs a manager scoped like WATCH_NAMESPACE=<two
// namespaces>, one of them the operator's own: an agent whose selector matches three
// namespaces only changes the Deployment in the watched one that is not protected. It runs
// after TestChaosAgentOnCluster has stopped its manager, so no other controller sees the agent.
func TestWatchNamespacesAndOperatorNamespace(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	sel := selectorFor(t)
	watched := testenv.Namespace(t, env.Client, "watched", selectedBy(sel))
	own := testenv.Namespace(t, env.Client, "operator", selectedBy(sel))
	unwatched := testenv.Namespace(t, env.Client, "unwatched", selectedBy(sel))
	for _, ns := range []string{watched, own, unwatched} {
		require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
	}
	startManager(t, env.Config, &Options{}, scope.Namespaces{Watched: []string{watched, own}, Operator: own})

	agent := agentFor("scoped", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.CancerMode, s.PauseDuration = true, 3600 })
	createAgent(t, agent)
	got := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool { return a.Status.Rounds >= 1 }, "first round")
	assert.EqualValues(t, 1, got.Status.Counts.DeploymentsScaled)
	for ns, want := range map[string]int32{watched: 2, own: 1, unwatched: 1} {
		d := &appsv1.Deployment{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, d))
		assert.Equal(t, want, *d.Spec.Replicas, "namespace %s", ns)
	}
}

// testLongName checks the API server refuses an agent whose name could not be a label value.
func testLongName(t *testing.T) {
	t.Helper()
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "blackadder.io/" + version, "kind": "ChaosAgent",
			"metadata": map[string]any{"name": strings.Repeat("a", 64)},
		}}
		err := env.Client.Create(context.Background(), u)
		require.Error(t, err, version)
		assert.Contains(t, err.Error(), "metadata.name must be at most 63 characters", version)
	}
}

// forgedMarks returns the labels and annotations that make obj look changed by agent: anyone who
// may label an object can write them.
func forgedMarks(obj client.Object, agent, annotation, original string) {
	obj.SetLabels(map[string]string{LabelAgent: agent})
	obj.SetAnnotations(map[string]string{annotation: original})
}

// waitMarksCached waits until the agent's dry-run ipsum rounds count n objects carrying its
// marks, so the manager's cache, which restore lists from, holds them all.
func waitMarksCached(t *testing.T, agent string, n int32) {
	t.Helper()
	waitAgent(t, agent, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.Rounds >= 1 && a.Status.ChangedObjects == n
	}, fmt.Sprintf("%d marked objects counted", n))
}

// testRestoreKeepsToScope reproduces the wedge of the security review: a tenant labels an
// immutable ConfigMap in a namespace the agent may touch with the agent's name and a valid
// original, and a ConfigMap and a Deployment in a namespace the agent excludes. Pausing the
// agent reports all three as left as they are, and deleting it releases it without touching them.
func testRestoreKeepsToScope(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	tenant := testenv.Namespace(t, env.Client, "tenant", selectedBy(sel))
	excluded := testenv.Namespace(t, env.Client, "excluded", selectedBy(sel))
	agent := agentFor("scope", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.IpsumMode, s.DryRun, s.PauseDuration, s.ExcludedNamespaces = true, true, 1, []string{excluded}
	})
	data := map[string]string{"k": "the tenant's"}
	frozen := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "frozen"}, Data: data, Immutable: ptr.To(true)}
	outside := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: excluded, Name: "settings"}, Data: data}
	for _, cm := range []*corev1.ConfigMap{frozen, outside} {
		forgedMarks(cm, agent.Name, AnnotationOriginalData, `{"k":"forged"}`)
		require.NoError(t, env.Client.Create(ctx, cm))
	}
	web := testenv.Deployment(excluded, "web", 1)
	forgedMarks(web, agent.Name, AnnotationOriginalReplicas, "3")
	require.NoError(t, env.Client.Create(ctx, web))
	createAgent(t, agent)
	waitMarksCached(t, agent.Name, 3)

	// Pausing restores: every object is reported as left as it is, none fails.
	got := waitAgent(t, agent.Name, func(*blackadderv1beta1.ChaosAgent) bool { return true }, "")
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Paused = true
	require.NoError(t, env.Client.Patch(ctx, got, patch))
	got = waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.ObservedGeneration == a.Generation && meta.IsStatusConditionTrue(a.Status.Conditions, blackadderv1beta1.ConditionPaused)
	}, "restore on pause observed")
	degraded := testenv.Condition(got.Status.Conditions, blackadderv1beta1.ConditionDegraded)
	assert.Equal(t, metav1.ConditionTrue, degraded.Status)
	assert.Equal(t, blackadderv1beta1.ReasonRestoreSkipped, degraded.Reason, degraded.Message)
	assert.EqualValues(t, 3, got.Status.ChangedObjects, "the three objects keep the marks")
	assert.True(t, hasAction(got, blackadderv1beta1.ActionRestoreConfigMap, skipped(SkipImmutable).String()), "frozen is immutable")
	assert.True(t, hasAction(got, blackadderv1beta1.ActionRestoreConfigMap, skipped(SkipOutOfScope).String()), "settings is in an excluded namespace")
	assert.True(t, hasAction(got, blackadderv1beta1.ActionRestoreDeployment, skipped(SkipOutOfScope).String()), "web is in an excluded namespace")
	assert.Zero(t, got.Status.Counts.Restored)

	// Deleting the agent is not wedged by the immutable ConfigMap.
	require.NoError(t, env.Client.Delete(ctx, got))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(got), &blackadderv1beta1.ChaosAgent{}))
	}, 60*time.Second, 100*time.Millisecond, "agent released")
	for _, cm := range []*corev1.ConfigMap{frozen, outside} {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm))
		assert.Equal(t, data, cm.Data, "%s/%s untouched", cm.Namespace, cm.Name)
		assert.Equal(t, agent.Name, cm.Labels[LabelAgent], "%s/%s keeps its marks", cm.Namespace, cm.Name)
		assert.Contains(t, cm.Annotations, AnnotationOriginalData)
	}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(web), web))
	assert.EqualValues(t, 1, *web.Spec.Replicas, "web untouched")
	assert.Equal(t, agent.Name, web.Labels[LabelAgent])
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		reasons := testenv.EventReasons(c, env.Client, "default", "ChaosAgent", agent.Name)
		assert.Contains(c, reasons, "SkippedRestoreConfigMap")
		assert.Contains(c, reasons, "SkippedRestoreDeployment")
		assert.Contains(c, testenv.EventReasons(c, env.Client, tenant, "ConfigMap", "frozen"), "SkippedRestoreConfigMap")
	}, 30*time.Second, 200*time.Millisecond)
	assert.Empty(t, testenv.Events(t, env.Client, excluded, "ConfigMap", "settings"), "no Event written in an excluded namespace")
}

// testRestoreOnDeleteFalse shows the way out when restore keeps failing: a ConfigMap whose
// data plus its (forged) original would exceed the 1 MiB limit refuses every restore patch,
// so the deleted agent stays; setting spec.restoreOnDelete to false, as docs/chaosagent.md
// says, releases it and leaves the ConfigMap with its marks for a person to find.
func testRestoreOnDeleteFalse(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "wedged", selectedBy(sel))
	agent := agentFor("wedged", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.IpsumMode, s.DryRun = true, true })
	data := map[string]string{"big": strings.Repeat("x", 1000*1024)}
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}, Data: data}
	forgedMarks(big, agent.Name, AnnotationOriginalData, fmt.Sprintf(`{"extra":%q}`, strings.Repeat("y", 100*1024)))
	require.NoError(t, env.Client.Create(ctx, big))
	createAgent(t, agent)
	waitMarksCached(t, agent.Name, 1)

	require.NoError(t, env.Client.Delete(ctx, agent))
	// The failed passes are retried with the controller's default backoff, which doubles from
	// 5 ms: after the 12th failure the next retry is more than 10 s away, so a release within
	// 5 s of the edit below can only come from the edit waking the controller.
	wedged := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		failures := 0
		for _, act := range a.Status.LastActions {
			if act.Kind == blackadderv1beta1.ActionRestoreConfigMap && act.Result == failed("Invalid").String() {
				failures++
			}
		}
		return a.DeletionTimestamp != nil && failures >= 12
	}, "restore on delete failing and backing off")
	assert.Contains(t, wedged.Finalizers, Finalizer)
	assert.Equal(t, blackadderv1beta1.ReasonRestoreFailed, testenv.Condition(wedged.Status.Conditions, blackadderv1beta1.ConditionDegraded).Reason)

	// kubectl patch chaosagent <name> --type merge -p '{"spec":{"restoreOnDelete":false}}'
	generation := wedged.Generation
	require.NoError(t, env.Client.Patch(ctx, wedged, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"restoreOnDelete":false}}`))))
	assert.Greater(t, wedged.Generation, generation, "the edit of a terminating agent changes its generation")
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(agent), &blackadderv1beta1.ChaosAgent{}))
	}, 5*time.Second, 100*time.Millisecond, "agent released at once")

	left := &corev1.ConfigMapList{}
	require.NoError(t, env.Client.List(ctx, left, client.MatchingLabels{LabelAgent: agent.Name}))
	require.Len(t, left.Items, 1, "what is left unrestored is found by the agent's label")
	assert.Equal(t, data, left.Items[0].Data)
	assert.Contains(t, left.Items[0].Annotations, AnnotationOriginalData, "with its original")
}

// testObservedGenerationOnFailure pins the observedGeneration rule (docs/STYLE.md, "Status
// writes and observedGeneration"): a pass that returns an error (it is retried) leaves
// observedGeneration at the last spec acted on fully, while the conditions, carrying the new
// generation, report the failure; a pass without error observes its spec, also when the
// spec is a mistake. Pausing the agent asks for a restore that fails (the original would
// make the ConfigMap too large), so the pass of the new generation returns an error.
func testObservedGenerationOnFailure(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sel := selectorFor(t)
	ns := testenv.Namespace(t, env.Client, "obsgen", selectedBy(sel))
	agent := agentFor("obsgen", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.IpsumMode, s.DryRun = true, true })
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}, Data: map[string]string{"big": strings.Repeat("x", 1000*1024)}}
	forgedMarks(big, agent.Name, AnnotationOriginalData, fmt.Sprintf(`{"extra":%q}`, strings.Repeat("y", 100*1024)))
	require.NoError(t, env.Client.Create(ctx, big))
	createAgent(t, agent)
	waitMarksCached(t, agent.Name, 1)
	live := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.ObservedGeneration == a.Generation
	}, "the first pass observing the spec")
	acted := live.Generation

	patch := func(a *blackadderv1beta1.ChaosAgent, spec string) {
		t.Helper()
		require.NoError(t, env.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+spec+`}`))))
	}
	patch(live, `{"paused":true}`)
	require.Greater(t, live.Generation, acted)
	failing := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		c := meta.FindStatusCondition(a.Status.Conditions, blackadderv1beta1.ConditionDegraded)
		return c != nil && c.Reason == blackadderv1beta1.ReasonRestoreFailed && c.ObservedGeneration == live.Generation
	}, "the paused agent's restore failing")
	assert.Equal(t, acted, failing.Status.ObservedGeneration, "a failed pass does not claim the spec it could not act on")
	assert.Equal(t, metav1.ConditionTrue, testenv.Condition(failing.Status.Conditions, blackadderv1beta1.ConditionDegraded).Status)

	// Without the restore the paused agent's pass has nothing to fail: the spec is observed.
	// (This also lets the agent go at the end: createAgent's cleanup waits for it.)
	patch(failing, `{"restoreOnDelete":false}`)
	waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		return a.Status.ObservedGeneration == failing.Generation
	}, "the pass without a restore observing the spec")

	// A spec mistake is no error of the pass: observed, and reported in Ready.
	patch(failing, `{"podSelector":{"matchExpressions":[{"key":"app","operator":"Near"}]}}`)
	invalid := waitAgent(t, agent.Name, func(a *blackadderv1beta1.ChaosAgent) bool {
		c := meta.FindStatusCondition(a.Status.Conditions, blackadderv1beta1.ConditionReady)
		return c != nil && c.Reason == blackadderv1beta1.ReasonInvalidSelector && c.ObservedGeneration == failing.Generation
	}, "the invalid selector reported")
	assert.Equal(t, failing.Generation, invalid.Status.ObservedGeneration, "a spec mistake is observed")
}

// TestNoRoundTwiceWhileStatusLags pins what lastRound, in the agents' memory, buys: a pass that
// reads the agent without the last round's status (the write failed, or the cache lags it)
// runs no second round within the pause. Without the memory (forget: a restart) it would.
func TestNoRoundTwiceWhileStatusLags(t *testing.T) {
	ctx := context.Background()
	agent := &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: "lag-" + selectorFor(t)[:4], Finalizers: []string{Finalizer}},
		Spec: blackadderv1beta1.ChaosAgentSpec{PauseDuration: 3600}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(agent).WithStatusSubresource(agent).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			return apierrors.NewServiceUnavailable("status writes fail")
		}}).Build()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Clock: clk, NewRand: seededRand, Protected: sets.New[string](),
		status: status.NewWriter(c, c, func(a *blackadderv1beta1.ChaosAgent) *int64 { return &a.Status.ObservedGeneration })}
	rounds := func() float64 {
		var m dto.Metric
		require.NoError(t, roundsTotal.WithLabelValues(agent.Name).Write(&m))
		return m.GetCounter().GetValue()
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(agent)}
	_, err := r.Reconcile(ctx, req)
	require.ErrorContains(t, err, "writing status")
	require.InDelta(t, 1, rounds(), 0)

	clk.SetTime(clk.Now().Add(time.Second)) // the retry, which reads the agent without the round
	_, err = r.Reconcile(ctx, req)
	require.ErrorContains(t, err, "writing status")
	assert.InDelta(t, 1, rounds(), 0, "no second round within the pause")

	r.forget(agent.Name)
	_, err = r.Reconcile(ctx, req)
	require.ErrorContains(t, err, "writing status")
	assert.InDelta(t, 1, rounds(), 0, "a process without the memory runs the round again (its series starts afresh)")
	forgetAgentMetrics(agent.Name)
}
