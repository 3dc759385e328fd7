package olm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/realnode"
)

const (
	installNS = "quartet-system"
	targetNS  = "quartet-e2e-target"
	// sharedConfigMap is what the sample CopyratorRule copies (label copyrator: "true").
	sharedConfigMap = "e2e-shared-settings"
)

// TestInstallUpgradeAndTheFourControllers installs 0.1.0 from the catalog image with manual
// approval (MultiNamespace: the install namespace and one more), drives the samples of
// config/samples through the in-cluster manager (0.2.0's released code, which asks for no
// consent), takes the cluster admin's steps before the upgrade as docs/INSTALL.md says (the
// RegistryHostGrant CRD and the sample grant for the mirror, a ClusterRoleBinding for the
// rule's ServiceAccount, the accept-copies label on the protected operator namespace),
// upgrades (OLM goes straight to the channel head, 0.3.0, which skips 0.1.0) and checks that
// the manager pod was replaced, every CR survived, nothing is refused and the four
// controllers act.
func TestInstallUpgradeAndTheFourControllers(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	c := env.Client

	require.NoError(t, env.DeleteQuartetCRDs(ctx), "0.1.0 installs only where newer CRDs are gone")
	since := time.Now()
	require.NoError(t, env.Subscribe(ctx, realnode.Install{Namespace: installNS, Targets: []string{installNS, targetNS},
		StartingCSV: realnode.OldCSV, Manual: true, Config: managerConfig()}))
	steps, err := env.ApproveInstallPlan(ctx, installNS, realnode.OldCSV)
	require.NoError(t, err)
	t.Logf("InstallPlan for %s: %d steps: %s", realnode.OldCSV, len(steps), strings.Join(steps, ", "))
	require.NoError(t, env.WaitCSVSucceeded(ctx, installNS, realnode.OldCSV, 5*time.Minute))
	timings.Add("install 0.1.0: resolve, unpack Job, approve, CSV Succeeded", since)
	oldPod := requireManagerReady(t, installNS, realnode.OldOperatorImage)
	requireBundleUnpackedByJobs(t, "quartet-bundle:v0.1.0")
	require.ElementsMatch(t, []string{installNS, targetNS}, strings.Split(oldPod.Annotations["olm.targetNamespaces"], ","),
		"OLM hands the OperatorGroup's targets to the manager (WATCH_NAMESPACE)")

	// The samples users apply, unchanged, reconciled by the in-cluster 0.1.0 manager (0.2.0's
	// code: it copies and puts mirrors on the nodes without anyone's consent).
	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: sharedConfigMap, Namespace: targetNS, Labels: map[string]string{"copyrator": "true"}},
		Data:       map[string]string{"greeting": "hello from 0.1.0"},
	}
	require.NoError(t, c.Create(ctx, source))
	rule := &flantv1.CopyratorRule{}
	require.NoError(t, env.Sample("flant_v1_copyratorrule.yaml", rule, targetNS))
	require.NoError(t, c.Create(ctx, rule))
	rate := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Sample("operators_v1_exchangerate.yaml", rate, targetNS))
	require.NoError(t, c.Create(ctx, rate))
	mirror := &mirrorsv1alpha1.RegistryMirror{}
	require.NoError(t, env.Sample("mirrors_v1alpha1_registrymirror.yaml", mirror, targetNS))
	require.NoError(t, c.Create(ctx, mirror))
	agent, err := env.UnstructuredSample("blackadder_v1alpha1_chaosagent.yaml")
	require.NoError(t, err)
	require.NoError(t, c.Create(ctx, agent), "0.1.0 serves ChaosAgents as v1alpha1 only")

	// The only other watched namespace is the operator's own: 0.1.0 copies there unasked.
	require.NoError(t, env.WaitCopies(ctx, rule, sharedConfigMap, []string{installNS}, 2*time.Minute))
	usd, err := env.WaitExchangeRate(ctx, targetNS, rate.Name, 2*time.Minute)
	require.NoError(t, err)
	t.Logf("0.1.0: ConfigMap %s/%s rate=%s (from %s over the pod network)", targetNS, rate.Name, usd, ratesURL)
	// The sample mirrors Docker Hub, which this offline machine cannot reach: the mirror's
	// pods run and its registry answers, and its status says the upstream never answered.
	require.NoError(t, env.WaitMirrorOfflineUpstream(ctx, targetNS, mirror.Name, 3*time.Minute))
	// The mirror's operands run 0.1.0's operator image (node agent, credential helper) and
	// keep their cache on a PVC.
	require.NotEmpty(t, podsRunning(t, targetNS, realnode.OldOperatorImage), "the mirror's pods run 0.1.0's operator image")
	cacheBefore := pvcUIDs(t, targetNS)
	require.NotEmpty(t, cacheBefore, "the mirror's cache PVC")
	uids := map[string]types.UID{}
	for _, o := range []client.Object{rule, rate, mirror, agent} {
		uids[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName()] = o.GetUID()
	}

	// Before approving the upgrade, the cluster admin gives the consents 0.3.0 asks for, as
	// docs/INSTALL.md says for OLM: the RegistryHostGrant CRD (the upgrade updates it in
	// place) and the sample grant for the mirror (in targetNS here, where the samples go,
	// instead of registry-mirrors); the rule's ServiceAccount may copy everywhere (a
	// ClusterRoleBinding of the ClusterRole the upgrade brings); the protected operator
	// namespace accepts copies.
	grantCRD, err := os.ReadFile(filepath.Join(env.Root, "config", "crd", "bases", "mirrors.quartet.dev_registryhostgrants.yaml"))
	require.NoError(t, err)
	require.NoError(t, env.ApplyYAML(ctx, grantCRD, nil))
	grant := &mirrorsv1alpha1.RegistryHostGrant{}
	require.NoError(t, env.Sample("mirrors_v1alpha1_registryhostgrant.yaml", grant, ""))
	grant.Spec.Mirror.Namespace = targetNS
	require.NoError(t, realnode.WaitFor(ctx, "RegistryHostGrant "+grant.Name+" created", time.Minute, func(ctx context.Context) (bool, string, error) {
		err := c.Create(ctx, grant) // the CRD is established within a moment
		return err == nil || apierrors.IsAlreadyExists(err), "", err
	}))
	bindings := []client.Object{&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "copyrator-platform"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: copyratorrule.TargetClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: targetNS, Name: copyratorrule.DefaultServiceAccountName}},
	}}
	require.NoError(t, c.Create(ctx, bindings[0]))
	require.NoError(t, env.AcceptCopies(ctx, installNS))
	t.Logf("the admin's consent before the upgrade: ClusterRoleBinding %s (%s to ServiceAccount %s/%s); RegistryHostGrant %s (%s to %s/%s, %v); %s labelled %s=true",
		bindings[0].GetName(), copyratorrule.TargetClusterRole, targetNS, copyratorrule.DefaultServiceAccountName,
		grant.Name, grant.Spec.Host, grant.Spec.Mirror.Namespace, grant.Spec.Mirror.Name, grant.Spec.Capabilities, installNS, copyratorrule.LabelAcceptCopies)

	// Upgrade: OLM replaces 0.1.0 with the channel head 0.3.0, which skips it (and moves the
	// ChaosAgent CRD's storage version).
	since = time.Now()
	steps, err = env.ApproveInstallPlan(ctx, installNS, realnode.NewCSV)
	require.NoError(t, err)
	t.Logf("InstallPlan for %s: %d steps: %s", realnode.NewCSV, len(steps), strings.Join(steps, ", "))
	require.NoError(t, env.WaitCSVSucceeded(ctx, installNS, realnode.NewCSV, 5*time.Minute))
	require.NoError(t, realnode.WaitFor(ctx, "CSV "+realnode.OldCSV+" removed", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: realnode.OldCSV}, &operatorsv1alpha1.ClusterServiceVersion{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	}))
	timings.Add("upgrade 0.1.0 to 0.3.0: approve, unpack Job, CSV Succeeded, 0.1.0 gone", since)
	newPod := requireManagerReady(t, installNS, realnode.OperatorImage)
	require.NotEqual(t, oldPod.UID, newPod.UID, "the manager pod is replaced")
	requireBundleUnpackedByJobs(t, "quartet-bundle:v0.3.0")
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: copyratorrule.TargetClusterRole}, &rbacv1.ClusterRole{}), "the upgrade brings the ClusterRole the binding names")

	// Every CR survived the upgrade; the ChaosAgent reads as v1beta1.
	for _, o := range []client.Object{&flantv1.CopyratorRule{}, &operatorsv1.ExchangeRate{}, &mirrorsv1alpha1.RegistryMirror{}} {
		key := client.ObjectKey{Namespace: targetNS}
		switch o.(type) {
		case *flantv1.CopyratorRule:
			key.Name = rule.Name
		case *operatorsv1.ExchangeRate:
			key.Name = rate.Name
		case *mirrorsv1alpha1.RegistryMirror:
			key.Name = mirror.Name
		}
		require.NoError(t, c.Get(ctx, key, o))
	}
	edmund := &blackadderv1beta1.ChaosAgent{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: agent.GetName()}, edmund))
	require.Equal(t, uids["ChaosAgent/"+agent.GetName()], edmund.UID, "the same object, read through v1beta1")
	require.True(t, edmund.Spec.TantrumMode)
	require.EqualValues(t, 10, edmund.Spec.PodTolerance)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "chaosagents.blackadder.io"}, crd))
	for _, v := range crd.Spec.Versions {
		require.True(t, v.Served, v.Name)
		require.Equal(t, v.Name == "v1beta1", v.Storage, v.Name)
	}

	// The 0.3.0 manager acts, with the consents given before: nothing is refused, a source
	// change reaches the copy, the rate is kept, the mirror serves, and the v1alpha1 agent
	// from 0.1.0 runs rounds now.
	requireAuthorized(t, rule)
	patch := client.MergeFrom(source.DeepCopy())
	source.Data["greeting"] = "hello from 0.3.0"
	require.NoError(t, c.Patch(ctx, source, patch))
	require.NoError(t, realnode.WaitFor(ctx, "the copy in "+installNS+" follows the source", time.Minute, func(ctx context.Context) (bool, string, error) {
		cp := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: sharedConfigMap}, cp); err != nil {
			return false, "", err
		}
		return cp.Data["greeting"] == "hello from 0.3.0", fmt.Sprint(cp.Data), nil
	}))
	// Ready=True and the rate are there from 0.1.0's manager, so waiting for them would
	// prove nothing of 0.3.0's: wait for its own status write, the first with a Divergent
	// condition (0.1.0 has none), and the rate kept in it and in the ConfigMap.
	require.NoError(t, realnode.WaitFor(ctx, "0.3.0's status of ExchangeRate "+rate.Name+", the rate kept", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		er := &operatorsv1.ExchangeRate{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rate), er); err != nil {
			return false, "", err
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rate), cm); err != nil {
			return false, "", err
		}
		written := meta.FindStatusCondition(er.Status.Conditions, operatorsv1.ConditionDivergent) != nil
		ready := meta.FindStatusCondition(er.Status.Conditions, operatorsv1.ConditionReady)
		ok := written && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == er.Generation &&
			er.Status.Rate == usd && cm.Data["rate"] == usd
		return ok, fmt.Sprintf("conditions %+v; status rate %q, ConfigMap %v", er.Status.Conditions, er.Status.Rate, cm.Data), nil
	}))
	require.NoError(t, env.WaitMirrorOfflineUpstream(ctx, targetNS, mirror.Name, 2*time.Minute))
	// 0.1.0's manager ran the agent's rounds too: wait for one more, 0.3.0's (edmund was read
	// once 0.1.0's manager was gone).
	_, err = env.WaitChaosRounds(ctx, agent.GetName(), edmund.Status.Rounds+1, 2*time.Minute)
	require.NoError(t, err)

	// A chaos round in dry run: every action recorded, none taken. The upgrade changed the
	// mirror's operator image (node agent, credential helper init container), so its pods
	// roll first: wait until that is over, or the rollout would look like kills. The
	// workloads look settled before 0.3.0's manager has changed them too (0.1.0's pods, all
	// ready): wait for its change of their templates first.
	waitTemplatesUse(t, targetNS, realnode.OperatorImage, realnode.OldOperatorImage)
	waitSettled(t, targetNS)
	// The operands were upgraded with the operator: every pod of the mirror now runs
	// 0.3.0's operator image, none 0.1.0's, and the cache is the same PVC.
	require.Empty(t, podsRunning(t, targetNS, realnode.OldOperatorImage), "no operand runs 0.1.0's image after the upgrade")
	require.NotEmpty(t, podsRunning(t, targetNS, realnode.OperatorImage), "the mirror's pods run 0.3.0's operator image")
	require.Equal(t, cacheBefore, pvcUIDs(t, targetNS), "the mirror's cache PVC survived the upgrade")
	podsBefore := podUIDs(t, targetNS)
	dry := &blackadderv1beta1.ChaosAgent{}
	require.NoError(t, env.Sample("blackadder_v1beta1_chaosagent.yaml", dry, ""))
	dry.Name, dry.Spec.DryRun, dry.Spec.PodTolerance, dry.Spec.Eagerness, dry.Spec.PauseDuration = "dry-run-edmund", true, 0, 100, 5
	require.NoError(t, c.Create(ctx, dry))
	dry, err = env.WaitChaosRounds(ctx, dry.Name, 1, 2*time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, dry.Status.LastActions, "a dry-run round over %s records what it would do", targetNS)
	for _, a := range dry.Status.LastActions {
		require.True(t, a.DryRun, "%+v", a)
	}
	t.Logf("dry-run round: %d actions recorded, e.g. %+v", len(dry.Status.LastActions), dry.Status.LastActions[0])
	require.Equal(t, podsBefore, podUIDs(t, targetNS), "dry run kills nothing")

	t.Run("security at run time", func(t *testing.T) { testRuntimeSecurity(t, newPod) })
	t.Run("metrics over HTTPS with authentication and authorization", func(t *testing.T) { testMetricsAccess(t, installNS) })

	// Remove the CRs while the manager still runs (finalizers restore chaos and clean up
	// copies), then uninstall.
	for _, o := range []client.Object{dry, edmund, rule, mirror, rate} {
		require.NoError(t, c.Delete(ctx, o))
	}
	require.NoError(t, env.DeleteAll(ctx, append(bindings, grant)...))
	for _, o := range []client.Object{dry, edmund, rule, mirror, rate, grant} {
		require.NoError(t, realnode.WaitFor(ctx, "deletion of "+o.GetName(), 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		}))
	}
	since = time.Now()
	require.NoError(t, env.Uninstall(ctx, installNS))
	timings.Add("uninstall (Subscription, CSV, OperatorGroup deleted; manager gone)", since)
}

// requireAuthorized waits until the rule says, for its current generation, that every
// namespace it selects consents (Authorized=True, nothing refused).
func requireAuthorized(t *testing.T, rule *flantv1.CopyratorRule) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), "CopyratorRule "+rule.Name+" authorized everywhere", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		r := &flantv1.CopyratorRule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rule), r); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(r.Status.Conditions, flantv1.ConditionAuthorized)
		ok := c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == r.Generation && r.Status.RefusedCount == 0
		return ok, fmt.Sprintf("refused %d %+v; conditions %+v", r.Status.RefusedCount, r.Status.Refused, r.Status.Conditions), nil
	}))
}

// requireManagerReady checks the manager runs the image, passed its readiness probe and
// runs as the ServiceAccount OLM created from the CSV.
func requireManagerReady(t *testing.T, ns, image string) *corev1.Pod {
	t.Helper()
	pod, err := env.ManagerPod(context.Background(), ns)
	require.NoError(t, err)
	main := pod.Spec.Containers[0]
	require.Equal(t, image, main.Image)
	require.NotNil(t, main.ReadinessProbe, "OLM's Succeeded rests on the readiness probe")
	ready := false
	for _, c := range pod.Status.Conditions {
		ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	require.True(t, ready, "manager pod %s Ready", pod.Name)
	require.Equal(t, "quartet-controller-manager", pod.Spec.ServiceAccountName)
	t.Logf("manager pod %s/%s: image %s, Ready, ServiceAccount %s, node %s", ns, pod.Name, main.Image, pod.Spec.ServiceAccountName, pod.Spec.NodeName)
	return pod
}

// requireBundleUnpackedByJobs proves OLM unpacked the bundle with its real Job: the Job
// Succeeded and its pod ran the bundle image (the "pull" init container).
func requireBundleUnpackedByJobs(t *testing.T, bundle string) {
	t.Helper()
	ctx := context.Background()
	jobs := &batchv1.JobList{}
	require.NoError(t, env.Client.List(ctx, jobs, client.InNamespace(realnode.OLMNamespace), client.HasLabels{"operatorframework.io/bundle-unpack-ref"}))
	for _, j := range jobs.Items {
		for _, ic := range j.Spec.Template.Spec.InitContainers {
			if ic.Name == "pull" && strings.HasSuffix(ic.Image, bundle) {
				require.EqualValues(t, 1, j.Status.Succeeded, "unpack Job %s", j.Name)
				t.Logf("bundle %s unpacked by Job %s/%s (pod pulled the image; %d succeeded)", ic.Image, j.Namespace, j.Name, j.Status.Succeeded)
				return
			}
		}
	}
	t.Fatalf("no unpack Job ran bundle image *%s", bundle)
}

// waitSettled waits until every StatefulSet and DaemonSet in ns is rolled out and no pod
// there is terminating.
func waitSettled(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), "the workloads in "+ns+" rolled out", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		stss := &appsv1.StatefulSetList{}
		dss := &appsv1.DaemonSetList{}
		pods := &corev1.PodList{}
		for _, l := range []client.ObjectList{stss, dss, pods} {
			if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, "", err
			}
		}
		for _, s := range stss.Items {
			if s.Status.ObservedGeneration < s.Generation || s.Status.CurrentRevision != s.Status.UpdateRevision || s.Status.ReadyReplicas != ptr.Deref(s.Spec.Replicas, 1) {
				return false, "StatefulSet " + s.Name + " rolling out", nil
			}
		}
		for _, d := range dss.Items {
			st := d.Status
			if st.ObservedGeneration < d.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberAvailable != st.DesiredNumberScheduled || st.NumberMisscheduled > 0 {
				return false, "DaemonSet " + d.Name + " rolling out", nil
			}
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, "pod " + p.Name + " terminating", nil
			}
		}
		return true, "", nil
	}))
}

// waitTemplatesUse waits until some StatefulSet or DaemonSet of ns has a container or init
// container of image in its pod template, and none of old.
func waitTemplatesUse(t *testing.T, ns, image, old string) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), "the workloads in "+ns+" changed to "+image, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		stss := &appsv1.StatefulSetList{}
		dss := &appsv1.DaemonSetList{}
		if err := env.Client.List(ctx, stss, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		if err := env.Client.List(ctx, dss, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		var specs []corev1.PodSpec
		for _, s := range stss.Items {
			specs = append(specs, s.Spec.Template.Spec)
		}
		for _, d := range dss.Items {
			specs = append(specs, d.Spec.Template.Spec)
		}
		uses, stale := false, false
		for _, p := range specs {
			for _, c := range append(p.InitContainers, p.Containers...) {
				uses = uses || c.Image == image
				stale = stale || c.Image == old
			}
		}
		return uses && !stale, fmt.Sprintf("%d StatefulSets, %d DaemonSets; new image used %t, old image used %t", len(stss.Items), len(dss.Items), uses, stale), nil
	}))
}

// podsRunning lists the pods in ns with a container or init container of image.
func podsRunning(t *testing.T, ns, image string) []string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(context.Background(), pods, client.InNamespace(ns)))
	var out []string
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if c.Image == image {
				out = append(out, p.Name)
				break
			}
		}
	}
	return out
}

func pvcUIDs(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	pvcs := &corev1.PersistentVolumeClaimList{}
	require.NoError(t, env.Client.List(context.Background(), pvcs, client.InNamespace(ns)))
	out := map[string]types.UID{}
	for _, p := range pvcs.Items {
		out[p.Name] = p.UID
	}
	return out
}

func podUIDs(t *testing.T, ns string) []string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, env.Client.List(context.Background(), pods, client.InNamespace(ns)))
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name+"/"+string(p.UID))
	}
	slices.Sort(out)
	return out
}

// testRuntimeSecurity reads, from the node, what the kernel enforces on the running
// manager container: not what admission accepted, what runs.
func testRuntimeSecurity(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	pid, err := env.ContainerPID(ctx, pod, "manager")
	require.NoError(t, err)
	sec, err := realnode.InspectProcess(pid)
	require.NoError(t, err)
	t.Logf("manager process %d: uid %s gid %s CapEff %s Seccomp %s NoNewPrivs %s; root mount: %s",
		pid, sec.UID, sec.GID, sec.CapEff, sec.Seccomp, sec.NoNewPrivs, sec.RootMountEntry)
	require.Equal(t, "65532", sec.UID)
	require.Equal(t, "0000000000000000", sec.CapEff, "no capabilities")
	require.Equal(t, "2", sec.Seccomp, "seccomp filter (RuntimeDefault)")
	require.Equal(t, "1", sec.NoNewPrivs)
	require.True(t, sec.RootReadOnly, "read-only root filesystem: %s", sec.RootMountEntry)
}

// testMetricsAccess calls the manager's metrics Service from pods: without a token
// (refused), with a ServiceAccount bound to the metrics-reader ClusterRole (served), and
// with one that is not (forbidden).
func testMetricsAccess(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	url := fmt.Sprintf("https://quartet-controller-manager-metrics-service.%s.svc.cluster.local:8443/metrics", ns)
	for _, sa := range []string{"metrics-scraper", "not-a-scraper"} {
		require.NoError(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: targetNS}}))
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quartet-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "metrics-scraper", Namespace: targetNS}},
	}
	require.NoError(t, c.Create(ctx, binding))
	defer func() { _ = c.Delete(ctx, binding) }()
	token := "/var/run/secrets/kubernetes.io/serviceaccount/token"

	out, err := env.RunPod(ctx, targetNS, "metrics-scraper", "metrics-scraper",
		"echo no-token: $(httpget -k "+url+" | head -1); echo with-token: $(httpget -k -bearer-file "+token+" "+url+" | grep -E '^(200|controller_runtime_reconcile_total)' | head -2 | tr '\\n' ' ')")
	require.NoError(t, err)
	t.Logf("pod with the metrics-reader binding:\n%s", out)
	require.Contains(t, out, "no-token: 401")
	require.Contains(t, out, "with-token: 200 controller_runtime_reconcile_total")
	out, err = env.RunPod(ctx, targetNS, "not-a-scraper", "not-a-scraper", "echo other-token: $(httpget -k -bearer-file "+token+" "+url+" | head -1)")
	require.NoError(t, err)
	t.Logf("pod without it:\n%s", out)
	require.Contains(t, out, "other-token: 403")
}
