package install

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/test/realnode"
)

// TestKustomizeDeployUndeploy: `make deploy` (the image `make images` built) runs the
// manager as a pod in quartet-system that reconciles a CopyratorRule (copying into a
// namespace whose owner consented with the ClusterRole make deploy ships); `make undeploy`, after
// the CRs are deleted, removes everything, CRDs and namespace included.
func TestKustomizeDeployUndeploy(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	kustomization := filepath.Join(env.Root, "config", "manager", "kustomization.yaml")
	before, err := os.ReadFile(kustomization)
	require.NoError(t, err)
	// make deploy sets the image in config/manager (kustomize edit); put the file back.
	t.Cleanup(func() { _ = os.WriteFile(kustomization, before, 0o644) })

	since := time.Now()
	command(t, nil, "make", "-s", "deploy", "IMG=quay.io/quartet-operator/quartet:v0.3.0", "KUBECTL="+kubectl())
	pod := waitManager(t, installNS, "quay.io/quartet-operator/quartet:v0.3.0")
	t.Logf("make deploy: manager %s Ready %s after the deploy began", pod.Name, time.Since(since).Round(time.Second))
	ns := &corev1.Namespace{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: installNS}, ns))
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"], "the namespace make deploy creates enforces the restricted standard")
	rule := copyRule(t, "kustomize-src", "kustomize-target")

	deleteAndWait(t, rule)
	command(t, nil, "make", "-s", "undeploy", "KUBECTL="+kubectl())
	require.NoError(t, realnode.WaitFor(ctx, "namespace "+installNS+" gone", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: installNS}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}))
	require.Empty(t, quartetLeft(t, installNS), "make undeploy leaves nothing of Quartet")
}
