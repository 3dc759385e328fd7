package process

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// tenant is a user who holds only the built-in edit role in one namespace, with the
// Quartet editor roles aggregated into it as the installs ship them.
type tenant struct {
	name, namespace string
	client          client.Client
}

// editorRoles installs the CopyratorRule, ExchangeRate and RegistryMirror editor roles of
// config/rbac (aggregated into admin and edit by kube-controller-manager) and waits until
// edit holds them.
func editorRoles(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, f := range []string{"copyratorrule", "exchangerate", "registrymirror"} {
		role := &rbacv1.ClusterRole{}
		readYAML(t, "config/rbac/"+f+"_editor_role.yaml", role)
		role.Name = "tenant-test-" + role.Name
		if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), role) })
	}
	eventually(t, time.Minute, "the editor roles aggregated into edit", func() bool {
		edit, groups := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "edit"}}, sets.New[string]()
		if !fetch(edit) {
			return false
		}
		for _, r := range edit.Rules {
			groups.Insert(r.APIGroups...)
		}
		return groups.HasAll("flant.com", "mirrors.quartet.dev", "operators.brennerm.github.io")
	})
}

// newTenant makes a namespace and a user holding edit there, and a client acting as them.
func newTenant(t *testing.T, name string) tenant {
	t.Helper()
	ns := namespace(t, name, nil)
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-edit", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	require.NoError(t, env.Client.Create(context.Background(), binding))
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return tenant{name: name, namespace: ns, client: c}
}

// ruleStatus waits until the rule's status describes its current generation and returns it.
func ruleStatus(t *testing.T, rule *flantv1.CopyratorRule, check func(flantv1.CopyratorRuleStatus) bool) flantv1.CopyratorRuleStatus {
	t.Helper()
	eventually(t, time.Minute, "the status of CopyratorRule "+rule.Name, func() bool {
		return fetch(rule) && rule.Status.ObservedGeneration == rule.Generation && check(rule.Status)
	})
	return rule.Status
}

func mirrorCondition(t *testing.T, m *mirrorsv1alpha1.RegistryMirror, typ string) metav1.Condition {
	t.Helper()
	cur := &mirrorsv1alpha1.RegistryMirror{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(m), cur))
	return testenv.Condition(cur.Status.Conditions, typ)
}

// copiesOf lists the copies (ConfigMaps and Secrets) that rules of namespace from made in
// the namespaces given.
func copiesOf(t *testing.T, from string, namespaces ...string) []string {
	t.Helper()
	var out []string
	for _, kind := range []string{"ConfigMap", "Secret"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
		require.NoError(t, env.Client.List(context.Background(), list,
			client.MatchingLabels{copyratorrule.LabelManagedBy: copyratorrule.ManagedByValue, copyratorrule.LabelRuleNamespace: from}))
		for _, o := range list.Items {
			if slices.Contains(namespaces, o.Namespace) {
				out = append(out, kind+" "+o.Namespace+"/"+o.Name)
			}
		}
	}
	return out
}

// TestTenantReachesOnlyWhatTheyCouldWithoutQuartet acts as a user, alice, who holds only
// edit in one namespace (impersonation, the installs' RBAC, the manager as its
// ServiceAccount with the generated rules) and tries every attack of the security review:
// each is refused, with a message that says what permission or consent is missing, and
// nothing is written outside her namespace. Then a cluster admin takes the documented one
// step for each platform use, and the article's uses work.
func TestTenantReachesOnlyWhatTheyCouldWithoutQuartet(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	editorRoles(t)
	system := namespace(t, "tenant-system", nil)
	kubeconfig := serviceAccountKubeconfig(t, system)
	t.Setenv("POD_NAMESPACE", system)
	startManager(t, "tenant", "--kubeconfig="+kubeconfig, "--registrymirror-probes=true",
		"--copyratorrule-consent-recheck=2s", "--controllers=copyratorrule,registrymirror")
	alice, bob := newTenant(t, "alice"), newTenant(t, "bob")
	a := alice.client
	victims := []string{bob.namespace, "kube-system", "kube-public", system}

	// Copyrator: a Secret and a ConfigMap of alice's, copied "everywhere", and named outright
	// into kube-system, bob's namespace and the operator's.
	spread := map[string]string{"spread": "yes"}
	createAs(t, a, "alice may write her own namespace",
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: alice.namespace, Labels: spread},
			Type: corev1.SecretTypeDockerConfigJson, StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{}}`}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: alice.namespace, Labels: spread},
			Type: corev1.SecretTypeBootstrapToken, StringData: map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef",
				"usage-bootstrap-authentication": "true", "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"}},
		configMap(alice.namespace, "coredns-custom", spread, map[string]string{"evil.override": "rewrite name kubernetes.default attacker.example"}))
	everywhere := copyRule(alice.namespace, "everywhere", flantv1.RuleTypeSecret, "spread=yes", "")
	named := copyRule(alice.namespace, "named", flantv1.RuleTypeConfigMap, "spread=yes", "")
	named.Spec.Namespaces = victims
	// She even names the ServiceAccount a platform namespace's rules use: it is hers, in her namespace.
	named.Spec.ServiceAccountName = copyratorrule.DefaultServiceAccountName
	createAs(t, a, "edit includes CopyratorRules", everywhere, named)
	st := ruleStatus(t, named, func(st flantv1.CopyratorRuleStatus) bool { return st.RefusedCount == int32(len(victims)) })
	byNS := map[string]string{}
	for _, r := range st.Refused {
		byNS[r.Namespace] = r.Reason
	}
	assert.Contains(t, byNS[bob.namespace], "ServiceAccount "+alice.namespace+"/copyrator may not create configmaps in namespace "+bob.namespace)
	for _, ns := range []string{"kube-system", "kube-public", system} {
		assert.Contains(t, byNS[ns], "is protected", ns)
		assert.Contains(t, byNS[ns], copyratorrule.LabelAcceptCopies+"=true", ns)
	}
	st = ruleStatus(t, everywhere, func(st flantv1.CopyratorRuleStatus) bool { return st.RefusedCount > 0 })
	ready := testenv.Condition(st.Conditions, flantv1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "no namespace consents: %s", ready.Message)
	assert.Equal(t, flantv1.ReasonTargetsRefused, ready.Reason)
	assert.Equal(t, int32(1), st.SourcesMatched, "the bootstrap token is never a source")
	auth := testenv.Condition(st.Conditions, flantv1.ConditionAuthorized)
	assert.Contains(t, auth.Message, "ClusterRole "+copyratorrule.TargetClusterRole, "the refusal says how consent is given")
	// The pass sends its Events after its status write, and the recorder sends them later
	// still: the status waited for above does not mean they are there.
	eventually(t, time.Minute, "a "+copyratorrule.EventCopyRefused+" Event on CopyratorRule "+named.Name, func() bool {
		return slices.Contains(testenv.EventReasons(t, env.Client, alice.namespace, "CopyratorRule", named.Name), copyratorrule.EventCopyRefused)
	})

	// She cannot give herself the consent: binding in bob's namespace is not hers to do.
	selfGrant := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "let-me-in", Namespace: bob.namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: testenv.CopyTargetRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: alice.namespace, Name: "copyrator"}}}
	err := a.Create(ctx, selfGrant)
	require.True(t, apierrors.IsForbidden(err), "alice may not bind roles in bob's namespace: %v", err)

	// RegistryMirror: containerd's catch-all host is refused at admission.
	err = a.Create(ctx, mirror(alice.namespace, "all", "https://_default", true))
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "spec.upstream")
	assert.Contains(t, err.Error(), "_default")

	// She cannot grant herself node access: grants are cluster-scoped, an admin's.
	err = a.Create(ctx, &mirrorsv1alpha1.RegistryHostGrant{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: mirrorsv1alpha1.RegistryHostGrantSpec{Host: "docker.io", Mirror: mirrorsv1alpha1.MirrorReference{Namespace: alice.namespace, Name: "hub"}}})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	// Nor run chaos: ChaosAgents are cluster-scoped and not aggregated into edit.
	err = a.Create(ctx, chaosAgent("alice", "x", nil))
	require.True(t, apierrors.IsForbidden(err), "%v", err)

	// A pod of bob's runs an image from Docker Hub, by digest.
	bobImage := "docker.io/library/bob-app:1@sha256:" + strings.Repeat("b0", 32)
	bobPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: bob.namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: bobImage}}}}
	create(t, bobPod)
	// A platform mirror of Docker Hub with the admin's grant; alice's mirror of the same host.
	platform := namespace(t, "tenant-platform", nil)
	persistentVolume(t, "tenant-pv-"+platform)
	testenv.GrantNodes(t, env.Client, "docker.io", platform, "hub", mirrorsv1alpha1.CapabilityResolve)
	platformHub := mirror(platform, "hub", "https://registry-1.docker.io", true)
	create(t, platformHub)
	hers := mirror(alice.namespace, "hub", "https://registry-1.docker.io", true)
	// And a mirror whose upstream is the cloud metadata address: a probe to map the network.
	probe := mirror(alice.namespace, "meta", "http://169.254.169.254", false)
	createAs(t, a, "edit includes RegistryMirrors", hers, probe)
	eventually(t, time.Minute, "alice's mirror to say why it has no node access", func() bool {
		c := mirrorCondition(t, hers, mirrorsv1alpha1.ConditionNodeAccess)
		return c.Status == metav1.ConditionFalse && c.Reason == mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror
	})
	herReady := mirrorCondition(t, hers, mirrorsv1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, herReady.Status)
	assert.Contains(t, herReady.Message, "spec.configureNodes asks for the nodes and no RegistryHostGrant allows this mirror there")
	eventually(t, time.Minute, "the metadata address never probed", func() bool {
		return mirrorCondition(t, probe, "UpstreamReachable").Reason == mirrorsv1alpha1.ReasonAddressRefused
	})
	probed := mirrorCondition(t, probe, "UpstreamReachable")
	assert.NotContains(t, probed.Message, "dial tcp", "a fixed phrase, not the error's text")
	eventually(t, 2*time.Minute, "the platform's mirror on the nodes", func() bool {
		return exists(t, &appsv1.DaemonSet{}, platform, "hub-node") && mirrorCondition(t, platformHub, mirrorsv1alpha1.ConditionNodeAccess).Status == metav1.ConditionTrue
	})
	dss := &appsv1.DaemonSetList{}
	require.NoError(t, env.Client.List(ctx, dss, client.InNamespace(alice.namespace)))
	assert.Empty(t, dss.Items, "nothing of alice's runs on the nodes")

	// bob's pod (created before both mirrors, so every pass of theirs saw it) is pinned by
	// the platform's granted mirror, in its own namespace; alice's mirror of the same host,
	// without a grant, shows her none.
	eventually(t, 2*time.Minute, "the platform's mirror pinning bob's image", func() bool {
		return strings.Contains(configMapData(t, platform, "hub-registry-config")["pinned-images"], "library/bob-app:1@sha256:")
	})
	herConfig := &corev1.ConfigMap{}
	require.NoError(t, a.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: "hub-registry-config"}, herConfig), "alice reads her mirror's ConfigMap")
	assert.NotContains(t, herConfig.Data["pinned-images"], "@sha256:", "alice's mirror lists no image of other namespaces")

	// Nothing was written outside her namespace.
	assert.Empty(t, copiesOf(t, alice.namespace, victims...))

	// The platform uses, after the admin's one step each. The article's rule, unchanged,
	// from a platform namespace: "copy this ConfigMap into every namespace".
	sample := &flantv1.CopyratorRule{}
	readYAML(t, "config/samples/flant_v1_copyratorrule.yaml", sample)
	sample.Namespace = platform
	require.NoError(t, env.Client.Create(ctx, configMap(platform, "company-ca", map[string]string{"copyrator": "true"}, map[string]string{"ca.crt": "PEM"})))
	create(t, sample)
	ruleStatus(t, sample, func(st flantv1.CopyratorRuleStatus) bool {
		return testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason == flantv1.ReasonTargetsRefused
	})
	assert.Nil(t, configMapData(t, alice.namespace, "company-ca"), "before the admin's step, nothing")
	// kubectl create clusterrolebinding copyrator-platform --clusterrole=quartet-copyrator-target --serviceaccount=<platform>:copyrator
	testenv.GrantCopies(t, env.Client, platform, copyratorrule.DefaultServiceAccountName)
	for _, ns := range []string{alice.namespace, bob.namespace} {
		eventually(t, time.Minute, "the platform's copy in "+ns, func() bool { return configMapData(t, ns, "company-ca")["ca.crt"] == "PEM" })
	}
	assert.Nil(t, configMapData(t, "kube-system", "company-ca"), "protected namespaces still need their label")
	st = ruleStatus(t, sample, func(st flantv1.CopyratorRuleStatus) bool { return st.TargetNamespaces > 1 })
	assert.True(t, meta.IsStatusConditionTrue(st.Conditions, flantv1.ConditionReady))
	// Alice's rules are still refused everywhere: the admin's step was for the platform.
	assert.Empty(t, copiesOf(t, alice.namespace, victims...), "only the platform's copies, none of alice's")
}

// TestManyRulesOnOneLargeSecret is the worst rule set a tenant can write for the
// manager's memory: 300 CopyratorRules, each with its own selector, all matching one Secret
// of almost 1 MiB. Source caches keep no bodies, so the manager's resident memory grows by
// far less than one body per rule (hundreds of MiB would take a manager with the shipped
// 512Mi limit to being killed, and all four controllers with it).
func TestManyRulesOnOneLargeSecret(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := namespace(t, "big-secret", nil)
	target := namespace(t, "big-secret-dst", nil)
	m := startManager(t, "bigsecret", "--controllers=copyratorrule")
	labels := map[string]string{}
	for i := range 25 {
		labels[fmt.Sprintf("l%02d", i)] = "x"
	}
	body := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz"), 900<<10/26+1)[:900<<10]
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns, Labels: labels},
		Data: map[string][]byte{"blob": body}}))
	// Let the manager settle before the baseline is read.
	time.Sleep(5 * time.Second)
	before, err := benchutil.ProcRSS(m.cmd.Process.Pid)
	require.NoError(t, err)

	var rules []*flantv1.CopyratorRule
	for i := range 25 {
		for j := i + 1; j < 25 && len(rules) < 300; j++ {
			r := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%02d-%02d", i, j), Namespace: ns},
				Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeSecret, Namespaces: []string{target},
					Selector: map[string]flantv1.LabelValue{fmt.Sprintf("l%02d", i): "x", fmt.Sprintf("l%02d", j): "x"}}}
			rules = append(rules, r)
		}
	}
	require.NoError(t, benchutil.Parallel(ctx, len(rules), func(i int) error { return env.Client.Create(ctx, rules[i]) }))
	t.Cleanup(func() {
		_ = benchutil.Parallel(context.Background(), len(rules), func(i int) error { forceDelete(rules[i]); return nil })
	})
	eventually(t, 3*time.Minute, "every rule's status", func() bool {
		list := &flantv1.CopyratorRuleList{}
		require.NoError(t, env.Client.List(ctx, list, client.InNamespace(ns)))
		return len(list.Items) == len(rules) && !slices.ContainsFunc(list.Items, func(r flantv1.CopyratorRule) bool {
			return r.Status.ObservedGeneration != r.Generation || r.Status.SourcesMatched != 1
		})
	})
	runtime.GC() // the test process's, not the manager's: nothing to do with the figure
	var peak uint64
	for range 5 {
		rss, err := benchutil.ProcRSS(m.cmd.Process.Pid)
		require.NoError(t, err)
		peak = max(peak, rss)
		time.Sleep(time.Second)
	}
	growth := float64(peak-min(peak, before)) / (1 << 20)
	t.Logf("manager RSS %.1f MiB before, %.1f MiB with %d rules on one 900 KiB Secret (+%.1f MiB)",
		float64(before)/(1<<20), float64(peak)/(1<<20), len(rules), growth)
	// Measured: +15 MiB here; +675 MiB (a live heap of 400 MB) with one label-selected
	// informer of full objects per rule, each watch keeping a buffer as large as the Secret.
	assert.Less(t, growth, 100.0, "memory must not grow with a body per rule")
	assert.False(t, m.exited(), "the manager keeps running")
}
