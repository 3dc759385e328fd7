package olm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/realnode"
)

const (
	// upgradeNS holds the 0.2.0 install; its OperatorGroup targets the three tenants and
	// kube-system, so a rule with no namespaces reaches all four.
	upgradeNS = "quartet-upgrade"
	// tenantA owns the rule, its source and a mirror; tenantB never consents; tenantC's owner
	// consents before the upgrade, as the 0.3.0 notes ask (docs/OLM.md, Upgrades).
	tenantA = "upgrade-tenant-a"
	tenantB = "upgrade-tenant-b"
	tenantC = "upgrade-tenant-c"
	// upgradeSource is tenantA's ConfigMap the sample rule copies (label copyrator: "true").
	upgradeSource = "team-settings"
	// upgradeHost is the mirror's upstream host: nothing answers there, and no image the node
	// pulls comes from it, so 0.2.0's hosts.toml for it changes no pull of the run.
	upgradeHost = "registry.upgrade.invalid"
)

// TestUpgradeFrom020AsksForConsent upgrades 0.2.0, running its own released code, to 0.3.0
// with what 0.2.0 allowed and 0.3.0 does not: a tenant's rule with no namespaces copied into
// another tenant's namespace and into kube-system, asked by no one, and a tenant's mirror put
// node agents on every node. After the upgrade, 0.3.0 tells the owners what is missing (the
// rule's Authorized condition and status.refused, a CopyRefused Warning per namespace; the
// mirror's NodeAccess condition), leaves the copy in the unconsenting namespace as it is but
// no longer updates it, removes the copy from protected kube-system and the mirror's node
// agents; once the cluster admin takes the documented steps (a ClusterRoleBinding of
// quartet-copyrator-target, a RegistryHostGrant) the copies resume and the agents come back.
func TestUpgradeFrom020AsksForConsent(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	c := env.Client

	require.NoError(t, env.DeleteQuartetCRDs(ctx), "a cluster that runs 0.2.0 has 0.2.0's CRDs")
	since := time.Now()
	// The node agents write containerd's hosts.toml into the real node's own directory. A
	// refused namespace is asked again every 5 s instead of every minute (the flag
	// --copyratorrule-consent-recheck, as an admin would set it through the Subscription;
	// 0.2.0 has no such flag and ignores it): the consent below takes effect within that.
	cfg := &operatorsv1alpha1.SubscriptionConfig{Env: []corev1.EnvVar{
		{Name: "QUARTET_REGISTRYMIRROR_CONTAINERD_HOSTS_DIR", Value: env.Cluster.Node.CertsDir},
		{Name: "QUARTET_COPYRATORRULE_CONSENT_RECHECK", Value: "5s"}}}
	require.NoError(t, env.Subscribe(ctx, realnode.Install{Namespace: upgradeNS, Targets: []string{tenantA, tenantB, tenantC, "kube-system"},
		StartingCSV: realnode.ReleasedCSV, Manual: true, Config: cfg}))
	_, err := env.ApproveInstallPlan(ctx, upgradeNS, realnode.ReleasedCSV)
	require.NoError(t, err)
	require.NoError(t, env.WaitCSVSucceeded(ctx, upgradeNS, realnode.ReleasedCSV, 5*time.Minute))
	timings.Add("install 0.2.0 (released code): resolve, unpack Job, approve, CSV Succeeded", since)
	oldPod := requireManagerReady(t, upgradeNS, realnode.ReleasedOperatorImage)
	requireBundleUnpackedByJobs(t, "quartet-bundle:v0.2.0")

	// tenantC's owner consents ahead of the upgrade: a RoleBinding of the ClusterRole that
	// 0.3.0 brings (RBAC lets a binding name a role that does not exist yet).
	consentC := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "copies-from-" + tenantA, Namespace: tenantC},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: copyratorrule.TargetClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tenantA, Name: copyratorrule.DefaultServiceAccountName}},
	}
	require.NoError(t, c.Create(ctx, consentC))

	// What 0.2.0 did for any namespace editor: the sample rule (no namespaces: every
	// namespace) copies into the other tenants' namespaces and into kube-system.
	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: upgradeSource, Namespace: tenantA, Labels: map[string]string{"copyrator": "true"}},
		Data:       map[string]string{"greeting": "hello from 0.2.0"},
	}
	require.NoError(t, c.Create(ctx, source))
	rule := &flantv1.CopyratorRule{}
	require.NoError(t, env.Sample("flant_v1_copyratorrule.yaml", rule, tenantA))
	require.Empty(t, rule.Spec.Namespaces, "the sample rule copies into every namespace")
	require.NoError(t, c.Create(ctx, rule))
	require.NoError(t, env.WaitCopies(ctx, rule, upgradeSource, []string{tenantB, tenantC, "kube-system"}, 2*time.Minute))
	frozen := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: tenantB, Name: upgradeSource}, frozen))
	t.Logf("0.2.0: rule %s/%s copied %s into %s, %s and kube-system, asked by no one", tenantA, rule.Name, upgradeSource, tenantB, tenantC)

	// And a tenant's mirror got node agents on every node.
	mirror := &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Name: "team-cache", Namespace: tenantA},
		Spec:       mirrorsv1alpha1.RegistryMirrorSpec{Upstream: "https://" + upgradeHost, Storage: resource.MustParse("1Gi"), ConfigureNodes: true},
	}
	require.NoError(t, c.Create(ctx, mirror))
	ds := waitNodeAgents(t, mirror, true)
	t.Logf("0.2.0: mirror %s/%s has DaemonSet %s (%d/%d node agents ready), no one's consent asked", tenantA, mirror.Name, ds.Name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)

	// The upgrade, approved as 0.2.0 left things.
	since = time.Now()
	steps, err := env.ApproveInstallPlan(ctx, upgradeNS, realnode.NewCSV)
	require.NoError(t, err)
	t.Logf("InstallPlan for %s: %d steps: %s", realnode.NewCSV, len(steps), strings.Join(steps, ", "))
	require.NoError(t, env.WaitCSVSucceeded(ctx, upgradeNS, realnode.NewCSV, 5*time.Minute))
	require.NoError(t, realnode.WaitFor(ctx, "CSV "+realnode.ReleasedCSV+" removed", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: upgradeNS, Name: realnode.ReleasedCSV}, &operatorsv1alpha1.ClusterServiceVersion{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	}))
	timings.Add("upgrade 0.2.0 to 0.3.0: approve, unpack Job, CSV Succeeded, 0.2.0 gone", since)
	newPod := requireManagerReady(t, upgradeNS, realnode.OperatorImage)
	require.NotEqual(t, oldPod.UID, newPod.UID, "the manager pod is replaced")

	// The rule's owner is told, in status and Events, which namespaces refuse and why.
	since = time.Now()
	r := waitRuleRefusals(t, rule, map[string]string{
		tenantB:       fmt.Sprintf("ServiceAccount %s/%s may not create configmaps in namespace %s", tenantA, copyratorrule.DefaultServiceAccountName, tenantB),
		"kube-system": "namespace kube-system is protected",
	})
	authorized := meta.FindStatusCondition(r.Status.Conditions, flantv1.ConditionAuthorized)
	t.Logf("0.3.0: rule %s/%s Authorized=%s %s: %s", tenantA, rule.Name, authorized.Status, authorized.Reason, authorized.Message)
	for _, ns := range []string{tenantB, "kube-system"} {
		e := waitRuleEvent(t, rule, copyratorrule.EventCopyRefused, "No copies in "+ns+":")
		t.Logf("0.3.0: Event %s %s on %s/%s: %s", e.Type, e.Reason, tenantA, rule.Name, e.Note)
	}
	// The copy in protected kube-system is removed; the one in tenantB stays as it was.
	require.NoError(t, realnode.WaitFor(ctx, "the copy in kube-system removed", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: upgradeSource}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	}))
	timings.Add("0.3.0: refusals in status and Events, kube-system's copy removed", since)

	// A change of the source reaches the consenting tenantC, not tenantB: its copy is frozen.
	patch := client.MergeFrom(source.DeepCopy())
	source.Data["greeting"] = "hello from 0.3.0"
	require.NoError(t, c.Patch(ctx, source, patch))
	waitCopyData(t, tenantC, "hello from 0.3.0", time.Minute)
	got := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: tenantB, Name: upgradeSource}, got))
	require.Equal(t, frozen.UID, got.UID, "the copy in %s is the one 0.2.0 made", tenantB)
	require.Equal(t, "hello from 0.2.0", got.Data["greeting"], "the copy in %s is no longer updated", tenantB)
	t.Logf("0.3.0: the source's change reached %s; the copy in %s still says %q", tenantC, tenantB, got.Data["greeting"])

	// The mirror's node agents are gone, and the mirror says why.
	waitNodeAgents(t, mirror, false)
	access := waitNodeAccess(t, mirror, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant)
	t.Logf("0.3.0: mirror %s/%s has no DaemonSet; NodeAccess=%s %s: %s", tenantA, mirror.Name, access.Status, access.Reason, access.Message)

	// The cluster admin's steps (docs/INSTALL.md): the rules of tenantA may copy everywhere,
	// the mirror may serve the nodes for its host.
	since = time.Now()
	bindings, err := env.ConsentToCopies(ctx, "copyrator-"+tenantA, tenantA, copyratorrule.DefaultServiceAccountName)
	require.NoError(t, err)
	grant, err := env.GrantNodes(ctx, strings.ReplaceAll(upgradeHost, ".", "-"), mirrorsv1alpha1.RegistryHostGrantSpec{
		Host: upgradeHost, Mirror: mirrorsv1alpha1.MirrorReference{Namespace: tenantA, Name: mirror.Name}})
	require.NoError(t, err)
	// Copies resume in tenantB (within the consent recheck interval); kube-system, protected,
	// still needs its own label, which this admin did not set.
	waitCopyData(t, tenantB, "hello from 0.3.0", 3*time.Minute)
	waitRuleRefusals(t, rule, map[string]string{"kube-system": "namespace kube-system is protected"})
	err = c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: upgradeSource}, &corev1.ConfigMap{})
	require.True(t, apierrors.IsNotFound(err), "no copy in kube-system: %v", err)
	ds = waitNodeAgents(t, mirror, true)
	waitNodeAccess(t, mirror, metav1.ConditionTrue, mirrorsv1alpha1.ReasonGranted)
	require.Equal(t, realnode.OperatorImage, ds.Spec.Template.Spec.Containers[0].Image, "the node agents run 0.3.0's image")
	timings.Add("0.3.0: after the admin's consent, copies resume and node agents return", since)
	t.Logf("after the admin's consent: the copy in %s follows the source again; mirror %s/%s has DaemonSet %s again", tenantB, tenantA, mirror.Name, ds.Name)

	// Remove the CRs while the manager runs (finalizers), the consents, then the install.
	for _, o := range []client.Object{rule, mirror, grant} {
		require.NoError(t, c.Delete(ctx, o))
	}
	require.NoError(t, env.DeleteAll(ctx, append(bindings, consentC, source)...))
	for _, o := range []client.Object{rule, mirror, grant} {
		require.NoError(t, realnode.WaitFor(ctx, "deletion of "+o.GetName(), 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		}))
	}
	require.NoError(t, env.Uninstall(ctx, upgradeNS))
}

// waitRuleRefusals waits until the rule says Authorized=False TargetsRefused for its current
// generation and lists exactly the namespaces of want as refused, each with a reason that
// contains want's text, and returns the rule.
func waitRuleRefusals(t *testing.T, rule *flantv1.CopyratorRule, want map[string]string) *flantv1.CopyratorRule {
	t.Helper()
	r := &flantv1.CopyratorRule{}
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("rule %s/%s refused by %d namespaces", rule.Namespace, rule.Name, len(want)), 3*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rule), r); err != nil {
				return false, "", err
			}
			detail := fmt.Sprintf("refused %d %+v; conditions %+v", r.Status.RefusedCount, r.Status.Refused, r.Status.Conditions)
			c := meta.FindStatusCondition(r.Status.Conditions, flantv1.ConditionAuthorized)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != flantv1.ReasonTargetsRefused || c.ObservedGeneration != r.Generation {
				return false, detail, nil
			}
			if int(r.Status.RefusedCount) != len(want) || len(r.Status.Refused) != len(want) {
				return false, detail, nil
			}
			for _, ref := range r.Status.Refused {
				if w, ok := want[ref.Namespace]; !ok || !strings.Contains(ref.Reason, w) {
					return false, detail, nil
				}
			}
			return true, detail, nil
		}))
	return r
}

// waitRuleEvent waits for an Event about the rule with the reason whose note contains note.
func waitRuleEvent(t *testing.T, rule *flantv1.CopyratorRule, reason, note string) *eventsv1.Event {
	t.Helper()
	var found *eventsv1.Event
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("Event %s %q on rule %s", reason, note, rule.Name), time.Minute,
		func(ctx context.Context) (bool, string, error) {
			events := &eventsv1.EventList{}
			if err := env.Client.List(ctx, events, client.InNamespace(rule.Namespace)); err != nil {
				return false, "", err
			}
			var seen []string
			for i, e := range events.Items {
				if e.Regarding.Kind != "CopyratorRule" || e.Regarding.Name != rule.Name {
					continue
				}
				seen = append(seen, e.Reason+": "+e.Note)
				if e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, note) {
					found = &events.Items[i]
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("the rule's Events: %v", seen), nil
		}))
	return found
}

// waitCopyData waits until the copy of upgradeSource in ns says greeting.
func waitCopyData(t *testing.T, ns, greeting string, timeout time.Duration) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("the copy in %s saying %q", ns, greeting), timeout,
		func(ctx context.Context) (bool, string, error) {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: upgradeSource}, cm); err != nil {
				return false, "", err
			}
			return cm.Data["greeting"] == greeting, fmt.Sprint(cm.Data), nil
		}))
}

// waitNodeAgents waits until the mirror's node agent DaemonSet (one it controls) exists and
// is scheduled on the node, or until it is gone; it returns the DaemonSet when present.
func waitNodeAgents(t *testing.T, mirror *mirrorsv1alpha1.RegistryMirror, present bool) *appsv1.DaemonSet {
	t.Helper()
	var found *appsv1.DaemonSet
	what := map[bool]string{true: "running", false: "gone"}[present]
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("node agents of mirror %s/%s %s", mirror.Namespace, mirror.Name, what), 3*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			m := &mirrorsv1alpha1.RegistryMirror{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mirror), m); err != nil {
				return false, "", err
			}
			list := &appsv1.DaemonSetList{}
			if err := env.Client.List(ctx, list, client.InNamespace(mirror.Namespace)); err != nil {
				return false, "", err
			}
			found = nil
			var names []string
			for i := range list.Items {
				if metav1.IsControlledBy(&list.Items[i], m) {
					found = &list.Items[i]
					names = append(names, found.Name)
				}
			}
			if !present {
				return found == nil, fmt.Sprintf("DaemonSets of the mirror: %v", names), nil
			}
			if found == nil {
				return false, "no DaemonSet of the mirror yet; " + env.PodProblems(ctx, mirror.Namespace), nil
			}
			st := found.Status
			return st.ObservedGeneration == found.Generation && st.DesiredNumberScheduled > 0 && st.UpdatedNumberScheduled == st.DesiredNumberScheduled,
				fmt.Sprintf("DaemonSet %s: %d desired, %d updated, %d ready; %s", found.Name, st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady,
					env.PodProblems(ctx, mirror.Namespace)), nil
		}))
	return found
}

// waitNodeAccess waits until the mirror's NodeAccess condition has the status and reason.
func waitNodeAccess(t *testing.T, mirror *mirrorsv1alpha1.RegistryMirror, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("mirror %s/%s NodeAccess=%s %s", mirror.Namespace, mirror.Name, status, reason), 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			m := &mirrorsv1alpha1.RegistryMirror{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mirror), m); err != nil {
				return false, "", err
			}
			c := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionNodeAccess)
			if c == nil {
				return false, fmt.Sprintf("conditions %+v", m.Status.Conditions), nil
			}
			got = *c
			return c.Status == status && c.Reason == reason, fmt.Sprintf("NodeAccess=%s %s: %s", c.Status, c.Reason, c.Message), nil
		}))
	return got
}
