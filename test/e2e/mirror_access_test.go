package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/registrymirror"
	"github.com/quartet-operator/quartet/test/realnode"
)

// hostsOwnerLine is the first line of a hosts.toml the node agent of mirror ns/name writes.
func hostsOwnerLine(ns, name string) string {
	return "# Managed by the Quartet operator for RegistryMirror " + ns + "/" + name + "; removed when the mirror goes."
}

// waitMirrorCondition waits until the mirror's condition typ has status and reason for its
// current generation and cond (when set) holds, and returns the mirror.
func waitMirrorCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string, timeout time.Duration, cond func(*mirrorsv1alpha1.RegistryMirror) bool) *mirrorsv1alpha1.RegistryMirror {
	t.Helper()
	m := &mirrorsv1alpha1.RegistryMirror{}
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("RegistryMirror %s/%s %s=%s %s", ns, name, typ, status, reason), timeout,
		func(ctx context.Context) (bool, string, error) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
				return false, "", err
			}
			c := meta.FindStatusCondition(m.Status.Conditions, typ)
			ok := c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == m.Generation && (cond == nil || cond(m))
			return ok, conditionSummary(m.Status.Conditions), nil
		}))
	return m
}

// daemonSets lists the DaemonSets in ns.
func daemonSets(t *testing.T, ns string) []string {
	t.Helper()
	list := &appsv1.DaemonSetList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(ns)))
	var out []string
	for _, ds := range list.Items {
		out = append(out, ds.Name)
	}
	return out
}

// TestMirrorNodeAccessOnlyWithTheAdminsGrant is the node side of the consent model. A
// mirror in a namespace the cluster admin keeps, granted its upstream's host with the
// default capability (pull), serves the node's pulls: containerd resolves the tag at the
// upstream itself and fetches the content, which it checks by digest, from the mirror. A
// tenant's mirror of the same host that asks for the nodes (configureNodes) gets no node
// agents and writes nothing on the node: it is an in-cluster cache and its status says
// another mirror holds the host. When the admin withdraws the grant, the node agents go
// and take hosts.toml with them.
func TestMirrorNodeAccessOnlyWithTheAdminsGrant(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const adminNS, tenantNS = "mirror-admin", "mirror-tenant"
	up, ref, layer := upstreamWithImage(t, 5007, "", "", "", "library/granted", 256<<10)
	upstream := "http://" + up.Host
	const manifest = "/v2/library/granted/manifests/1"

	// The admin's mirror: pull only, the grant's default.
	granted := newMirror(t, adminNS, "granted", upstream, "", pullOnly)
	hostsDir := filepath.Join(env.Cluster.Node.CertsDir, up.Host)
	hosts, err := os.ReadFile(filepath.Join(hostsDir, "hosts.toml"))
	require.NoError(t, err, "the granted mirror's node agent wrote containerd's hosts.toml")
	require.Contains(t, string(hosts), "capabilities = [\"pull\"]\n", "pull only: the mirror is not trusted with tags")
	t.Logf("hosts.toml of the granted mirror:\n%s", hosts)
	runImage(t, adminNS, "granted-pull", ref)
	mlog := registryLog(t, granted)
	require.NotEmpty(t, fetchers(mlog, "/v2/library/granted/blobs/"+layer), "the layer came through the mirror:\n%s", mlog)
	require.Empty(t, fetchers(mlog, manifest), "the mirror resolved no tag")
	var byNode []string
	for _, addr := range fetchers(up.Log(), manifest) {
		if !strings.HasPrefix(addr, "10.244.") {
			byNode = append(byNode, addr)
		}
	}
	require.NotEmpty(t, byNode, "containerd resolved the tag at the upstream itself, not through the mirror:\n%s", up.Log())

	// A tenant's mirror of the same host, asking for the nodes.
	before := hostsFiles(t)
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}))
	tenant := &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: tenantNS},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: upstream, Storage: resource.MustParse("1Gi"), ConfigureNodes: true}}
	require.NoError(t, env.Client.Create(ctx, tenant))
	tenant = waitMirrorCondition(t, tenantNS, tenant.Name, mirrorsv1alpha1.ConditionNodeAccess, metav1.ConditionFalse, mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror,
		3*time.Minute, func(m *mirrorsv1alpha1.RegistryMirror) bool {
			// Its registry runs: the status below is about a mirror that works in the cluster.
			ready := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionReady)
			return m.Status.ReadyReplicas == 1 && ready != nil && ready.Reason == mirrorsv1alpha1.ReasonNodeAccessNotGranted
		})
	t.Logf("the tenant's mirror: %s", conditionSummary(tenant.Status.Conditions))
	require.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(tenant.Status.Conditions, mirrorsv1alpha1.ConditionReady).Status,
		"configureNodes asks for the nodes, which it does not get")
	require.Empty(t, tenant.Status.NodeEndpoint, "no host port on the nodes")
	require.Zero(t, tenant.Status.NodesDesired, "no node agents")
	require.Empty(t, daemonSets(t, tenantNS), "no node agent DaemonSet in the tenant's namespace")
	entries, err := os.ReadDir(hostsDir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"hosts.toml"}, names, "the node's hosts directory of %s holds one file", up.Host)
	now, err := os.ReadFile(filepath.Join(hostsDir, "hosts.toml"))
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(now), "\n")
	require.Equal(t, hostsOwnerLine(adminNS, granted.Name), first, "the file is the granted mirror's")
	require.Equal(t, before, hostsFiles(t), "every hosts.toml on the node is as it was before the tenant's mirror")
	for path, content := range hostsFiles(t) {
		require.NotContains(t, content, tenantNS+"/"+tenant.Name, path)
	}

	// The admin withdraws the grant: the granted mirror's node agents go, and with them
	// its hosts.toml; neither mirror is on the nodes any more.
	grants := &mirrorsv1alpha1.RegistryHostGrantList{}
	require.NoError(t, env.Client.List(ctx, grants))
	for i := range grants.Items {
		if g := &grants.Items[i]; g.Spec.Mirror.Namespace == adminNS && g.Spec.Mirror.Name == granted.Name {
			require.NoError(t, env.Client.Delete(ctx, g))
		}
	}
	since := time.Now()
	require.NoError(t, realnode.WaitFor(ctx, "hosts.toml of "+up.Host+" removed", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		_, err := os.Stat(filepath.Join(hostsDir, "hosts.toml"))
		return os.IsNotExist(err), fmt.Sprint(err), nil
	}))
	timing("RegistryHostGrant withdrawn to the mirror's hosts.toml gone from the node", since)
	granted = waitMirrorCondition(t, adminNS, granted.Name, mirrorsv1alpha1.ConditionNodeAccess, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant,
		time.Minute, nil)
	require.NoError(t, realnode.WaitFor(ctx, "the granted mirror's DaemonSet deleted", time.Minute, func(ctx context.Context) (bool, string, error) {
		left := daemonSets(t, adminNS)
		return len(left) == 0, fmt.Sprint(left), nil
	}))
	waitMirrorCondition(t, tenantNS, tenant.Name, mirrorsv1alpha1.ConditionNodeAccess, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant, time.Minute, nil)
	requireEvent(t, adminNS, granted.Name, registrymirror.EventDeleted)
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: adminNS, Name: granted.Name + "-registry"}, &appsv1.StatefulSet{})
	require.NoError(t, err, "the cache itself stays")
}
