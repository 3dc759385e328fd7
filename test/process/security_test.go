package process

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/testenv"
)

// readYAML decodes into obj the document of a repository file that is of obj's kind.
func readYAML(t *testing.T, rel string, obj client.Object) {
	t.Helper()
	gvks, _, err := env.Scheme.ObjectKinds(obj)
	require.NoError(t, err)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	docs := strings.Split(string(b), "\n---\n")
	i := slices.IndexFunc(docs, regexp.MustCompile(`(?m)^kind: `+gvks[0].Kind+`$`).MatchString)
	require.NotEqual(t, -1, i, "no %s in %s", gvks[0].Kind, rel)
	require.NoError(t, yaml.Unmarshal([]byte(docs[i]), obj))
}

// serviceAccountKubeconfig binds the generated manager ClusterRole and leader-election Role
// to a fresh ServiceAccount in ns and writes a kubeconfig with a token for it.
func serviceAccountKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	readYAML(t, "config/rbac/role.yaml", role)
	role.Name = "e2e-manager-role"
	leader := &rbacv1.Role{}
	readYAML(t, "config/rbac/leader_election_role.yaml", leader)
	leader.Namespace = ns
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quartet-controller-manager", Namespace: ns}}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}}
	create(t, role, leader, sa,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-manager-rolebinding"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subjects},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leader-election-rolebinding", Namespace: ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leader.Name}, Subjects: subjects})
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	require.NoError(t, env.Client.SubResource("token").Create(context.Background(), sa, tr))
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return benchutil.DirectKubeconfig(t, cfg)
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
	url := ratesURL(t)

	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(dst, "web", 2)))
	require.NoError(t, env.Client.Create(ctx, configMap(dst, "settings", nil, map[string]string{"a": "b"})))
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: src,
		Labels: map[string]string{"copy": "rbac"}}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{}}`}}))

	t.Setenv("POD_NAMESPACE", system)
	m := startManager(t, "rbac", "--kubeconfig="+kubeconfig, "--leader-elect", "--leader-election-namespace="+system,
		"--exchangerate-url="+url)

	agent := chaosAgent("rbac", sel, func(s *blackadderv1beta1.ChaosAgentSpec) { s.TantrumMode, s.CancerMode, s.IpsumMode = true, true, true })
	rule := copyRule(src, "pull", flantv1.RuleTypeSecret, "copy=rbac", sel)
	create(t, agent, rule, rate(src, "usd", "USD"), mirror(src, "hub", "https://registry-1.docker.io", false))

	eventually(t, time.Minute, "Secret copied", func() bool {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "pull"}}
		return fetch(s) && s.Type == corev1.SecretTypeDockerConfigJson
	})
	eventually(t, time.Minute, "rate written", func() bool { return configMapData(t, src, "usd")["rate"] != "" })
	eventually(t, 2*time.Minute, "mirror Ready", func() bool { return mirrorReady(src, "hub") })
	eventually(t, time.Minute, "chaos: pod evicted, Deployment scaled, ConfigMap rewritten", func() bool {
		return fetch(agent) && agent.Status.Counts.PodsKilled > 0 && agent.Status.Counts.DeploymentsScaled > 0 &&
			agent.Status.Counts.ConfigMapsIpsumed > 0
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

	dep := &appsv1.Deployment{}
	readYAML(t, "config/manager/manager.yaml", dep)
	require.Equal(t, "controller-manager", dep.Name)
	dep.Namespace = ns
	dep.Spec.Template.Spec.ServiceAccountName = "" // the default ServiceAccount; RBAC is not what this test checks
	require.NoError(t, env.Client.Create(ctx, dep))
	eventually(t, time.Minute, "the manager Deployment available under restricted", func() bool {
		return fetch(dep) && dep.Status.AvailableReplicas == 1
	})

	persistentVolume(t, "restricted-pv")
	m := startManager(t, "restricted", "--controllers=registrymirror")
	testenv.GrantNodes(t, env.Client, "docker.io", ns, "hub")
	hub := mirror(ns, "hub", "https://registry-1.docker.io", false)
	create(t, hub)
	eventually(t, 2*time.Minute, "the registry StatefulSet ready under restricted", func() bool {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hub-registry"}}
		return fetch(s) && s.Status.ReadyReplicas == 1
	})
	eventually(t, time.Minute, "the mirror to explain its node agents are missing", func() bool {
		c := mirrorCondition(t, hub, "Ready")
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Reason, "NodeAgent")
	})
	ds := &appsv1.DaemonSet{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hub-node"}, ds))
	assert.Zero(t, ds.Status.NumberReady, "the node agent is the exception: refused under restricted")
	// The DaemonSet controller's Event is written on its own schedule, not with the mirror's
	// status waited for above: wait for it too.
	var refused eventsv1.Event
	eventually(t, time.Minute, "a FailedCreate event naming the PodSecurity violation", func() bool {
		events := testenv.Events(t, env.Client, ns, "DaemonSet", ds.Name)
		i := slices.IndexFunc(events, func(e eventsv1.Event) bool {
			return e.Reason == "FailedCreate" && strings.Contains(e.Note, "violates PodSecurity")
		})
		if i >= 0 {
			refused = events[i]
		}
		return i >= 0
	})
	t.Logf("node agent refused as expected: %s", refused.Note)
	m.stop()
}
