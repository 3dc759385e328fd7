package process

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/controllers/exchangerate/fakeupstream"
	"github.com/quartet-operator/quartet/internal/localcluster"
	"github.com/quartet-operator/quartet/test/testenv"
)

// readYAML decodes a file of the repository into obj.
func readYAML(t *testing.T, rel string, obj any) {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, obj))
}

// serviceAccountKubeconfig binds the generated manager ClusterRole and leader-election Role
// to a fresh ServiceAccount in ns and writes a kubeconfig with a token for it.
func serviceAccountKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{}
	readYAML(t, "config/rbac/role.yaml", role)
	role.Name = "e2e-manager-role"
	leader := &rbacv1.Role{}
	readYAML(t, "config/rbac/leader_election_role.yaml", leader)
	leader.Namespace = ns
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quartet-controller-manager", Namespace: ns}}
	objs := []client.Object{role, leader, sa,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-manager-rolebinding"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leader-election-rolebinding", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leader.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}}},
	}
	for _, o := range objs {
		require.NoError(t, env.Client.Create(ctx, o))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)

	admin, err := clientcmd.LoadFromFile(env.Cluster.Kubeconfig)
	require.NoError(t, err)
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["manager"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "manager"}
	cfg.CurrentContext = "manager"
	path := filepath.Join(t.TempDir(), "manager.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// TestManagerRunsWithGeneratedRBAC runs the manager as its ServiceAccount with exactly the
// generated ClusterRole and leader-election Role (what the CSV and `make deploy` grant) and
// drives all four controllers, Secrets included: everything works and nothing is forbidden.
func TestManagerRunsWithGeneratedRBAC(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	system := namespace(t, "rbac-system", nil)
	kubeconfig := serviceAccountKubeconfig(t, system)
	sel := "rbac-e2e"
	src := namespace(t, "rbac-src", nil)
	testenv.GrantCopies(t, env.Client, src, copyratorrule.DefaultServiceAccountName)
	testenv.GrantNodes(t, env.Client, "docker.io", src, "hub")
	dst := namespace(t, "rbac-dst", map[string]string{sel: "true"})
	persistentVolume(t, "rbac-pv")
	rates, err := fakeupstream.Start("127.0.0.1:0", "2026-11-20", fakeupstream.DefaultRates())
	require.NoError(t, err)
	defer rates.Close()

	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(dst, "web", 2)))
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: dst},
		Data: map[string]string{"a": "b"}}))
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: src,
		Labels: map[string]string{"copy": "rbac"}}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{}}`}}))

	t.Setenv("POD_NAMESPACE", system)
	m := startManager(t, "rbac", "--kubeconfig="+kubeconfig, "--leader-elect", "--leader-election-namespace="+system,
		"--exchangerate-url="+rates.URL())

	agent := chaosAgent("rbac", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode, s.CancerMode, s.IpsumMode = true, true, true })
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: src}, Spec: flantv1.CopyratorRuleSpec{
		RuleType: flantv1.RuleTypeSecret, Selector: map[string]flantv1.LabelValue{"copy": "rbac"},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{sel: "true"}}}}
	xr := &operatorsv1.ExchangeRate{ObjectMeta: metav1.ObjectMeta{Name: "usd", Namespace: src}, Spec: operatorsv1.ExchangeRateSpec{Currency: "USD", Base: "EUR"}}
	mirror := &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: "hub", Namespace: src},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: "https://registry-1.docker.io", Storage: resource.MustParse("10Gi")}}
	for _, o := range []client.Object{agent, rule, xr, mirror} {
		require.NoError(t, env.Client.Create(ctx, o))
		t.Cleanup(func() { forceDelete(o) })
	}

	eventually(t, time.Minute, "Secret copied", func() bool {
		s := &corev1.Secret{}
		return env.Client.Get(ctx, client.ObjectKey{Namespace: dst, Name: "pull"}, s) == nil && s.Type == corev1.SecretTypeDockerConfigJson
	})
	eventually(t, time.Minute, "rate written", func() bool { return configMapData(t, src, "usd")["rate"] != "" })
	eventually(t, 2*time.Minute, "mirror Ready", func() bool { return mirrorReady(t, src, "hub") })
	eventually(t, time.Minute, "chaos: pod evicted, Deployment scaled, ConfigMap rewritten", func() bool {
		a := &blackadderv1beta1.ChaosAgent{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(agent), a) == nil &&
			a.Status.Counts.PodsKilled > 0 && a.Status.Counts.DeploymentsScaled > 0 && a.Status.Counts.ConfigMapsIpsumed > 0
	})
	deleteAndWait(t, agent, time.Minute)
	assert.Equal(t, map[string]string{"a": "b"}, configMapData(t, dst, "settings"), "restored under the generated RBAC")
	deleteAndWait(t, rule, time.Minute)
	assert.NotContains(t, strings.ToLower(m.logs()), "forbidden", "the manager hit a permission it lacks")
	m.stop()
}

// TestRestrictedPodSecurity runs the manager Deployment of config/manager and a mirror's
// registry in namespaces that enforce the restricted Pod Security Standard: their pods are
// admitted and become ready. The mirror's node agent (hostPort, and hostPath with
// configureNodes) is the one named exception: it is refused there and the mirror says so.
func TestRestrictedPodSecurity(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	restricted := map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
	ns := namespace(t, "restricted", restricted)

	var docs []string
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "config/manager/manager.yaml"))
	require.NoError(t, err)
	docs = strings.Split(string(raw), "\n---\n")
	dep := &appsv1.Deployment{}
	for _, d := range docs {
		if strings.Contains(d, "kind: Deployment") {
			require.NoError(t, yaml.Unmarshal([]byte(d), dep))
		}
	}
	require.Equal(t, "controller-manager", dep.Name)
	dep.Namespace = ns
	dep.Spec.Template.Spec.ServiceAccountName = "" // the default ServiceAccount; RBAC is not what this test checks
	require.NoError(t, env.Client.Create(ctx, dep))
	eventually(t, time.Minute, "the manager Deployment available under restricted", func() bool {
		cur := &appsv1.Deployment{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(dep), cur) == nil && cur.Status.AvailableReplicas == 1
	})

	persistentVolume(t, "restricted-pv")
	m := startManager(t, "restricted", "--controllers=registrymirror")
	testenv.GrantNodes(t, env.Client, "docker.io", ns, "hub")
	mirror := &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: "hub", Namespace: ns},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: "https://registry-1.docker.io", Storage: resource.MustParse("10Gi")}}
	require.NoError(t, env.Client.Create(ctx, mirror))
	t.Cleanup(func() { forceDelete(mirror) })
	eventually(t, 2*time.Minute, "the registry StatefulSet ready under restricted", func() bool {
		s := &appsv1.StatefulSet{}
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hub-registry"}, s) == nil && s.Status.ReadyReplicas == 1
	})
	eventually(t, time.Minute, "the mirror to explain its node agents are missing", func() bool {
		cur := &mirrorsv1alpha1.RegistryMirror{}
		if env.Client.Get(ctx, client.ObjectKeyFromObject(mirror), cur) != nil {
			return false
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Reason, "NodeAgent")
	})
	ds := &appsv1.DaemonSet{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hub-node"}, ds))
	assert.Zero(t, ds.Status.NumberReady, "the node agent is the exception: refused under restricted")
	events := &corev1.EventList{}
	require.NoError(t, env.Client.List(ctx, events, client.InNamespace(ns)))
	refused := false
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "DaemonSet" && e.Reason == "FailedCreate" && strings.Contains(e.Message, "violates PodSecurity") {
			refused = true
			t.Logf("node agent refused as expected: %s", e.Message)
			break
		}
	}
	assert.True(t, refused, "a FailedCreate event names the PodSecurity violation")
	m.stop()
}
