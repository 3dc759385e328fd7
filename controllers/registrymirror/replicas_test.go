package registrymirror

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/scope"
)

func withReplicas(m *mirrorsv1alpha1.RegistryMirror, n int32) *mirrorsv1alpha1.RegistryMirror {
	m.Spec.Replicas = ptr.To(n)
	return m
}

// TestReplicasAddStatefulSetsAndVolumes: a mirror of two replicas has a second
// StatefulSet and cache volume, and its first replica's objects are byte for byte those
// of a mirror of one replica, so growing the mirror touches neither its registry nor its
// cache.
func TestReplicasAddStatefulSetsAndVolumes(t *testing.T) {
	rch := reach{hostPort: 35000}
	var names []string
	for _, c := range desiredChildren(withReplicas(fullMirror(), 2), testImages, rch) {
		names = append(names, c.kind+"/"+c.name)
	}
	assert.Equal(t, []string{
		"ConfigMap/quay-registry-config", "Service/quay-registry", "Service/quay-registry-headless",
		"PersistentVolumeClaim/quay-registry-cache", "PersistentVolumeClaim/quay-registry-cache-1",
		"NetworkPolicy/quay-registry",
		"StatefulSet/quay-registry", "StatefulSet/quay-registry-1",
		"DaemonSet/quay-node",
	}, names, "volumes before the registries that mount them")

	single := desiredChildren(fullMirror(), testImages, rch)
	unset := fullMirror()
	unset.Spec.Replicas = nil
	for _, m := range []*mirrorsv1alpha1.RegistryMirror{withReplicas(fullMirror(), 2), withReplicas(fullMirror(), 1), unset} {
		byName := map[string]child{}
		for _, c := range desiredChildren(m, testImages, rch) {
			byName[c.kind+"/"+c.name] = c
		}
		for _, c := range single {
			assert.Equal(t, hashJSON(c.desired), hashJSON(byName[c.kind+"/"+c.name].desired), "%s of replicas %v", c.name, m.Spec.Replicas)
		}
	}

	m := withReplicas(fullMirror(), 3)
	for i := int32(1); i < 3; i++ {
		sts := &appsv1.StatefulSet{}
		require.NoError(t, roundTrip(desiredStatefulSet(m, testImages, "h", i), sts))
		name := replicaStatefulSetName(m, i)
		assert.Equal(t, map[string]string{labelName: "registrymirror", labelInstance: "quay", labelComponent: componentReg, labelReplica: name[len(name)-1:]},
			sts.Spec.Selector.MatchLabels, "replica %d selects its own pod only", i)
		assert.Equal(t, sts.Spec.Selector.MatchLabels[labelReplica], sts.Spec.Template.Labels[labelReplica])
		assert.Equal(t, "quay-registry-headless", sts.Spec.ServiceName, "one headless Service names every replica's pod")
		assert.Equal(t, replicaPVCName(m, i), sts.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
		anti := sts.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		require.Len(t, anti, 1, "replica %d prefers a node without another registry of the mirror", i)
		assert.Equal(t, corev1.LabelHostname, anti[0].PodAffinityTerm.TopologyKey)
		assert.Equal(t, selectorLabels(m, componentReg), anti[0].PodAffinityTerm.LabelSelector.MatchLabels, "any replica's pod")
		assert.Nil(t, sts.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, "a one-node cluster still runs both")

		pvc := &corev1.PersistentVolumeClaim{}
		require.NoError(t, roundTrip(desiredPVC(m, i), pvc))
		assert.Equal(t, "quay-registry-cache-"+name[len(name)-1:], pvc.Name)
		assert.Equal(t, name[len(name)-1:], pvc.Labels[labelReplica])
		assert.Equal(t, m.Spec.Storage, pvc.Spec.Resources.Requests[corev1.ResourceStorage], "each replica a volume of spec.storage")
	}
	assert.Equal(t, "quay-registry-2-0.quay-registry-headless.mirrors.svc:5000", replicaPodAddress(m, 2))
}

// TestExtraReplicas: lowering spec.replicas deletes the mirror's own objects of replicas
// at or above it, never replica 0's, another mirror's, or an unlabelled one, and one
// being deleted only once.
func TestExtraReplicas(t *testing.T) {
	m := withReplicas(minimalMirror(), 2)
	other := minimalMirror()
	other.UID = types.UID("someone-else")
	obj := func(name, replica string, owner *mirrorsv1alpha1.RegistryMirror) client.Object {
		o := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.Namespace, Labels: map[string]string{}}}
		if replica != "" {
			o.Labels[labelReplica] = replica
		}
		if owner != nil {
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: mirrorsv1alpha1.GroupVersion.String(), Kind: "RegistryMirror",
				Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		}
		return o
	}
	objs := []client.Object{
		obj("r1", "1", m), obj("r2", "2", m), obj("r3", "3", m),
		obj("foreign", "4", other), obj("orphan", "5", nil), obj("unlabelled", "", m),
		obj("zero", "0", m), obj("nonsense", "x", m), obj("negative", "-1", m), obj("going", "2", m),
	}
	objs[len(objs)-1].SetDeletionTimestamp(ptr.To(metav1.Now()))
	names := func(os []client.Object) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.GetName())
		}
		return out
	}
	assert.Equal(t, []string{"r2", "r3"}, names(extraReplicas(m, objs)))
	assert.Equal(t, []string{"r1", "r2", "r3"}, names(extraReplicas(withReplicas(minimalMirror(), 1), objs)))
	assert.Empty(t, extraReplicas(withReplicas(minimalMirror(), 5), objs))
}

// TestMergeCacheReports: of several replicas the status shows what every one holds, the
// fullest volume, and the pulls of all.
func TestMergeCacheReports(t *testing.T) {
	t1 := metav1.Unix(1000, 0)
	t2 := metav1.Unix(2000, 0)
	a := CacheReport{Pinned: 4, Cached: 4, LastPass: t2, DiskUsedBytes: 50, DiskCapacityBytes: 100, BlobHits: 3, BlobMisses: 1, BytesFromCache: 30, BytesFromUpstream: 10,
		UpstreamFetches: 1, UpstreamFetchFailures: 1, UpstreamFetchedBytes: 5, CoalescedWaiters: 2, CoalescedManifestWaiters: 3}
	b := CacheReport{Pinned: 4, Cached: 2, LastPass: t1, DiskUsedBytes: 90, DiskCapacityBytes: 200, BlobHits: 1, BlobMisses: 1, BytesFromCache: 5, BytesFromUpstream: 7,
		UpstreamFetches: 2, UpstreamFetchedBytes: 7, CoalescedWaiters: 1, CoalescedManifestWaiters: 1}
	fresh := CacheReport{Pinned: 4}

	assert.Nil(t, mergeCacheReports(nil), "no replica answered")
	assert.Equal(t, &a, mergeCacheReports([]CacheReport{a}), "one replica: its report")
	for _, order := range [][]CacheReport{{a, b}, {b, a}} {
		got := mergeCacheReports(order)
		assert.Equal(t, int32(2), got.Cached, "what every replica holds")
		assert.Equal(t, t1, got.LastPass, "the older pass")
		assert.Equal(t, [2]uint64{50, 100}, [2]uint64{got.DiskUsedBytes, got.DiskCapacityBytes}, "the fuller volume: 50%% of 100 over 45%% of 200")
		assert.Equal(t, [4]uint64{4, 2, 35, 17}, [4]uint64{got.BlobHits, got.BlobMisses, got.BytesFromCache, got.BytesFromUpstream}, "summed")
		assert.Equal(t, [5]uint64{3, 1, 12, 3, 4}, [5]uint64{got.UpstreamFetches, got.UpstreamFetchFailures, got.UpstreamFetchedBytes,
			got.CoalescedWaiters, got.CoalescedManifestWaiters}, "summed")
	}
	got := mergeCacheReports([]CacheReport{a, fresh})
	assert.True(t, got.LastPass.IsZero(), "a replica that has not warmed yet: the images cached are not known")
	assert.Equal(t, [2]uint64{50, 100}, [2]uint64{got.DiskUsedBytes, got.DiskCapacityBytes}, "an unmeasured volume is not the fullest")
	assert.Equal(t, [2]uint64{50, 100}, func() [2]uint64 {
		g := mergeCacheReports([]CacheReport{fresh, a})
		return [2]uint64{g.DiskUsedBytes, g.DiskCapacityBytes}
	}(), "in either order")
}

// TestCacheReportAddresses: one registry is asked through its Service, as before
// replicas existed; several, each ready one at its own pod.
func TestCacheReportAddresses(t *testing.T) {
	m := withReplicas(minimalMirror(), 3)
	notReady := readySTS()
	notReady.Status.ReadyReplicas = 0
	assert.Equal(t, []string{"10.0.0.7:5000"}, cacheReportAddresses(m, workloads{registries: one(readySTS(), boundPVC())}, "10.0.0.7:5000"))
	w := workloads{registries: []registryReplica{{statefulSet: readySTS()}, {statefulSet: notReady}, {statefulSet: readySTS()}}}
	assert.Equal(t, []string{"docker-hub-registry-0.docker-hub-registry-headless.mirrors.svc:5000",
		"docker-hub-registry-2-0.docker-hub-registry-headless.mirrors.svc:5000"}, cacheReportAddresses(m, w, "10.0.0.7:5000"))
	assert.Equal(t, int32(2), w.readyRegistries())
}

// TestReadyWithReplicas: one replica that serves makes the mirror Ready, and the message
// says how many serve and what the first other one waits for; none serving is not Ready,
// with each replica's reason.
func TestReadyWithReplicas(t *testing.T) {
	pending := boundPVC()
	pending.Name = "docker-hub-registry-cache-1"
	pending.Status.Phase = corev1.ClaimPending
	rolling := readySTS()
	rolling.Status.ReadyReplicas = 0
	up := metav1.Condition{Reason: mirrorsv1alpha1.ReasonReachable}
	base := outcome{access: granted, workloads: workloads{daemonSet: readyDS()}, complete: true}

	base.workloads.registries = []registryReplica{{readySTS(), boundPVC()}, {readySTS(), pending}}
	c := readyCondition(base, up)
	assert.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	assert.Contains(t, c.Message, "; 1/2 registry replicas serve (cache volume docker-hub-registry-cache-1 is Pending")

	base.workloads.registries = []registryReplica{{readySTS(), boundPVC()}, {readySTS(), boundPVC()}}
	c = readyCondition(base, up)
	assert.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	assert.Contains(t, c.Message, "; 2/2 registry replicas serve")
	assert.NotContains(t, c.Message, "(")

	base.workloads.registries = []registryReplica{{rolling, boundPVC()}, {readySTS(), pending}}
	c = readyCondition(base, up)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, mirrorsv1alpha1.ReasonRegistryNotReady, c.Reason, "the first replica's reason")
	assert.Contains(t, c.Message, "cache volume docker-hub-registry-cache-1 is Pending", "and the second's")

	base.workloads.registries = []registryReplica{{nil, nil}, {readySTS(), boundPVC()}}
	base.complete = false
	c = readyCondition(base, up)
	assert.Equal(t, metav1.ConditionTrue, c.Status, "the second replica serves while the first is being made")

	one := outcome{access: granted, workloads: workloads{registries: one(readySTS(), boundPVC()), daemonSet: readyDS()}, complete: true}
	assert.NotContains(t, readyCondition(one, up).Message, "replicas", "a mirror of one replica says what it always said")
}

// TestMirrorGrowsAndShrinks (integration, the local cluster): a mirror raised to two
// replicas gets a second registry and cache volume without its first registry being
// touched, and reports both ready; lowered to one, the second's StatefulSet and volume are
// deleted and the first stays as it was.
func TestMirrorGrowsAndShrinks(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := "rm-" + ns
	newVolume(t, class, "20Gi", false)
	second := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: class + "-1"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + class + "-1"}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, second))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), second) })
	startManager(t, env.Config, scope.Namespaces{}, 2)

	m := newMirror(ns, "hub", "https://registry-1.docker.io", class)
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	m = waitReady(t, key, 1)
	first := &appsv1.StatefulSet{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry"}, first))

	editSpec(t, key, func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.Replicas = ptr.To[int32](2) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mm := getMirror(c, key)
		assert.Equal(c, int32(2), mm.Status.ReadyReplicas)
		assert.Equal(c, int64(2), mm.Status.ObservedGeneration)
		ready := condition(mm, mirrorsv1alpha1.ConditionReady)
		assert.Equal(c, metav1.ConditionTrue, ready.Status)
		assert.Contains(c, ready.Message, "2/2 registry replicas serve")
	}, wait, tick)
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry-cache-1"}, pvc))
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
	assert.True(t, metav1.IsControlledBy(pvc, m))
	for pod, sts := range map[string]string{"hub-registry-0": "hub-registry", "hub-registry-1-0": "hub-registry-1"} {
		p := &corev1.Pod{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod}, p))
		owner := metav1.GetControllerOf(p)
		require.NotNil(t, owner, pod)
		assert.Equal(t, sts, owner.Name, "each StatefulSet keeps its own pod, though the first one's selector matches both")
	}
	got := &appsv1.StatefulSet{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(first), got))
	assert.Equal(t, first.ResourceVersion, got.ResourceVersion, "growing did not touch the first registry")

	editSpec(t, key, func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.Replicas = ptr.To[int32](1) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, obj := range []client.Object{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "hub-registry-1"}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "hub-registry-cache-1"}}} {
			err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: obj.GetName()}, obj)
			assert.True(c, apierrors.IsNotFound(err), "%s: %v", obj.GetName(), err)
		}
		mm := getMirror(c, key)
		assert.Equal(c, int32(1), mm.Status.ReadyReplicas)
		assert.Equal(c, int64(3), mm.Status.ObservedGeneration)
		assert.NotContains(c, condition(mm, mirrorsv1alpha1.ConditionReady).Message, "replicas")
		assert.Equal(c, 2, eventCounts(c, m)["Normal/"+EventDeleted], "one Deleted Event for the StatefulSet, one for the volume")
	}, wait, tick)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(first), got))
	assert.Equal(t, first.UID, got.UID, "the first registry stays")
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry-cache"}, pvc), "and its cache")
}
