package process

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/fakeupstream"
	"github.com/quartet-operator/quartet/test/testenv"
)

// namespace creates a namespace prefix-<random> with labels, deleted when the test ends.
func namespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	return testenv.Namespace(t, env.Client, prefix, labels)
}

// namespaces creates n namespaces prefix-0..n-1 in parallel.
func namespaces(t *testing.T, prefix string, n int, labels map[string]string) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	ns := func(i int) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: labels}}
	}
	require.NoError(t, benchutil.Parallel(context.Background(), n, func(i int) error { return env.Client.Create(context.Background(), ns(i)) }))
	t.Cleanup(func() {
		_ = benchutil.Parallel(context.Background(), n, func(i int) error { _ = env.Client.Delete(context.Background(), ns(i)); return nil })
	})
	return names
}

// create creates objs and force-deletes them when the test ends.
func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	createAs(t, env.Client, "the test creates its objects", objs...)
}

// createAs creates objs with client c, failing with why if it may not, and force-deletes
// them when the test ends.
func createAs(t *testing.T, c client.Client, why string, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		require.NoError(t, c.Create(context.Background(), o), why)
		t.Cleanup(func() { forceDelete(o) })
	}
}

// fetch reads the current state of obj, named by its namespace and name, into obj and
// reports whether it could.
func fetch(obj client.Object) bool {
	return env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj) == nil
}

// ratesURL serves the imitation ECB feed until the test ends and returns its URL.
func ratesURL(t *testing.T) string {
	t.Helper()
	rates, err := fakeupstream.Start("127.0.0.1:0", "2026-11-20", fakeupstream.DefaultRates())
	require.NoError(t, err)
	t.Cleanup(func() { _ = rates.Close() })
	return rates.URL()
}

// eventually polls cond every 100 ms, on the test's goroutine (cond may fail the test), until
// it holds or timeout passes, and returns how long it took. It fails the test with what on
// timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	require.NoError(t, err, "timed out after %s waiting for %s", timeout, what)
	return time.Since(start)
}

// never checks, on the test's goroutine, that cond stays false for d.
func never(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, d, true,
		func(context.Context) (bool, error) { return cond(), nil })
	require.True(t, wait.Interrupted(err), "%s happened", what)
}

func replicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d))
	return ptr.Deref(d.Spec.Replicas, 1)
}

func configMapData(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if !exists(t, cm, ns, name) {
		return nil
	}
	return cm.Data
}

// exists reads object ns/name into obj and reports whether it exists.
func exists(t *testing.T, obj client.Object, ns, name string) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func configMap(ns, name string, labels, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Data: data}
}

// copyRule copies the sources labelled selector ("key=value") into the namespaces labelled
// nsLabel=true (none when nsLabel is empty).
func copyRule(ns, name string, typ flantv1.RuleType, selector, nsLabel string) *flantv1.CopyratorRule {
	k, v, _ := strings.Cut(selector, "=")
	r := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: flantv1.CopyratorRuleSpec{RuleType: typ, Selector: map[string]flantv1.LabelValue{k: flantv1.LabelValue(v)}}}
	if nsLabel != "" {
		r.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{nsLabel: "true"}}
	}
	return r
}

func rate(ns, name, currency string) *operatorsv1.ExchangeRate {
	return &operatorsv1.ExchangeRate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: operatorsv1.ExchangeRateSpec{Currency: currency, Base: "EUR"}}
}

func mirror(ns, name, upstream string, configureNodes bool) *mirrorsv1alpha1.RegistryMirror {
	return &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: upstream, ConfigureNodes: configureNodes, Storage: resource.MustParse("1Gi")}}
}

// chaosAgent returns an agent confined to namespaces labelled sel=true, hitting everything
// there every second.
func chaosAgent(name, sel string, mutate func(*blackadderv1beta1.ChaosAgentSpec)) *blackadderv1beta1.ChaosAgent {
	a := &blackadderv1beta1.ChaosAgent{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: blackadderv1beta1.ChaosAgentSpec{
			Eagerness:          100,
			PauseDuration:      1,
			MaxActionsPerRound: 100,
			KillMethod:         blackadderv1beta1.KillMethodEvict,
			RestoreOnDelete:    ptr.To(true),
			NamespaceSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{sel: "true"}},
		},
	}
	if mutate != nil {
		mutate(&a.Spec)
	}
	return a
}

// deleteAndWait deletes obj and waits until it is gone (its finalizers ran).
func deleteAndWait(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreNotFound(env.Client.Delete(ctx, obj)))
	eventually(t, timeout, "deletion of "+obj.GetName(), func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
	})
}

// forceDelete removes finalizers so a test never leaves an object behind that a later
// test's manager would act on.
func forceDelete(obj client.Object) {
	ctx := context.Background()
	_ = env.Client.Delete(ctx, obj)
	cur := obj.DeepCopyObject().(client.Object)
	// A controller may write the object meanwhile: retry on a conflict.
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil || len(cur.GetFinalizers()) == 0 {
			return client.IgnoreNotFound(err)
		}
		cur.SetFinalizers(nil)
		return env.Client.Update(ctx, cur)
	})
}
