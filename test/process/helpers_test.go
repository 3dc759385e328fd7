package process

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/test/benchutil"
)

// namespace creates a namespace with labels and deletes it when the test ends.
func namespace(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	require.NoError(t, env.Client.Create(context.Background(), ns))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return name
}

// namespaces creates n namespaces prefix-0..n-1 in parallel.
func namespaces(t *testing.T, prefix string, n int, labels map[string]string) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	require.NoError(t, benchutil.Parallel(context.Background(), n, func(i int) error {
		return env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: labels}})
	}))
	t.Cleanup(func() {
		_ = benchutil.Parallel(context.Background(), n, func(i int) error {
			_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}})
			return nil
		})
	})
	return names
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
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return cm.Data
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
	if env.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur) == nil && len(cur.GetFinalizers()) > 0 {
		cur.SetFinalizers(nil)
		_ = env.Client.Update(ctx, cur)
	}
}
