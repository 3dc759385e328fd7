package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/controllers/chaosagent"
	"github.com/quartet-operator/quartet/test/realnode"
)

// chaosLabel marks the namespaces of one chaos test; each agent selects only its own, so
// nothing else on the cluster (OLM, the mirrors, Quartet) is a candidate.
const chaosLabel = "e2e.quartet.dev/chaos"

func chaosNamespace(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{chaosLabel: name}}}))
}

func sleeper(ns, name string, replicas int32, volumes []corev1.Volume, mounts []corev1.VolumeMount, script string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	if script == "" {
		script = "exec sleep 3600"
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Volumes:                       volumes,
					Containers: []corev1.Container{{Name: "main", Image: realnode.E2EImage, Command: []string{"sh", "-c", script},
						VolumeMounts: mounts}},
				},
			},
		},
	}
}

// waitDeploymentReady waits until the Deployment has exactly want ready pods of its
// current spec and no others.
func waitDeploymentReady(t *testing.T, ns, name string, want int32) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("Deployment %s/%s: %d ready", ns, name, want), 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, "", err
		}
		s := d.Status
		// Right after a kill the status still counts the killed pods Ready (without a spec
		// change to wait for), until the ReplicaSet and Deployment controllers catch up:
		// the pods themselves, read in the same check, already say otherwise.
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, "", err
		}
		var live, ready int32
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			live++
			if podReady(p) {
				ready++
			}
		}
		return s.ObservedGeneration == d.Generation && s.ReadyReplicas == want && s.Replicas == want && s.UpdatedReplicas == want &&
				live == want && ready == want,
			fmt.Sprintf("%+v; pods %d, %d of them Ready; %s", s, live, ready, env.PodProblems(ctx, ns)), nil
	}))
}

// requireRunningForReal checks every pod of app in ns against the node's containerd: each
// has a container that containerd runs as a task with a live process.
func requireRunningForReal(t *testing.T, ns, app string) []types.UID {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": app}))
	var uids []types.UID
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		pid, err := env.ContainerPID(ctx, p, "main")
		require.NoError(t, err, "pod %s", p.Name)
		require.Greater(t, pid, 1, "pod %s has a process on the node", p.Name)
		uids = append(uids, p.UID)
	}
	return uids
}

// readyWatch follows the pods of app in ns through one watch, in the API server's order of
// changes, and records the fewest pods that were Ready and not terminating at any moment.
type readyWatch struct {
	mu    sync.Mutex
	ready map[types.UID]bool
	min   int
	seen  map[types.UID]bool
	stop  func()
	done  chan struct{}
}

func watchReady(t *testing.T, ns, app string) *readyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sel := "app=" + app
	list, err := env.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	require.NoError(t, err)
	w := &readyWatch{ready: map[types.UID]bool{}, seen: map[types.UID]bool{}, stop: cancel, done: make(chan struct{})}
	for i := range list.Items {
		w.update(&list.Items[i], false)
	}
	w.min = w.count()
	wi, err := env.Clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	go func() {
		defer close(w.done)
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			w.update(p, ev.Type == watch.Deleted)
		}
	}()
	t.Cleanup(w.Stop)
	return w
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *readyWatch) update(p *corev1.Pod, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen[p.UID] = true
	if deleted || !podReady(p) {
		delete(w.ready, p.UID)
	} else {
		w.ready[p.UID] = true
	}
	if n := len(w.ready); n < w.min {
		w.min = n
	}
}

func (w *readyWatch) count() int { return len(w.ready) }

// Stop ends the watch and returns the fewest Ready pods seen and how many pods were seen.
func (w *readyWatch) Stop() {
	w.stop()
	<-w.done
}

func (w *readyWatch) Result() (minReady, pods int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min, len(w.seen)
}

// newAgent creates a ChaosAgent that only sees the namespaces labelled for ns and deletes
// it (and waits for its restore) when the test ends.
func newAgent(t *testing.T, name, ns string, spec blackadderv1beta1.ChaosAgentSpec) *blackadderv1beta1.ChaosAgent {
	t.Helper()
	spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{chaosLabel: ns}}
	a := &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	require.NoError(t, env.Client.Create(context.Background(), a))
	t.Cleanup(func() { deleteAgent(t, a) })
	return a
}

// deleteAgent deletes the agent and waits until its finalizer has restored everything.
func deleteAgent(t *testing.T, a *blackadderv1beta1.ChaosAgent) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Delete(ctx, a); client.IgnoreNotFound(err) != nil {
		require.NoError(t, err)
	}
	require.NoError(t, realnode.WaitFor(ctx, "ChaosAgent "+a.Name+" gone", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), &blackadderv1beta1.ChaosAgent{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err), nil
	}))
}

func resultsOf(a *blackadderv1beta1.ChaosAgent) map[string]int {
	out := map[string]int{}
	for _, r := range a.Status.LastActions {
		out[string(r.Kind)+" "+r.Result]++
	}
	return out
}

// budgetedDeployment makes a labelled namespace with a Deployment of 4 real pods and a
// PodDisruptionBudget of minAvailable budget, and returns the pods' UIDs once all run.
func budgetedDeployment(t *testing.T, ns, app string, budget int32) []types.UID {
	t.Helper()
	ctx := context.Background()
	chaosNamespace(t, ns)
	require.NoError(t, env.Client.Create(ctx, sleeper(ns, app, 4, nil, nil, "")))
	require.NoError(t, env.Client.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(budget)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}))
	waitDeploymentReady(t, ns, app, 4)
	before := requireRunningForReal(t, ns, app)
	return before
}

// TestChaosEvictionKeepsTheBudget runs tantrums with killMethod Evict against a
// Deployment of four real pods with a PodDisruptionBudget of three: pods are killed round
// after round, their replacements really run, and at no moment are fewer than three pods
// Ready; the evictions the budget refuses are recorded as skipped.
func TestChaosEvictionKeepsTheBudget(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const ns, app, budget = "chaos-evict", "web", 3
	before := budgetedDeployment(t, ns, app, budget)
	require.NoError(t, realnode.WaitFor(ctx, "the budget allows one disruption", time.Minute, func(ctx context.Context) (bool, string, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: app}, pdb)
		return err == nil && pdb.Status.DisruptionsAllowed == 1, fmt.Sprintf("%+v", pdb.Status), err
	}))

	w := watchReady(t, ns, app)
	since := time.Now()
	a := newAgent(t, "e2e-evict", ns, blackadderv1beta1.ChaosAgentSpec{
		TantrumMode: true, PodTolerance: 1, Eagerness: 100, PauseDuration: 3, MaxActionsPerRound: 10,
		KillMethod: blackadderv1beta1.KillMethodEvict,
	})
	skipped := 0
	require.NoError(t, realnode.WaitFor(ctx, "three pods evicted and a refused eviction recorded", 4*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return false, "", err
		}
		skipped += resultsOf(a)["KillPod Skipped: "+chaosagent.SkipDisruptionBudget]
		return a.Status.Counts.PodsKilled >= 3 && skipped > 0, fmt.Sprintf("rounds %d, counts %+v, last %v", a.Status.Rounds, a.Status.Counts, resultsOf(a)), nil
	}))
	timing("ChaosAgent Evict: 3 real pods evicted within the budget", since)
	deleteAgent(t, a)
	waitDeploymentReady(t, ns, app, 4)
	w.Stop()
	minReady, seen := w.Result()
	t.Logf("evicted %d pods in %d rounds; fewest Ready pods at any moment: %d (budget %d); %d pods seen", a.Status.Counts.PodsKilled, a.Status.Rounds, minReady, budget, seen)
	require.GreaterOrEqual(t, minReady, budget, "an eviction took the Deployment below its PodDisruptionBudget")
	after := requireRunningForReal(t, ns, app)
	require.Len(t, after, 4)
	replaced := 0
	for _, uid := range after {
		if !slices.Contains(before, uid) {
			replaced++
		}
	}
	// An eviction may hit a replacement of an earlier one: every eviction made one new pod.
	require.GreaterOrEqual(t, seen-len(before), int(a.Status.Counts.PodsKilled), "every evicted pod was replaced")
	require.Positive(t, replaced, "the pods running now include replacements, and they really run")
}

// TestChaosDeleteIgnoresTheBudget runs one tantrum round with killMethod Delete against
// the same shape: it may and does go below the budget, and every pod comes back for real.
func TestChaosDeleteIgnoresTheBudget(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const ns, app, budget = "chaos-delete", "web", 3
	before := budgetedDeployment(t, ns, app, budget)

	w := watchReady(t, ns, app)
	since := time.Now()
	a := newAgent(t, "e2e-delete", ns, blackadderv1beta1.ChaosAgentSpec{
		TantrumMode: true, PodTolerance: 1, Eagerness: 100, PauseDuration: 3600, MaxActionsPerRound: 10,
		KillMethod: blackadderv1beta1.KillMethodDelete,
	})
	_, err := env.WaitChaosRounds(ctx, a.Name, 1, 2*time.Minute)
	require.NoError(t, err)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(a), a))
	require.EqualValues(t, 4, a.Status.Counts.PodsKilled, "one round deletes every candidate: %v", resultsOf(a))
	waitDeploymentReady(t, ns, app, 4)
	timing("ChaosAgent Delete: 4 pods deleted and 4 replacements Ready", since)
	w.Stop()
	minReady, _ := w.Result()
	t.Logf("fewest Ready pods at any moment: %d (budget %d)", minReady, budget)
	require.Less(t, minReady, budget, "Delete does not go through the Eviction API, so the budget does not hold it back")
	after := requireRunningForReal(t, ns, app)
	require.Len(t, after, 4)
	for _, uid := range after {
		require.False(t, slices.Contains(before, uid), "every pod was deleted and replaced")
	}
}

// lastLine is the last line a container logged.
func lastLine(t *testing.T, ns, pod string) string {
	t.Helper()
	b, err := env.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "main", TailLines: ptr.To[int64](1)}).DoRaw(context.Background())
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// TestChaosCancerAndIpsumAreUndone doubles a real Deployment and overwrites a ConfigMap a
// running pod reads through its volume; deleting the agent puts both back, and the pod
// sees its original data again.
func TestChaosCancerAndIpsumAreUndone(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const ns, app, greeting = "chaos-undo", "web", "hello from the original ConfigMap"
	chaosNamespace(t, ns)
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Data: map[string]string{"greeting": greeting}}))
	volumes := []corev1.Volume{{Name: "settings", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}
	mounts := []corev1.VolumeMount{{Name: "settings", MountPath: "/settings"}}
	// The reader is a bare pod, so the agent's cancer mode (Deployments only) leaves it be.
	reader := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: ns},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Volumes: volumes,
			Containers: []corev1.Container{{Name: "main", Image: realnode.E2EImage, VolumeMounts: mounts,
				Command: []string{"sh", "-c", "while true; do echo \"$(cat /settings/greeting)\"; sleep 1; done"}}}}}
	require.NoError(t, env.Client.Create(ctx, reader))
	require.NoError(t, env.Client.Create(ctx, sleeper(ns, app, 1, nil, nil, "")))
	waitDeploymentReady(t, ns, app, 1)
	require.NoError(t, realnode.WaitFor(ctx, "the reader prints the greeting", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(reader), reader)
		if err != nil || reader.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprint(reader.Status.Phase), err
		}
		l := lastLine(t, ns, reader.Name)
		return l == greeting, l, nil
	}))

	// One round only (a long pause): the Deployment doubles, the ConfigMap is overwritten.
	a := newAgent(t, "e2e-undo", ns, blackadderv1beta1.ChaosAgentSpec{
		CancerMode: true, IpsumMode: true, Eagerness: 100, PauseDuration: 3600, MaxActionsPerRound: 10,
	})
	_, err := env.WaitChaosRounds(ctx, a.Name, 1, 2*time.Minute)
	require.NoError(t, err)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(a), a))
	t.Logf("round 1: %v", resultsOf(a))
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: app}, d))
	require.EqualValues(t, 2, *d.Spec.Replicas, "cancer doubled the Deployment")
	require.Equal(t, "1", d.Annotations[chaosagent.AnnotationOriginalReplicas])
	waitDeploymentReady(t, ns, app, 2)
	require.Len(t, requireRunningForReal(t, ns, app), 2, "the doubled Deployment runs two real pods")

	since := time.Now()
	var ipsum string
	require.NoError(t, realnode.WaitFor(ctx, "the reader sees lorem ipsum through its volume", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		ipsum = lastLine(t, ns, reader.Name)
		return ipsum != greeting && ipsum != "", ipsum, nil
	}))
	timing("ipsum: ConfigMap overwritten to the pod seeing it through its volume", since)
	t.Logf("the reader now prints: %q", ipsum)

	since = time.Now()
	deleteAgent(t, a)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: app}, d))
	require.EqualValues(t, 1, *d.Spec.Replicas, "the agent's deletion put the replicas back")
	require.NotContains(t, d.Annotations, chaosagent.AnnotationOriginalReplicas)
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm))
	require.Equal(t, map[string]string{"greeting": greeting}, cm.Data)
	waitDeploymentReady(t, ns, app, 1)
	require.NoError(t, realnode.WaitFor(ctx, "the reader sees the original greeting again", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		l := lastLine(t, ns, reader.Name)
		return l == greeting, l, nil
	}))
	timing("restore: agent deleted to the pod seeing its original ConfigMap again", since)
}

// TestChaosGuardStopsAndRestores is issue 25's proof on the real node: a guard on a
// Deployment that the agent's own tantrum makes unavailable trips, and the agent stops and
// puts back everything it changed within one round. The web pods become Ready only 10 s
// after they start, so the tantrum's kill (Delete, both pods) leaves web without Ready pods
// for longer than a pause: the round after the kill finds the guard failing, runs no
// action, restores web's and api's replicas and the ConfigMap in the same pass, and the
// agent acts no more.
func TestChaosGuardStopsAndRestores(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const ns, pause = "chaos-guard", 3
	chaosNamespace(t, ns)
	web := sleeper(ns, "web", 2, nil, nil, "")
	web.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		InitialDelaySeconds: 10, PeriodSeconds: 1,
	}
	require.NoError(t, env.Client.Create(ctx, web))
	require.NoError(t, env.Client.Create(ctx, sleeper(ns, "api", 1, nil, nil, "")))
	original := map[string]string{"greeting": "hello from the original ConfigMap"}
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: original}))
	waitDeploymentReady(t, ns, "web", 2)
	waitDeploymentReady(t, ns, "api", 1)
	w := watchReady(t, ns, "web")

	since := time.Now()
	a := newAgent(t, "e2e-guard", ns, blackadderv1beta1.ChaosAgentSpec{
		TantrumMode: true, PodTolerance: 1, KillMethod: blackadderv1beta1.KillMethodDelete,
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		CancerMode:  true, IpsumMode: true, Eagerness: 100, PauseDuration: pause, MaxActionsPerRound: 10,
		RunName: "e2e",
		Guards: []blackadderv1beta1.SteadyStateGuard{{Name: "web-ready", Deployment: &blackadderv1beta1.DeploymentGuard{
			Namespace: ns, Name: "web", MinReady: intstr.FromString("100%")}}},
	})
	require.NoError(t, realnode.WaitFor(ctx, "the guard on web tripped", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(a.Status.Conditions, blackadderv1beta1.ConditionGuardTripped)
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("rounds %d, counts %+v, last %v, guards %+v",
			a.Status.Rounds, a.Status.Counts, resultsOf(a), a.Status.Guards), nil
	}))
	timing("ChaosAgent guard: agent created to its guard tripped and everything put back", since)
	t.Logf("round 1: %v; the run: %+v", resultsOf(a), *a.Status.Run)

	// The round that broke web ran; the next one found the guard failing and ran no action.
	require.EqualValues(t, 1, a.Status.Rounds, "exactly one round ran: the one whose tantrum broke web")
	require.Positive(t, a.Status.Counts.PodsKilled, "the tantrum killed web's pods")
	require.Positive(t, a.Status.Counts.DeploymentsScaled)
	require.Positive(t, a.Status.Counts.ConfigMapsIpsumed)
	require.NotNil(t, a.Status.Run.EndTime)
	require.LessOrEqual(t, a.Status.Run.EndTime.Sub(a.Status.LastRoundTime.Time), (pause+2)*time.Second,
		"tripped at the first round due after the kill")
	c := meta.FindStatusCondition(a.Status.Conditions, blackadderv1beta1.ConditionGuardTripped)
	require.Equal(t, blackadderv1beta1.GuardReasonDeploymentBelowFloor, c.Reason)
	require.Contains(t, c.Message, `guard "web-ready" tripped: Deployment chaos-guard/web has`)
	require.Equal(t, blackadderv1beta1.RunEndGuardTripped, a.Status.Run.EndReason)

	// Restored in the pass that tripped: the status that says so is written after the restore.
	for name, want := range map[string]int32{"web": 2, "api": 1} {
		d := &appsv1.Deployment{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d))
		require.Equal(t, want, *d.Spec.Replicas, "%s's replicas put back", name)
		require.NotContains(t, d.Annotations, chaosagent.AnnotationOriginalReplicas)
	}
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm))
	require.Equal(t, original, cm.Data, "the ConfigMap's data put back")
	require.Zero(t, a.Status.ChangedObjects)
	require.NoError(t, realnode.WaitFor(ctx, "a GuardTripped Event on the agent", time.Minute, func(ctx context.Context) (bool, string, error) {
		// A cluster-scoped agent's Events are in namespace default.
		evs, err := env.Clientset.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "ChaosAgent" && e.Regarding.Name == a.Name && e.Reason == blackadderv1beta1.ReasonGuardTripped {
				t.Logf("Event: %s %s: %s", e.Type, e.Reason, e.Note)
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items)), nil
	}))

	// Stopped until a new runName: no round in three pauses, while web heals.
	time.Sleep(3 * pause * time.Second)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(a), a))
	require.EqualValues(t, 1, a.Status.Rounds, "no round after the trip")
	waitDeploymentReady(t, ns, "web", 2)
	w.Stop()
	minReady, seen := w.Result()
	t.Logf("fewest Ready web pods at any moment: %d of 2 (floor 2); %d pods seen", minReady, seen)
	require.Less(t, minReady, 2, "the tantrum made web unavailable")
}
