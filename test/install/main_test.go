// Package install proves the install paths without OLM on the local cluster's real node, as
// an admin takes them: the Helm chart (install 0.1.0, upgrade to 0.3.0, uninstall) and
// kustomize (`make deploy`, `make undeploy`). Each ends with the manager pod running the
// image, a CR reconciled by it, and after removal exactly what docs/INSTALL.md says stays.
// OLM's install and uninstall are test/olm's. Run with `make e2e` (root); without
// QUARTET_REAL_NODE=1 every test skips.
package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/realnode"
)

const installNS = "quartet-system"

var env *realnode.Env

func TestMain(m *testing.M) {
	realnode.Main(m, "install", 30*time.Minute, &env, &realnode.Timings{}, nil)
}

func requireEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("set QUARTET_REAL_NODE=1 to run the install tests on the real node (make e2e; needs root)")
	}
}

// command runs a tool against the cluster from the repository root and returns its output.
func command(t *testing.T, stdin []byte, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = env.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.Kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

func kubectl() string {
	return env.Cluster.Kubectl()
}

// waitManager waits until the manager Deployment in ns is available with one pod of image
// and returns that pod.
func waitManager(t *testing.T, ns, image string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.WaitDeploymentAvailable(ctx, ns, "quartet-controller-manager", 3*time.Minute))
	var pod *corev1.Pod
	require.NoError(t, realnode.WaitFor(ctx, "one manager pod of "+image, 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		p, err := env.ManagerPod(ctx, ns)
		if err != nil {
			return false, err.Error(), nil
		}
		pod = p
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		return ready && p.Spec.Containers[0].Image == image, p.Name + " " + p.Spec.Containers[0].Image, nil
	}))
	return pod
}

// copyRule creates a source ConfigMap and a CopyratorRule in ns and a target namespace
// whose owner consents to the rule's copies (a RoleBinding of the ClusterRole
// quartet-copyrator-target, which the install must have shipped, to the rule's
// ServiceAccount), and waits for the running manager's copy: one CR reconciled.
func copyRule(t *testing.T, ns, target string) *flantv1.CopyratorRule {
	t.Helper()
	ctx := context.Background()
	for _, n := range []string{ns, target} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	bindings, err := env.ConsentToCopies(ctx, "copyrator-"+ns, ns, copyratorrule.DefaultServiceAccountName, target)
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.DeleteAll(context.Background(), bindings...) })
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns,
		Labels: map[string]string{"copy": "yes"}}, Data: map[string]string{"k": "v"}}))
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeConfigMap, Selector: map[string]flantv1.LabelValue{"copy": "yes"},
			Namespaces: []string{target}}}
	require.NoError(t, env.Client.Create(ctx, rule))
	require.NoError(t, env.WaitCopies(ctx, rule, "shared", []string{target}, 2*time.Minute))
	return rule
}

// deleteAndWait deletes objects and waits until they are gone (finalizers run by the manager).
func deleteAndWait(t *testing.T, objs ...client.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		require.NoError(t, client.IgnoreNotFound(env.Client.Delete(ctx, o)))
	}
	for _, o := range objs {
		require.NoError(t, realnode.WaitFor(ctx, "deletion of "+o.GetName(), 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		}))
	}
}

// quartetLeft lists what of Quartet is on the cluster: the CRDs, and every object in ns or
// cluster-wide labelled app.kubernetes.io/part-of=quartet.
func quartetLeft(t *testing.T, ns string) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	require.NoError(t, env.Client.List(ctx, crds))
	for _, c := range crds.Items {
		for _, g := range []string{"blackadder.io", "flant.com", "operators.brennerm.github.io", "mirrors.quartet.dev"} {
			if c.Spec.Group == g {
				left = append(left, "CustomResourceDefinition "+c.Name)
			}
		}
	}
	part := client.MatchingLabels{"app.kubernetes.io/part-of": "quartet"}
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceAccountList{}, &corev1.ServiceList{}} {
		require.NoError(t, env.Client.List(ctx, l, client.InNamespace(ns), part))
		left = append(left, names(l)...)
	}
	for _, l := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		require.NoError(t, env.Client.List(ctx, l, part))
		left = append(left, names(l)...)
	}
	return left
}

func names(l client.ObjectList) []string {
	items, err := meta.ExtractList(l)
	if err != nil {
		panic(err)
	}
	var out []string
	for _, it := range items {
		o := it.(client.Object)
		kind := strings.TrimSuffix(fmt.Sprintf("%T", l), "List")
		out = append(out, strings.TrimPrefix(kind, "*v1.")+" "+o.GetName())
	}
	return out
}
