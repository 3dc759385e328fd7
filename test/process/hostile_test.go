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
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/testenv"
)

// hostileOthers is the work that must go on while a tenant attacks: a platform rule that
// copies into every namespace labelled hostile-dst, a granted mirror whose pinned list must
// hold bob's image, and a ChaosAgent over bob's and the attacker's namespaces that must not
// kill bob's pods (two run, its podTolerance is three).
type hostileOthers struct {
	platform string
	rule     *flantv1.CopyratorRule
	hub      *mirrorsv1alpha1.RegistryMirror
	agent    *blackadderv1beta1.ChaosAgent
	bob      tenant
	bobPods  map[types.UID]bool
}

const (
	hostilePort   = 35123
	hostileCopies = 40 // --copyratorrule-max-copies
	bobImage      = "library/bob-app:1@sha256:"
)

// TestHostileTenantLeavesOthersWorking: mallory, who holds only edit in her namespace (and
// in a partner namespace's consent), runs each attack of the 2026-12-06 security review on
// what every tenant shares (docs/SECURITY.md, the exhaustion rows) against the manager as it
// ships (its ServiceAccount, the generated RBAC), while the platform's rule, a granted mirror
// and a ChaosAgent keep working. Each step asserts that the attack is contained and that the
// others' work completes: a copy into a new namespace within 30 s, bob's image pinned, no
// pod of bob's killed while the agent runs rounds. A manager that does nothing fails it.
func TestHostileTenantLeavesOthersWorking(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	editorRoles(t)
	system := namespace(t, "hostile-system", nil)
	kubeconfig := serviceAccountKubeconfig(t, system)
	t.Setenv("POD_NAMESPACE", system)
	startManager(t, "hostile", "--kubeconfig="+kubeconfig, "--registrymirror-probes=true",
		"--controllers=copyratorrule,registrymirror,chaosagent",
		fmt.Sprintf("--copyratorrule-max-copies=%d", hostileCopies), "--copyratorrule-consent-reviews-per-second=2",
		"--registrymirror-max-pinned-images=3")
	mallory, bob := newTenant(t, "mallory"), newTenant(t, "bob")
	o := hostileSetUp(t, bob, mallory)
	m := mallory.client

	t.Run("look-alike copies fill no limit and are swept", func(t *testing.T) {
		// More fakes than the whole limit: of a rule that does not exist (with a UID and
		// without) and of the platform rule's name with a forged UID.
		for i := range hostileCopies + 5 {
			l := map[string]string{copyratorrule.LabelManagedBy: copyratorrule.ManagedByValue,
				copyratorrule.LabelRule: "ghost", copyratorrule.LabelRuleNamespace: mallory.namespace}
			if i%2 == 0 {
				l[copyratorrule.LabelRuleUID] = fmt.Sprintf("forged-%d", i)
			}
			createAs(t, m, "her namespace", configMap(mallory.namespace, fmt.Sprintf("fake-%02d", i), l, map[string]string{"k": "v"}))
		}
		forged := configMap(mallory.namespace, "forged", map[string]string{copyratorrule.LabelManagedBy: copyratorrule.ManagedByValue,
			copyratorrule.LabelRule: o.rule.Name, copyratorrule.LabelRuleNamespace: o.platform, copyratorrule.LabelRuleUID: "forged"}, nil)
		createAs(t, m, "her namespace", forged)
		// A change of the platform's source: a full pass, which counts the copies again.
		o.changeSource(t, "after-fakes")
		o.copiesReachANewNamespace(t)
		ready := testenv.Condition(o.ruleStatus(t).Conditions, flantv1.ConditionReady)
		assert.NotEqual(t, flantv1.ReasonLimitReached, ready.Reason, "%s", ready.Message)
		eventually(t, time.Minute, "fakes with a UID of no rule swept", func() bool {
			return !exists(t, &corev1.ConfigMap{}, mallory.namespace, "fake-00") && !exists(t, &corev1.ConfigMap{}, mallory.namespace, "forged")
		})
		assert.True(t, exists(t, &corev1.ConfigMap{}, mallory.namespace, "fake-01"), "a fake of no UID is left alone")
	})

	t.Run("a rule deleted without its finalizer leaves no copies", func(t *testing.T) {
		partner := namespace(t, "hostile-partner", nil)
		consent(t, partner, mallory.namespace)
		createAs(t, m, "her namespace", configMap(mallory.namespace, "share", map[string]string{"share": "yes"}, map[string]string{"k": "v"}))
		rule := copyRule(mallory.namespace, "share", flantv1.RuleTypeConfigMap, "share=yes", "")
		rule.Spec.Namespaces = []string{partner}
		createAs(t, m, "edit includes CopyratorRules", rule)
		eventually(t, time.Minute, "her copy in the partner namespace", func() bool { return configMapData(t, partner, "share")["k"] == "v" })
		// The controller writes the rule too (its status), so the edit retries on a conflict.
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := m.Get(ctx, client.ObjectKeyFromObject(rule), rule); err != nil {
				return err
			}
			rule.Finalizers = nil
			return m.Update(ctx, rule)
		}), "edit may remove a finalizer")
		require.NoError(t, m.Delete(ctx, rule))
		eventually(t, time.Minute, "her copy swept", func() bool { return !exists(t, &corev1.ConfigMap{}, partner, "share") })
		o.copiesReachANewNamespace(t)
	})

	t.Run("many ServiceAccounts and consent questions slow only her rules", func(t *testing.T) {
		createAs(t, m, "her namespace", configMap(mallory.namespace, "flood", map[string]string{"flood": "yes"}, map[string]string{"k": "v"}))
		var rules []*flantv1.CopyratorRule
		for i := range 12 {
			r := copyRule(mallory.namespace, fmt.Sprintf("flood-%02d", i), flantv1.RuleTypeConfigMap, "flood=yes", "")
			r.Spec.ServiceAccountName = fmt.Sprintf("sa-%02d", i)
			createAs(t, m, "edit includes CopyratorRules", r)
			rules = append(rules, r)
		}
		capped := 0
		eventually(t, time.Minute, "rules past the ServiceAccount cap refused", func() bool {
			capped = 0
			for _, r := range rules {
				if fetch(r) && r.Status.ObservedGeneration == r.Generation &&
					testenv.Condition(r.Status.Conditions, flantv1.ConditionReady).Reason == flantv1.ReasonInvalidSpec {
					capped++
				}
			}
			return capped == len(rules)-8
		})
		// Her eight admitted rules ask about every namespace, two reviews a second: the rest wait.
		eventually(t, time.Minute, "her reviews past the budget deferred", func() bool {
			for _, r := range rules {
				for _, ref := range r.Status.Refused {
					if strings.Contains(ref.Reason, "not asked yet") {
						return true
					}
				}
				fetch(r)
			}
			return false
		})
		o.copiesReachANewNamespace(t)
	})

	t.Run("pods no node accepted do not decide what the mirror pins", func(t *testing.T) {
		for i := range 6 {
			createAs(t, m, "edit includes pods", &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("0000-pin-%d", i), Namespace: mallory.namespace},
				Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "c",
					Image: fmt.Sprintf("docker.io/0000/x%d@sha256:%s", i, strings.Repeat(fmt.Sprintf("%02d", i), 32))}}}})
		}
		// A pass of the mirror after her pods: touch its spec.
		key := client.ObjectKeyFromObject(o.hub)
		require.NoError(t, env.Client.Get(ctx, key, o.hub))
		patch := client.MergeFrom(o.hub.DeepCopy())
		o.hub.Spec.MaxDiskPercent = ptr.To(int32(80))
		require.NoError(t, env.Client.Patch(ctx, o.hub, patch))
		eventually(t, time.Minute, "a pass of the mirror after her pods", func() bool {
			cur := &mirrorsv1alpha1.RegistryMirror{}
			return env.Client.Get(ctx, key, cur) == nil && cur.Status.ObservedGeneration == cur.Generation
		})
		pinned := configMapData(t, o.platform, "hub-registry-config")["pinned-images"]
		assert.Contains(t, pinned, bobImage, "bob's image stays pinned")
		assert.NotContains(t, pinned, "0000/", "her pending pods pin nothing")
	})

	t.Run("Pending pods do not push the ChaosAgent past its tolerance", func(t *testing.T) {
		for i := range 6 {
			createAs(t, m, "edit includes pods", &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-pending-%d", i), Namespace: mallory.namespace,
					Labels: map[string]string{"app": "hostile-web"}},
				Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}})
		}
		before := o.agentRounds(t)
		eventually(t, time.Minute, "three more rounds of the agent", func() bool { return o.agentRounds(t) >= before+3 })
		o.bobsPodsUntouched(t)
	})

	t.Run("look-alike DaemonSets hold no host port", func(t *testing.T) {
		// Her DaemonSet came before the mirror asked for the port (hostileSetUp); the mirror has it.
		ds := &appsv1.DaemonSet{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: o.platform, Name: "hub-node"}, ds))
		var port int32
		for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
			if p.Name == "mirror" {
				port = p.HostPort
			}
		}
		assert.Equal(t, int32(hostilePort), port, "the port her DaemonSet names is the granted mirror's")
		assert.Equal(t, metav1.ConditionTrue, mirrorCondition(t, o.hub, mirrorsv1alpha1.ConditionNodeAccess).Status)
	})

	t.Run("an upstream that carries the metadata address in IPv6 is never probed", func(t *testing.T) {
		nat64 := mirror(mallory.namespace, "nat64", "http://[64:ff9b::a9fe:a9fe]", false)
		createAs(t, m, "edit includes RegistryMirrors", nat64)
		eventually(t, time.Minute, "the NAT64 form of 169.254.169.254 refused", func() bool {
			return mirrorCondition(t, nat64, "UpstreamReachable").Reason == mirrorsv1alpha1.ReasonAddressRefused
		})
		o.copiesReachANewNamespace(t)
	})
}

// hostileSetUp starts the others' work and waits until it works, with mallory's look-alike
// DaemonSet already squatting the mirror's port.
func hostileSetUp(t *testing.T, bob, mallory tenant) *hostileOthers {
	t.Helper()
	o := &hostileOthers{platform: namespace(t, "hostile-platform", nil), bob: bob}
	// The platform's rule, granted everywhere by the admin's one step.
	testenv.GrantCopies(t, env.Client, o.platform, copyratorrule.DefaultServiceAccountName)
	create(t, configMap(o.platform, "company-ca", map[string]string{"hostile": "ca"}, map[string]string{"ca.crt": "PEM"}))
	o.rule = copyRule(o.platform, "company-ca", flantv1.RuleTypeConfigMap, "hostile=ca", "hostile-dst")
	create(t, o.rule)
	o.copiesReachANewNamespace(t)

	// Mallory's DaemonSet with the node agent's labels and a `mirror` port, on no node.
	squat := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "hub-node", Namespace: mallory.namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "quartet-registrymirror", "app.kubernetes.io/component": "node-agent"}},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "squat"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "squat"}},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"none": "none"}, Containers: []corev1.Container{{Name: "c",
					Image: "registry.k8s.io/pause:3.10", Ports: []corev1.ContainerPort{{Name: "mirror", ContainerPort: 5000, HostPort: hostilePort}}}}}}}}
	createAs(t, mallory.client, "edit includes DaemonSets", squat)

	// Bob's running pod, and the platform's granted mirror of its host on a port of its choosing.
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: bob.namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "docker.io/" + bobImage + strings.Repeat("b0", 32)}}}})
	persistentVolume(t, "hostile-pv-"+o.platform)
	testenv.GrantNodes(t, env.Client, "docker.io", o.platform, "hub")
	o.hub = mirror(o.platform, "hub", "https://registry-1.docker.io", true)
	o.hub.Spec.HostPort = ptr.To(int32(hostilePort))
	create(t, o.hub)
	eventually(t, 2*time.Minute, "the platform's mirror on the nodes, pinning bob's image", func() bool {
		return mirrorCondition(t, o.hub, mirrorsv1alpha1.ConditionNodeAccess).Status == metav1.ConditionTrue &&
			strings.Contains(configMapData(t, o.platform, "hub-registry-config")["pinned-images"], bobImage)
	})

	// The admin's ChaosAgent over bob's and mallory's namespaces: two of bob's pods run, it
	// tolerates three.
	chaos := "hostile-chaos-" + strings.ToLower(mallory.namespace[len(mallory.namespace)-5:])
	for _, ns := range []string{bob.namespace, mallory.namespace} {
		labelNamespace(t, ns, chaos)
	}
	dep := testenv.Deployment(bob.namespace, "web", 2)
	dep.Spec.Selector.MatchLabels["app"] = "hostile-web"
	dep.Spec.Template.Labels["app"] = "hostile-web"
	create(t, dep)
	eventually(t, time.Minute, "bob's two pods running", func() bool { return len(o.runningPods(t)) == 2 })
	o.bobPods = o.runningPods(t)
	o.agent = chaosAgent("hostile-"+chaos[len(chaos)-5:], chaos, func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.TantrumMode, s.PodTolerance = true, 3
		s.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "hostile-web"}}
	})
	create(t, o.agent)
	t.Cleanup(func() { forceDelete(o.agent) })
	eventually(t, time.Minute, "the agent's first rounds", func() bool { return o.agentRounds(t) >= 2 })
	o.bobsPodsUntouched(t)
	return o
}

// copiesReachANewNamespace: a namespace labelled for the platform rule gets its copy within 30 s.
func (o *hostileOthers) copiesReachANewNamespace(t *testing.T) {
	t.Helper()
	ns := namespace(t, "hostile-dst", map[string]string{"hostile-dst": "true"})
	took := eventually(t, 30*time.Second, "the platform's copy in a new namespace", func() bool {
		return configMapData(t, ns, "company-ca")["ca.crt"] == "PEM"
	})
	t.Logf("the platform's copy reached a new namespace in %s", took.Round(time.Millisecond))
}

// changeSource sets the platform source's key rev to rev and waits until every copy of the
// platform rule has it and the rule's status says its copies are in sync.
func (o *hostileOthers) changeSource(t *testing.T, rev string) {
	t.Helper()
	ctx := context.Background()
	src := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: o.platform, Name: "company-ca"}, src))
	patch := client.MergeFrom(src.DeepCopy())
	src.Data["rev"] = rev
	require.NoError(t, env.Client.Patch(ctx, src, patch))
	// The status said the copies were in sync before the change too, so it alone would be
	// met at once, before any pass saw the change: the copies carrying rev are what only a
	// pass after the change writes. (The UID leaves out mallory's forged look-alike.)
	rule := client.MatchingLabels{copyratorrule.LabelRule: o.rule.Name, copyratorrule.LabelRuleNamespace: o.platform,
		copyratorrule.LabelRuleUID: string(o.rule.UID)}
	eventually(t, time.Minute, "the platform's rule past the source change", func() bool {
		copies := &corev1.ConfigMapList{}
		require.NoError(t, env.Client.List(ctx, copies, rule))
		for _, c := range copies.Items {
			if c.Data["rev"] != rev {
				return false
			}
		}
		st := o.ruleStatus(t)
		return len(copies.Items) > 0 &&
			testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason != flantv1.ReasonCopiesPending && st.CopiesInSync > 0
	})
}

// ruleStatus returns the platform rule's status as it is now.
func (o *hostileOthers) ruleStatus(t *testing.T) flantv1.CopyratorRuleStatus {
	t.Helper()
	cur := &flantv1.CopyratorRule{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(o.rule), cur))
	return cur.Status
}

func (o *hostileOthers) runningPods(t *testing.T) map[types.UID]bool {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(context.Background(), pods, client.InNamespace(o.bob.namespace),
		client.MatchingLabels{"app": "hostile-web"}))
	out := map[types.UID]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.UID] = true
		}
	}
	return out
}

func (o *hostileOthers) agentRounds(t *testing.T) int64 {
	t.Helper()
	cur := &blackadderv1beta1.ChaosAgent{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(o.agent), cur))
	return cur.Status.Rounds
}

// bobsPodsUntouched: the agent killed nothing, and bob's pods are the ones that ran before.
func (o *hostileOthers) bobsPodsUntouched(t *testing.T) {
	t.Helper()
	cur := &blackadderv1beta1.ChaosAgent{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(o.agent), cur))
	assert.Zero(t, cur.Status.Counts.PodsKilled, "two running pods are within the tolerance of three")
	assert.Equal(t, o.bobPods, o.runningPods(t), "bob's pods are the same")
}

// consent lets the rules of namespace from (as the default ServiceAccount) copy into ns:
// the owner of ns's RoleBinding.
func consent(t *testing.T, ns, from string) {
	t.Helper()
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "copies-from-" + from, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: testenv.CopyTargetRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: from, Name: copyratorrule.DefaultServiceAccountName}}})
}

// labelNamespace sets key=true on namespace ns (a cluster admin's step).
func labelNamespace(t *testing.T, ns, key string) {
	t.Helper()
	cur := &corev1.Namespace{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: ns}, cur))
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	cur.Labels[key] = "true"
	require.NoError(t, env.Client.Patch(context.Background(), cur, patch))
}
