package process

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/chaosagent"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/testenv"
)

// copies lists the copies a rule made, live from the API server.
func copies(t *testing.T, rule string) []corev1.ConfigMap {
	t.Helper()
	list := &corev1.ConfigMapList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.MatchingLabels{copyratorrule.LabelRule: rule}))
	return list.Items
}

// TestKillDuringCopyratorFanOut SIGKILLs the manager in the middle of a fan-out to 500
// namespaces, restarts it, and checks everything converges: every namespace holds exactly
// one copy equal to the source, and a foreign object of the same name is untouched.
func TestKillDuringCopyratorFanOut(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	const n = 500
	targets := namespaces(t, "fan", n, map[string]string{"fanout-e2e": "true"})
	src := namespace(t, "fan-src", nil)
	testenv.GrantCopies(t, env.Client, src, copyratorrule.DefaultServiceAccountName)
	source := configMap(src, "shared", map[string]string{"copy": "fan-e2e"}, map[string]string{"log-level": "info", "colour": "blue"})
	require.NoError(t, env.Client.Create(ctx, source))
	require.NoError(t, env.Client.Create(ctx, configMap(targets[7], "shared", nil, map[string]string{"owner": "someone else"})))
	rule := copyRule(src, "fan", flantv1.RuleTypeConfigMap, "copy=fan-e2e", "fanout-e2e")

	// A slow client makes the fan-out take long enough to be interrupted.
	first := startManager(t, "first", "--controllers=copyratorrule", "--kube-api-qps=40", "--kube-api-burst=40")
	create(t, rule)
	eventually(t, 2*time.Minute, "the fan-out to start", func() bool { return len(copies(t, "fan")) >= 50 })
	first.kill()
	atKill := len(copies(t, "fan"))
	t.Logf("SIGKILLed the manager with %d of %d copies written", atKill, n-1)
	require.Less(t, atKill, n-1, "the kill must land mid fan-out")

	start := time.Now()
	second := startManager(t, "second", "--controllers=copyratorrule")
	took := eventually(t, 2*time.Minute, "all copies after the restart", func() bool { return len(copies(t, "fan")) == n-1 })
	t.Logf("converged %d copies %.2fs after the restart (%.2fs after process start)", n-1, took.Seconds(), time.Since(start).Seconds())

	want, perNamespace := map[string]int{}, map[string]int{}
	for _, ns := range targets {
		want[ns] = 1
	}
	delete(want, targets[7])
	for _, c := range copies(t, "fan") {
		perNamespace[c.Namespace]++
		assert.Equal(t, source.Data, c.Data, "copy in %s equals its source", c.Namespace)
	}
	assert.Equal(t, want, perNamespace, "one copy in every target namespace but the foreign one")
	assert.Equal(t, map[string]string{"owner": "someone else"}, configMapData(t, targets[7], "shared"), "foreign object untouched")

	deleteAndWait(t, rule, time.Minute)
	assert.Empty(t, copies(t, "fan"), "Delete policy removes every copy")
	second.stop()
}

// TestKillDuringChaosRound SIGKILLs the manager while an agent is changing Deployments and
// ConfigMaps, restarts it, deletes the agent, and checks every change was put back: no
// original is lost whatever moment the kill hit.
func TestKillDuringChaosRound(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	sel := "chaos-kill-e2e"
	ns := namespace(t, "chaos-kill", map[string]string{sel: "true"})
	const deployments, configMaps = 10, 10
	originals := map[string]map[string]string{}
	for i := range deployments {
		require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, fmt.Sprintf("web-%d", i), 1)))
	}
	for i := range configMaps {
		name := fmt.Sprintf("settings-%d", i)
		originals[name] = map[string]string{"greeting": fmt.Sprintf("hello %d", i), "colour": "blue"}
		require.NoError(t, env.Client.Create(ctx, configMap(ns, name, nil, originals[name])))
	}
	agent := chaosAgent("kill-mid-round", sel, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.CancerMode, s.IpsumMode, s.Eagerness, s.MaxActionsPerRound = true, true, 50, 4
	})

	first := startManager(t, "first", "--controllers=chaosagent", "--kube-api-qps=20", "--kube-api-burst=5")
	create(t, agent)
	eventually(t, time.Minute, "the first changes", func() bool { return marked(t, ns) >= 2 })
	first.kill()
	t.Logf("SIGKILLed the manager with %d objects marked as changed", marked(t, ns))

	// Everything changed carries its original: the change and the record are one patch.
	for i := range deployments {
		d := fmt.Sprintf("web-%d", i)
		if r := replicas(t, ns, d); r != 1 {
			assert.True(t, hasMark(t, &appsv1.Deployment{}, ns, d), "Deployment %s changed to %d replicas without a record", d, r)
		}
	}
	for name, data := range originals {
		if !assert.ObjectsAreEqual(data, configMapData(t, ns, name)) {
			assert.True(t, hasMark(t, &corev1.ConfigMap{}, ns, name), "ConfigMap %s changed without a record", name)
		}
	}

	second := startManager(t, "second", "--controllers=chaosagent")
	time.Sleep(3 * time.Second) // let it run a few more rounds after the restart
	start := time.Now()
	deleteAndWait(t, agent, time.Minute)
	t.Logf("agent deleted and every change restored %.2fs after the delete", time.Since(start).Seconds())
	for i := range deployments {
		assert.EqualValues(t, 1, replicas(t, ns, fmt.Sprintf("web-%d", i)))
	}
	for name, data := range originals {
		assert.Equal(t, data, configMapData(t, ns, name), "ConfigMap %s restored", name)
	}
	assert.Zero(t, marked(t, ns), "no marks left")
	second.stop()
}

// marked counts the objects in ns that carry an agent's undo mark.
func marked(t *testing.T, ns string) int {
	t.Helper()
	n := 0
	for _, l := range []client.ObjectList{&corev1.ConfigMapList{}, &appsv1.DeploymentList{}} {
		require.NoError(t, env.Client.List(context.Background(), l, client.InNamespace(ns), client.HasLabels{chaosagent.LabelAgent}))
		n += meta.LenList(l)
	}
	return n
}

// hasMark says whether ConfigMap or Deployment (obj's kind) ns/name carries an agent's
// mark and the record of its original.
func hasMark(t *testing.T, obj client.Object, ns, name string) bool {
	t.Helper()
	require.True(t, exists(t, obj, ns, name))
	key := chaosagent.AnnotationOriginalData
	if _, ok := obj.(*appsv1.Deployment); ok {
		key = chaosagent.AnnotationOriginalReplicas
	}
	return obj.GetLabels()[chaosagent.LabelAgent] != "" && obj.GetAnnotations()[key] != ""
}
