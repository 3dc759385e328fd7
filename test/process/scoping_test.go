package process

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/testenv"
)

// persistentVolume gives a mirror's PVC something to bind to on the kwok cluster.
func persistentVolume(t *testing.T, name string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("50Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
	create(t, pv)
}

func mirrorReady(ns, name string) bool {
	m := mirror(ns, name, "", false)
	return fetch(m) && meta.IsStatusConditionTrue(m.Status.Conditions, "Ready")
}

// TestWatchNamespaceScoping runs the manager as OLM does for a MultiNamespace install
// (WATCH_NAMESPACE=scope-a,scope-c) and puts the same work in an unwatched namespace
// scope-b: all four controllers act in the watched namespaces and leave scope-b untouched.
func TestWatchNamespaceScoping(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	sel := "scope-e2e"
	a := namespace(t, "scope-a", map[string]string{sel: "true"})
	b := namespace(t, "scope-b", map[string]string{sel: "true"})
	c := namespace(t, "scope-c", map[string]string{sel: "true"})
	persistentVolume(t, "scope-pv-a")
	persistentVolume(t, "scope-pv-b")
	url := ratesURL(t)

	for _, ns := range []string{a, b} {
		// Consent is not what keeps scope-b's rule out: the manager does not watch it.
		testenv.GrantCopies(t, env.Client, ns, copyratorrule.DefaultServiceAccountName)
		testenv.GrantNodes(t, env.Client, "docker.io", ns, "hub")
		require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
		require.NoError(t, env.Client.Create(ctx, configMap(ns, "shared", map[string]string{"copy": "scope"}, map[string]string{"from": ns})))
	}
	// The manager process inherits WATCH_NAMESPACE, as OLM sets it from olm.targetNamespaces.
	t.Setenv("WATCH_NAMESPACE", a+","+c)
	m := startManager(t, "scoped", "--exchangerate-url="+url)

	agent := chaosAgent("scope", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.CancerMode = true })
	inB := []client.Object{copyRule(b, "rule", flantv1.RuleTypeConfigMap, "copy=scope", sel), rate(b, "usd", "USD"),
		mirror(b, "hub", "https://registry-1.docker.io", false)}
	create(t, agent, copyRule(a, "rule", flantv1.RuleTypeConfigMap, "copy=scope", sel), rate(a, "usd", "USD"),
		mirror(a, "hub", "https://registry-1.docker.io", false))
	create(t, inB...)

	// Positive evidence first: every controller works in the watched namespaces.
	eventually(t, time.Minute, "chaos in scope-a", func() bool { return replicas(t, a, "web") > 1 })
	eventually(t, time.Minute, "copy of scope-a's source in scope-c", func() bool { return configMapData(t, c, "shared")["from"] == a })
	eventually(t, time.Minute, "rate ConfigMap in scope-a", func() bool { return configMapData(t, a, "usd")["rate"] != "" })
	eventually(t, 2*time.Minute, "mirror in scope-a Ready", func() bool { return mirrorReady(a, "hub") })

	// Then scope-b, for a few more chaos rounds: nothing happened there.
	never(t, 3*time.Second, "chaos in unwatched scope-b", func() bool { return replicas(t, b, "web") != 1 })
	assert.Nil(t, configMapData(t, b, "usd"), "no rate ConfigMap in scope-b")
	assert.Equal(t, map[string]string{"from": b}, configMapData(t, b, "shared"), "scope-a's rule copied nothing into scope-b")
	assert.Equal(t, map[string]string{"from": a}, configMapData(t, a, "shared"), "scope-b's rule wrote nothing into scope-a")
	assert.False(t, exists(t, &appsv1.StatefulSet{}, b, "hub-registry"), "no mirror StatefulSet in scope-b")
	assert.False(t, exists(t, &corev1.Service{}, b, "hub-registry"), "no mirror Service in scope-b")
	for _, o := range inB {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(o), o))
		assert.Empty(t, o.GetFinalizers(), "%T in scope-b got no finalizer", o)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		gen, _, _ := unstructured.NestedInt64(u, "status", "observedGeneration")
		assert.Zero(t, gen, "%T in scope-b has no status", o)
	}
	deleteAndWait(t, agent, time.Minute)
	assert.EqualValues(t, 1, replicas(t, a, "web"), "restored on delete")
	m.stop()
}

// TestKillDuringMirrorRollout SIGKILLs the manager right after a mirror is created and again
// in the middle of an upstream change, restarts it, and checks the mirror converges to Ready
// with the new upstream rolled out.
func TestKillDuringMirrorRollout(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := namespace(t, "mirror-kill", nil)
	persistentVolume(t, "mirror-kill-pv")
	quay := mirror(ns, "quay", "https://quay.io", false)

	testenv.GrantNodes(t, env.Client, "quay.io", ns, "quay")
	testenv.GrantNodes(t, env.Client, "ghcr.io", ns, "quay")
	first := startManager(t, "first", "--controllers=registrymirror")
	create(t, quay)
	eventually(t, time.Minute, "the first child", func() bool { return exists(t, &corev1.ConfigMap{}, ns, "quay-registry-config") })
	first.kill()
	second := startManager(t, "second", "--controllers=registrymirror")
	took := eventually(t, 2*time.Minute, "Ready after the restart", func() bool { return mirrorReady(ns, "quay") })
	t.Logf("mirror Ready %.2fs after the restart", took.Seconds())

	// The running manager writes the mirror's status meanwhile: retry on a conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(quay), quay); err != nil {
			return err
		}
		quay.Spec.Upstream = "https://ghcr.io"
		return env.Client.Update(ctx, quay)
	}))
	second.kill()
	third := startManager(t, "third", "--controllers=registrymirror")
	took = eventually(t, 2*time.Minute, "new upstream rolled out and Ready", func() bool {
		return strings.Contains(fmt.Sprint(configMapData(t, ns, "quay-registry-config")), "https://ghcr.io") && fetch(quay) &&
			quay.Status.ObservedGeneration == quay.Generation && meta.IsStatusConditionTrue(quay.Status.Conditions, "Ready")
	})
	t.Logf("upstream change rolled out and Ready %.2fs after the second restart", took.Seconds())
	for _, child := range []struct {
		obj  client.Object
		name string
	}{{&corev1.Service{}, "quay-registry"}, {&corev1.Service{}, "quay-registry-headless"},
		{&corev1.PersistentVolumeClaim{}, "quay-registry-cache"}, {&appsv1.StatefulSet{}, "quay-registry"},
		{&appsv1.DaemonSet{}, "quay-node"}, {&corev1.ConfigMap{}, "quay-registry-config"}} {
		assert.True(t, exists(t, child.obj, ns, child.name), "%T %s exists", child.obj, child.name)
		assert.Len(t, child.obj.GetOwnerReferences(), 1, "%s owned by the mirror", child.name)
	}
	third.stop()
}
