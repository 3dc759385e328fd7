package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/test/realnode"
)

const image = "quay.io/quartet-operator/quartet:v0.3.0"

// freshClone clones the repository's HEAD into a temporary folder: no bin/, nothing built.
func freshClone(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "quartet")
	out, err := exec.Command("git", "clone", "--quiet", "--no-hardlinks", repoRoot(t), dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return dir
}

// repoRoot is the repository's root, with or without the real node.
func repoRoot(t *testing.T) string {
	t.Helper()
	if env != nil {
		return env.Root
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

// userMake runs make in dir as a cluster admin would on their own machine: kubectl on PATH
// (a folder holding only kubectl, first), not the project's bin/; KUBECONFIG, HOME and
// KUBECTL as given ("" unsets them). It returns make's output and error.
func userMake(t *testing.T, dir string, vars map[string]string, args ...string) (string, error) {
	t.Helper()
	var environ []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := vars[name]; !set && name != "KUBECTL" && name != "KUBECONFIG" && name != "CLUSTER" {
			environ = append(environ, kv)
		}
	}
	for name, v := range vars {
		if v != "" {
			environ = append(environ, name+"="+v)
		}
	}
	cmd := exec.Command("make", append([]string{"-s"}, args...)...)
	cmd.Dir, cmd.Env = dir, environ
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlOnPath returns a PATH whose first folder holds only kubectl (the cluster's
// binary, as a user's own would be), then the test's PATH.
func kubectlOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Symlink(kubectl(), filepath.Join(dir, "kubectl")))
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// TestClusterTargetsSayWhatIsMissing: without a kubectl or a kubeconfig, make install,
// deploy and undeploy stop before they build or apply anything, naming what is missing and
// how to use the local cluster instead; CLUSTER other than dev is refused.
func TestClusterTargetsSayWhatIsMissing(t *testing.T) {
	root := repoRoot(t)
	home := t.TempDir() // no .kube/config
	for _, target := range []string{"install", "deploy", "undeploy"} {
		out, err := userMake(t, root, map[string]string{"KUBECTL": filepath.Join(home, "kubectl")}, target)
		require.Error(t, err, target)
		assert.Contains(t, out, "make: no kubectl ("+filepath.Join(home, "kubectl")+")", target)
		assert.Contains(t, out, "CLUSTER=dev", target)

		out, err = userMake(t, root, map[string]string{"HOME": home, "KUBECTL": "true"}, target)
		require.Error(t, err, target)
		assert.Contains(t, out, "make: no kubeconfig ("+home+"/.kube/config)", target)

		out, err = userMake(t, root, map[string]string{"KUBECONFIG": filepath.Join(home, "missing"), "KUBECTL": "true"}, target)
		require.Error(t, err, target)
		assert.Contains(t, out, "make: no kubeconfig ("+filepath.Join(home, "missing")+")", target)
	}
	out, err := userMake(t, root, map[string]string{"CLUSTER": "prod"}, "deploy")
	require.Error(t, err)
	assert.Contains(t, out, "CLUSTER=prod: the one named cluster is dev")
}

// TestKustomizeDeployUndeploy: from a fresh clone (no bin/: make builds its own
// controller-gen and kustomize), with kubectl on PATH and the cluster given by KUBECONFIG,
// as a cluster admin runs it against their own cluster, `make deploy` (the image `make
// images` built) runs the manager as a pod in quartet-system that reconciles a
// CopyratorRule (copying into a namespace whose owner consented with the ClusterRole make
// deploy ships); `make undeploy`, after the CRs are deleted, removes everything, CRDs and
// namespace included.
func TestKustomizeDeployUndeploy(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	clone := freshClone(t)
	user := map[string]string{"PATH": kubectlOnPath(t), "KUBECONFIG": env.Cluster.Kubeconfig}

	since := time.Now()
	out, err := userMake(t, clone, user, "deploy", "IMG="+image)
	require.NoError(t, err, "make deploy from a fresh clone:\n%s", out)
	assert.Contains(t, out, "make: acting on context ", "make deploy says which cluster it acts on")
	pod := waitManager(t, installNS, image)
	t.Logf("make deploy from a fresh clone: manager %s Ready %s after the deploy began (controller-gen and kustomize built)", pod.Name, time.Since(since).Round(time.Second))
	ns := &corev1.Namespace{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: installNS}, ns))
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"], "the namespace make deploy creates enforces the restricted standard")
	rule := copyRule(t, "kustomize-src", "kustomize-target")

	deleteAndWait(t, rule)
	out, err = userMake(t, clone, user, "undeploy")
	require.NoError(t, err, "make undeploy:\n%s", out)
	waitGone(t, installNS)
	require.Empty(t, quartetLeft(t, installNS), "make undeploy leaves nothing of Quartet")
}

// TestInstallYAML: `kubectl apply --server-side -f dist/install.yaml` (the committed file,
// as a fresh clone or a release has it) installs a manager that reconciles a CopyratorRule;
// `kubectl delete -f dist/install.yaml`, after the CRs are deleted, removes everything.
func TestInstallYAML(t *testing.T) {
	requireEnv(t)
	since := time.Now()
	command(t, nil, kubectl(), "apply", "--server-side", "-f", "dist/install.yaml")
	pod := waitManager(t, installNS, image)
	t.Logf("kubectl apply -f dist/install.yaml: manager %s Ready %s after the apply began", pod.Name, time.Since(since).Round(time.Second))
	rule := copyRule(t, "installer-src", "installer-target")

	deleteAndWait(t, rule)
	command(t, nil, kubectl(), "delete", "--ignore-not-found", "-f", "dist/install.yaml")
	waitGone(t, installNS)
	require.Empty(t, quartetLeft(t, installNS), "kubectl delete -f dist/install.yaml leaves nothing of Quartet")
}

// waitGone waits until namespace ns is gone.
func waitGone(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), "namespace "+ns+" gone", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	}))
}
