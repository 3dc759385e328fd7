package registrymirror

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

const (
	wait = 90 * time.Second
	tick = 250 * time.Millisecond
)

// startManager runs the controller the way main.go does (a manager whose cache strips
// managedFields and does not hold Secrets) until the test ends. cfg may count requests.
func startManager(t testing.TB, cfg *rest.Config, shared scope.Namespaces, workers int) {
	t.Helper()
	opts := Options{MaxConcurrentReconciles: workers}
	testenv.StartManager(t, cfg, shared, opts.Setup)
}

// newNamespace creates a namespace rm-<random> for one test.
func newNamespace(t testing.TB) string {
	t.Helper()
	return testenv.Namespace(t, env.Client, "rm", nil)
}

// newVolume creates a PersistentVolume (and, with expandable, a StorageClass allowing
// expansion) of a class of its own, so a mirror's cache PVC of that class binds.
func newVolume(t testing.TB, class string, size string, expandable bool) {
	t.Helper()
	ctx := context.Background()
	if expandable {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner",
			AllowVolumeExpansion: ptr.To(true)}
		require.NoError(t, env.Client.Create(ctx, sc))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + class}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, pv))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
}

func newMirror(ns, name, upstream, class string) *mirrorsv1alpha1.RegistryMirror {
	m := &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       mirrorsv1alpha1.RegistryMirrorSpec{Upstream: upstream, Storage: resource.MustParse("10Gi")},
	}
	if class != "" {
		m.Spec.StorageClassName = ptr.To(class)
	}
	return m
}

func getMirror(t require.TestingT, key types.NamespacedName) *mirrorsv1alpha1.RegistryMirror {
	m := &mirrorsv1alpha1.RegistryMirror{}
	require.NoError(t, env.Client.Get(context.Background(), key, m))
	return m
}

// editSpec changes a mirror's spec with a merge patch (the controller writes the status meanwhile).
func editSpec(t *testing.T, key types.NamespacedName, edit func(*mirrorsv1alpha1.RegistryMirror)) {
	t.Helper()
	m := getMirror(t, key)
	patch := client.MergeFrom(m.DeepCopy())
	edit(m)
	require.NoError(t, env.Client.Patch(context.Background(), m, patch))
}

// condition returns the mirror's condition of type typ (only Type set when absent).
func condition(m *mirrorsv1alpha1.RegistryMirror, typ string) metav1.Condition {
	return testenv.Condition(m.Status.Conditions, typ)
}

func waitReady(t *testing.T, key types.NamespacedName, generation int64) *mirrorsv1alpha1.RegistryMirror {
	t.Helper()
	var m *mirrorsv1alpha1.RegistryMirror
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m = getMirror(c, key)
		ready := condition(m, mirrorsv1alpha1.ConditionReady)
		assert.Equal(c, metav1.ConditionTrue, ready.Status, "Ready: %s", ready.Message)
		assert.Equal(c, generation, m.Status.ObservedGeneration)
		assert.Equal(c, generation, ready.ObservedGeneration)
	}, wait, tick)
	return m
}

// children returns the mirror's six objects as they are now (nil for missing ones).
func children(t require.TestingT, m *mirrorsv1alpha1.RegistryMirror) map[string]client.Object {
	out := map[string]client.Object{}
	for key, obj := range map[string]client.Object{
		"ConfigMap/" + configMapName(m):       &corev1.ConfigMap{},
		"Service/" + serviceName(m):           &corev1.Service{},
		"Service/" + headlessName(m):          &corev1.Service{},
		"PersistentVolumeClaim/" + pvcName(m): &corev1.PersistentVolumeClaim{},
		"StatefulSet/" + statefulSetName(m):   &appsv1.StatefulSet{},
		"DaemonSet/" + daemonSetName(m):       &appsv1.DaemonSet{},
	} {
		name := key[strings.Index(key, "/")+1:]
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: m.Namespace, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			out[key] = nil
			continue
		}
		require.NoError(t, err)
		out[key] = obj
	}
	return out
}

// eventCounts counts the Events regarding mirror m by "type/reason" (Normal/Created, ...).
func eventCounts(t require.TestingT, m *mirrorsv1alpha1.RegistryMirror) map[string]int {
	out := map[string]int{}
	for _, e := range testenv.Events(t, env.Client, m.Namespace, "RegistryMirror", m.Name) {
		out[e.Type+"/"+e.Reason]++
	}
	return out
}

// childWrites counts the requests that wrote a mirror's children (apply PATCHes and
// creates) in namespace ns.
func childWrites(c *benchutil.CallCounter, ns string) int {
	n := 0
	for k, v := range c.Snapshot() {
		verb, path, _ := strings.Cut(k, " ")
		if (verb == "PATCH" || verb == "POST" || verb == "PUT") && strings.Contains(path, "/namespaces/"+ns+"/") &&
			!strings.Contains(path, "/registrymirrors/") && !strings.Contains(path, "/events") {
			n += v
		}
	}
	return n
}

// TestMirrorLifecycle walks a mirror's whole life on the full cluster: all six objects
// created and owned, Ready reached, no writes in the steady state, a deleted Service
// re-created, drift corrected, a changed upstream rolled out, storage grown, and
// deletion cleaning up through owner references.
func TestMirrorLifecycle(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := "rm-" + ns
	newVolume(t, class, "50Gi", true)
	var calls benchutil.CallCounter
	cfg := rest.CopyConfig(env.Config)
	calls.Wrap(cfg)
	startManager(t, cfg, scope.Namespaces{}, 2)

	m := newMirror(ns, "hub", "https://registry-1.docker.io", class)
	m.Spec.ConfigureNodes = true
	testenv.GrantNodes(t, env.Client, "docker.io", ns, "hub", mirrorsv1alpha1.CapabilityResolve)
	testenv.GrantNodes(t, env.Client, "mirror.gcr.io", ns, "hub")
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)

	start := time.Now()
	phase := func(what string) { t.Logf("%-32s at %5.1fs", what, time.Since(start).Seconds()) }
	m = waitReady(t, key, 1)
	phase("Ready")
	assert.Equal(t, "http://hub-registry."+ns+".svc:5000", m.Status.Endpoint)
	assert.Equal(t, int32(1), m.Status.ReadyReplicas)
	assert.Equal(t, int32(1), m.Status.NodesReady, "one kwok node")
	assert.Equal(t, int32(1), m.Status.NodesDesired)
	assert.Regexp(t, `^http://127\.0\.0\.1:3[0-9]{4}$`, m.Status.NodeEndpoint)
	assert.Equal(t, metav1.ConditionFalse, condition(m, mirrorsv1alpha1.ConditionDegraded).Status)
	kids := children(t, m)
	require.Len(t, kids, 6)
	for name, obj := range kids {
		require.NotNil(t, obj, "%s missing", name)
		assert.True(t, metav1.IsControlledBy(obj, m), "%s is controlled by the mirror", name)
	}
	pvc := kids["PersistentVolumeClaim/hub-registry-cache"].(*corev1.PersistentVolumeClaim)
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
	assert.Equal(t, class, pvc.Spec.VolumeName, "bound to the test's volume")
	ds := kids["DaemonSet/hub-node"].(*appsv1.DaemonSet)
	assert.Contains(t, ds.Spec.Template.Spec.Containers[0].Args, "--server=https://registry-1.docker.io")
	assert.Contains(t, ds.Spec.Template.Spec.Containers[0].Args, "--capabilities=pull,resolve", "the grant's capabilities")
	assert.Equal(t, "/etc/containerd/certs.d/docker.io", ds.Spec.Template.Spec.Volumes[0].HostPath.Path)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		reasons := eventCounts(c, m)
		assert.Equal(c, 6, reasons["Normal/Created"], "one Created event per child: %v", reasons)
	}, wait, tick)

	// Steady state: waking the controller (a foreign label on a child) writes nothing.
	calls.Reset()
	before := testenv.Reconciles(t, "registrymirror")
	svc := &corev1.Service{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry"}, svc))
	patch := client.MergeFrom(svc.DeepCopy())
	svc.Labels["team"] = "platform"
	require.NoError(t, env.Client.Patch(ctx, svc, patch))
	require.Eventually(t, func() bool { return testenv.Reconciles(t, "registrymirror") > before }, wait, tick, "the label change woke the controller")
	assert.Zero(t, childWrites(&calls, ns), "no apply when nothing differs: %v", calls.Snapshot())
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc))
	assert.Equal(t, "platform", svc.Labels["team"], "others' fields are kept")

	phase("steady state checked")
	// A deleted Service is re-created.
	oldUID := svc.UID
	require.NoError(t, env.Client.Delete(ctx, svc))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &corev1.Service{}
		assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
		assert.NotEqual(c, oldUID, got.UID, "a new Service")
		assert.True(c, metav1.IsControlledBy(got, m))
	}, wait, tick)

	phase("deleted Service re-created")
	// Drift of an owned field is corrected.
	sts := &appsv1.StatefulSet{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry"}, sts))
	wantImage := sts.Spec.Template.Spec.Containers[0].Image
	stsPatch := client.MergeFrom(sts.DeepCopy())
	sts.Spec.Template.Spec.Containers[0].Image = "example.invalid/not-the-registry:1"
	require.NoError(t, env.Client.Patch(ctx, sts, stsPatch))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &appsv1.StatefulSet{}
		assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(sts), got))
		assert.Equal(c, wantImage, got.Spec.Template.Spec.Containers[0].Image)
	}, wait, tick)

	phase("drift corrected")
	// Fields an apply would keep but that change what the registry serves are taken away:
	// `kubectl set env` pointing the registry at another upstream.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts))
	stsPatch = client.MergeFrom(sts.DeepCopy())
	sts.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "REGISTRY_PROXY_REMOTEURL", Value: "https://evil.example"}}
	require.NoError(t, env.Client.Patch(ctx, sts, stsPatch, client.FieldOwner("kubectl-set")))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &appsv1.StatefulSet{}
		assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(sts), got))
		assert.Empty(c, got.Spec.Template.Spec.Containers[0].Env, "env reverted")
		assert.Equal(c, wantImage, got.Spec.Template.Spec.Containers[0].Image)
		assert.Positive(c, eventCounts(c, m)["Warning/"+EventReverted])
	}, wait, tick)
	// A Service narrowed to someone's pods is put back.
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry"}, svc))
	svcPatch := client.MergeFrom(svc.DeepCopy())
	svc.Spec.Selector["evil"] = "1"
	require.NoError(t, env.Client.Patch(ctx, svc, svcPatch))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &corev1.Service{}
		assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(svc), got))
		assert.Equal(c, selectorLabels(m, componentReg), got.Spec.Selector)
	}, wait, tick)
	phase("others' additions reverted")
	// A changed upstream rolls the registry and the node agents.
	oldHash := sts.Spec.Template.Annotations[annotationConfigHash]
	editSpec(t, key, func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.Upstream = "https://mirror.gcr.io" })
	m = waitReady(t, key, 2)
	phase("new upstream rolled out")
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry-config"}, cm))
	assert.Contains(t, cm.Data[configFileName], "remoteurl: https://mirror.gcr.io")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts))
	newHash := sts.Spec.Template.Annotations[annotationConfigHash]
	assert.NotEqual(t, oldHash, newHash)
	assert.Equal(t, sts.Status.UpdateRevision, sts.Status.CurrentRevision, "rolled out")
	pod := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "hub-registry-0"}, pod))
	assert.Equal(t, newHash, pod.Annotations[annotationConfigHash], "the running pod has the new configuration")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(ds), ds))
	assert.Contains(t, ds.Spec.Template.Spec.Containers[0].Args, "--server=https://mirror.gcr.io")
	assert.Equal(t, "/etc/containerd/certs.d/mirror.gcr.io", ds.Spec.Template.Spec.Volumes[0].HostPath.Path)

	// Storage grows: the PVC is resized.
	editSpec(t, key, func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.Storage = resource.MustParse("20Gi") })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &corev1.PersistentVolumeClaim{}
		assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(pvc), got))
		assert.Equal(c, "20Gi", ptr.To(got.Spec.Resources.Requests[corev1.ResourceStorage]).String())
		mm := getMirror(c, key)
		assert.Equal(c, int64(3), mm.Status.ObservedGeneration)
		assert.Equal(c, metav1.ConditionFalse, condition(mm, mirrorsv1alpha1.ConditionDegraded).Status, condition(mm, mirrorsv1alpha1.ConditionDegraded).Message)
	}, wait, tick)

	phase("storage grown")
	assert.Equal(t, 1.0, testutil.ToFloat64(readyGauge.WithLabelValues(key.Namespace, key.Name)), "quartet_registrymirror_ready")
	// Deleting the mirror deletes everything it owns (garbage collection) and its series.
	require.NoError(t, env.Client.Delete(ctx, m))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for name, obj := range children(c, m) {
			assert.Nil(c, obj, "%s still exists", name)
		}
		assert.Equal(c, 0, testenv.Series(readyGauge, map[string]string{"mirror_namespace": key.Namespace, "mirror": key.Name}), "quartet_registrymirror_ready series of the deleted mirror")
	}, wait, tick)
	phase("children garbage-collected")
}

// TestForeignObjectIsAConflict: an object of a child's name that the mirror does not
// control is reported (Degraded, Warning Event) and never taken over; once it is gone,
// the mirror creates its own.
func TestForeignObjectIsAConflict(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	startManager(t, env.Config, scope.Namespaces{}, 2)

	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quay-registry", Labels: map[string]string{"owner": "someone"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "theirs"},
			Ports: []corev1.ServicePort{{Name: "web", Port: 8080}}},
	}
	require.NoError(t, env.Client.Create(ctx, foreign))
	m := newMirror(ns, "quay", "https://quay.io", "")
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m = getMirror(c, key)
		d := condition(m, mirrorsv1alpha1.ConditionDegraded)
		assert.Equal(c, metav1.ConditionTrue, d.Status)
		assert.Equal(c, mirrorsv1alpha1.ReasonObjectConflict, d.Reason)
		assert.Contains(c, d.Message, "Service "+ns+"/quay-registry exists and is not controlled by this RegistryMirror")
		assert.Equal(c, 1, eventCounts(c, m)["Warning/"+mirrorsv1alpha1.ReasonObjectConflict])
		// The other children are still made.
		assert.NotNil(c, children(c, m)["StatefulSet/quay-registry"])
	}, wait, tick)
	assert.NotEqual(t, metav1.ConditionTrue, condition(m, mirrorsv1alpha1.ConditionReady).Status, "no PersistentVolume, so not ready")
	got := &corev1.Service{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), got))
	assert.Empty(t, got.OwnerReferences, "never taken over")
	assert.Equal(t, map[string]string{"owner": "someone"}, got.Labels)
	assert.Equal(t, map[string]string{"app": "theirs"}, got.Spec.Selector)
	assert.Equal(t, int32(8080), got.Spec.Ports[0].Port)

	require.NoError(t, env.Client.Delete(ctx, got))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		svc := &corev1.Service{}
		assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), svc))
		assert.True(c, metav1.IsControlledBy(svc, m))
		mm := getMirror(c, key)
		assert.Equal(c, metav1.ConditionFalse, condition(mm, mirrorsv1alpha1.ConditionDegraded).Status)
	}, wait, tick)
}

// TestStorageResizeRefused: growing a cache whose class does not allow expansion is
// reported, without a retry loop, while the mirror keeps serving. The API server's refusal
// (Forbidden) is the user's to resolve, not a failure the controller retries: the pass
// reports it in Degraded and returns no error, waiting for the next edit. By the
// observedGeneration rule (docs/STYLE.md, "Status writes and observedGeneration") such a
// terminal spec mistake is no error of the pass, so generation 2 is observed; a retried
// failure is not (TestObservedGenerationOnFailedPass).
func TestStorageResizeRefused(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := "rm-" + ns
	newVolume(t, class, "50Gi", false)
	startManager(t, env.Config, scope.Namespaces{}, 2)
	m := newMirror(ns, "ghcr", "https://ghcr.io", class)
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	waitReady(t, key, 1)

	editSpec(t, key, func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.Storage = resource.MustParse("30Gi") })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mm := getMirror(c, key)
		d := condition(mm, mirrorsv1alpha1.ConditionDegraded)
		assert.Equal(c, metav1.ConditionTrue, d.Status)
		assert.Equal(c, mirrorsv1alpha1.ReasonApplyFailed, d.Reason)
		assert.Contains(c, d.Message, "applying PersistentVolumeClaim "+ns+"/ghcr-registry-cache was refused")
		assert.Equal(c, metav1.ConditionTrue, condition(mm, mirrorsv1alpha1.ConditionReady).Status, "the registry still serves")
		assert.Equal(c, int64(2), mm.Status.ObservedGeneration, "a refused change is a spec mistake, not a failed pass: observed; Degraded says what is wrong")
		assert.Equal(c, 1, eventCounts(c, mm)["Warning/"+mirrorsv1alpha1.ReasonApplyFailed])
	}, wait, tick)
}

// TestObservedGenerationOnFailedPass pins the observedGeneration rule (docs/STYLE.md,
// "Status writes and observedGeneration"): a pass that fails with an API error returns it
// (the pass is retried) and leaves observedGeneration at the last spec acted on fully,
// while Degraded, carrying the new generation, reports the failure; the retried pass that
// succeeds observes the spec. The manager's transport answers its writes of the mirror's
// children with 500 Internal Server Error while failing is set.
func TestObservedGenerationOnFailedPass(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := "rm-" + ns
	newVolume(t, class, "50Gi", false)
	var failing atomic.Bool
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return failChildWrites{next: rt, namespace: ns, on: &failing}
	})
	startManager(t, cfg, scope.Namespaces{}, 2)
	m := newMirror(ns, "quay", "https://quay.io", class)
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	waitReady(t, key, 1)

	failing.Store(true)
	editSpec(t, key, func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.MaxDiskPercent = ptr.To(int32(70)) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mm := getMirror(c, key)
		d := condition(mm, mirrorsv1alpha1.ConditionDegraded)
		assert.Equal(c, metav1.ConditionTrue, d.Status)
		assert.Equal(c, mirrorsv1alpha1.ReasonApplyFailed, d.Reason)
		assert.Contains(c, d.Message, "injected failure")
		assert.Equal(c, int64(2), d.ObservedGeneration, "the failure is reported for the new spec")
		assert.Equal(c, int64(1), mm.Status.ObservedGeneration, "a failed pass does not claim the spec it could not act on")
	}, wait, tick)

	failing.Store(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		mm := getMirror(c, key)
		assert.Equal(c, metav1.ConditionFalse, condition(mm, mirrorsv1alpha1.ConditionDegraded).Status)
		assert.Equal(c, int64(2), mm.Status.ObservedGeneration, "the retried pass acted on the spec")
	}, wait, tick)
}

// failChildWrites answers PATCH requests for objects in namespace (but the RegistryMirrors
// themselves and Events) with 500 Internal Server Error while on is set, and passes every
// other request on.
type failChildWrites struct {
	next      http.RoundTripper
	namespace string
	on        *atomic.Bool
}

func (f failChildWrites) RoundTrip(r *http.Request) (*http.Response, error) {
	p := r.URL.Path
	if !f.on.Load() || r.Method != http.MethodPatch || !strings.Contains(p, "/namespaces/"+f.namespace+"/") ||
		strings.Contains(p, "/registrymirrors/") || strings.Contains(p, "/events/") {
		return f.next.RoundTrip(r)
	}
	body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected failure","reason":"InternalError","code":500}`
	return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Request: r,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
}

// TestHostPorts: mirrors get distinct host ports; an explicit port another mirror holds
// is a conflict and that mirror gets no node agents.
func TestHostPorts(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	startManager(t, env.Config, scope.Namespaces{}, 4)
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		testenv.GrantNodes(t, env.Client, n+".example", ns, n)
		require.NoError(t, env.Client.Create(ctx, newMirror(ns, n, "https://"+n+".example", "")))
	}
	ports := map[int32]string{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ports = map[int32]string{}
		for _, n := range names {
			ds := &appsv1.DaemonSet{}
			if !assert.NoError(c, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n + "-node"}, ds)) {
				return
			}
			p := hostPortOf(&ds.Spec.Template.Spec)
			assert.NotContains(c, ports, p, "port %d given twice", p)
			ports[p] = n
			m := getMirror(c, types.NamespacedName{Namespace: ns, Name: n})
			assert.Equal(c, fmt.Sprintf("http://127.0.0.1:%d", p), m.Status.NodeEndpoint)
		}
	}, wait, tick)
	var taken int32
	for p, n := range ports {
		if n == "a" {
			taken = p
		}
	}
	e := newMirror(ns, "e", "https://e.example", "")
	e.Spec.HostPort = ptr.To(taken)
	testenv.GrantNodes(t, env.Client, "e.example", ns, "e")
	require.NoError(t, env.Client.Create(ctx, e))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := getMirror(c, client.ObjectKeyFromObject(e))
		d := condition(m, mirrorsv1alpha1.ConditionDegraded)
		assert.Equal(c, mirrorsv1alpha1.ReasonHostPortConflict, d.Reason)
		assert.Contains(c, d.Message, fmt.Sprintf("host port %d is used by the node agents of RegistryMirror %s/a", taken, ns))
		assert.Contains(c, condition(m, mirrorsv1alpha1.ConditionReady).Message, "the node agent DaemonSet does not exist")
		assert.Nil(c, children(c, m)["DaemonSet/e-node"])
		assert.NotNil(c, children(c, m)["StatefulSet/e-registry"], "the rest is applied")
	}, wait, tick)
}

// TestWatchNamespace: a controller limited to some namespaces leaves mirrors elsewhere alone.
func TestWatchNamespace(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	watched, other := newNamespace(t), newNamespace(t)
	startManager(t, env.Config, scope.Namespaces{Watched: []string{watched}}, 2)
	outside := newMirror(other, "outside", "https://quay.io", "")
	require.NoError(t, env.Client.Create(ctx, outside))
	inside := newMirror(watched, "inside", "https://quay.io", "")
	testenv.GrantNodes(t, env.Client, "quay.io", watched, "inside")
	require.NoError(t, env.Client.Create(ctx, inside))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := getMirror(c, client.ObjectKeyFromObject(inside))
		assert.NotEmpty(c, m.Status.Conditions)
		assert.NotNil(c, children(c, m)["DaemonSet/inside-node"])
	}, wait, tick)
	m := getMirror(t, client.ObjectKeyFromObject(outside))
	assert.Empty(t, m.Status.Conditions, "not touched")
	for name, obj := range children(t, m) {
		assert.Nil(t, obj, "%s created outside the watched namespaces", name)
	}
}

// TestAPIRefusesInvalidMirrors covers the validation this package added to the type:
// names its children can be derived from, and host port bounds.
func TestAPIRefusesInvalidMirrors(t *testing.T) {
	env.Require(t)
	ns := newNamespace(t)
	for _, tc := range []struct {
		name   string
		mutate func(*mirrorsv1alpha1.RegistryMirror)
		want   string
	}{
		{"name too long", func(m *mirrorsv1alpha1.RegistryMirror) { m.Name = strings.Repeat("a", 41) }, "metadata.name must be a DNS label of at most 40 characters"},
		{"name starts with a digit", func(m *mirrorsv1alpha1.RegistryMirror) { m.Name = "1hub" }, "starting with a letter"},
		{"host port privileged", func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.HostPort = ptr.To[int32](80) }, "spec.hostPort"},
		{"host port too high", func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.HostPort = ptr.To[int32](70000) }, "spec.hostPort"},
	} {
		m := newMirror(ns, "ok", "https://quay.io", "")
		tc.mutate(m)
		err := env.Client.Create(context.Background(), m)
		require.Error(t, err, tc.name)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", tc.name, err)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
	ok := newMirror(ns, strings.Repeat("a", 40), "https://quay.io", "")
	testenv.GrantNodes(t, env.Client, "quay.io", ns, ok.Name)
	require.NoError(t, env.Client.Create(context.Background(), ok), "40 characters are fine")
	// ... and every derived name and label fits: the registry pod and node agent pods exist.
	startManager(t, env.Config, scope.Namespaces{}, 2)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var pods corev1.PodList
		assert.NoError(c, env.Client.List(context.Background(), &pods, client.InNamespace(ns)))
		names := map[string]bool{}
		for _, p := range pods.Items {
			names[p.Labels[labelComponent]] = true
		}
		assert.True(c, names[componentReg], "registry pod")
		assert.True(c, names[componentAgent], "node agent pod")
	}, wait, tick)
}

// TestNodeAccessNeedsAGrant: a mirror reaches the nodes only with a cluster admin's
// RegistryHostGrant naming it; without one it is an in-cluster cache and says so; of two
// mirrors of one host only the granted one gets node agents; a revoked grant takes them
// away again.
func TestNodeAccessNeedsAGrant(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	host := ns + ".example"
	startManager(t, env.Config, scope.Namespaces{}, 2)
	newVolume(t, "rm-a-"+ns, "10Gi", false)
	newVolume(t, "rm-b-"+ns, "10Gi", false)
	a := newMirror(ns, "a", "https://"+host, "rm-a-"+ns)
	a.Spec.ConfigureNodes = true
	b := newMirror(ns, "b", "https://"+host, "rm-b-"+ns)
	for _, m := range []*mirrorsv1alpha1.RegistryMirror{a, b} {
		require.NoError(t, env.Client.Create(ctx, m))
	}
	access := func(c *assert.CollectT, m *mirrorsv1alpha1.RegistryMirror, status metav1.ConditionStatus, reason string) *mirrorsv1alpha1.RegistryMirror {
		got := getMirror(c, client.ObjectKeyFromObject(m))
		cond := condition(got, mirrorsv1alpha1.ConditionNodeAccess)
		assert.Equal(c, status, cond.Status, cond.Message)
		assert.Equal(c, reason, cond.Reason)
		return got
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := access(c, a, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant)
		assert.Equal(c, mirrorsv1alpha1.ReasonNodeAccessNotGranted, condition(got, mirrorsv1alpha1.ConditionReady).Reason, "configureNodes asks for what no grant allows")
		assert.Empty(c, got.Status.NodeEndpoint)
		kids := children(c, got)
		assert.Nil(c, kids["DaemonSet/a-node"], "no node agents without a grant")
		assert.NotNil(c, kids["StatefulSet/a-registry"], "the in-cluster cache is there")
		got = access(c, b, metav1.ConditionFalse, mirrorsv1alpha1.ReasonNoHostGrant)
		assert.Equal(c, metav1.ConditionTrue, condition(got, mirrorsv1alpha1.ConditionReady).Status, "an in-cluster cache is ready: %s", condition(got, mirrorsv1alpha1.ConditionReady).Message)
	}, wait, tick)

	revokeA := testenv.GrantNodes(t, env.Client, host, ns, "a")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := access(c, a, metav1.ConditionTrue, mirrorsv1alpha1.ReasonGranted)
		assert.NotNil(c, children(c, got)["DaemonSet/a-node"])
		assert.Equal(c, metav1.ConditionTrue, condition(got, mirrorsv1alpha1.ConditionReady).Status, condition(got, mirrorsv1alpha1.ConditionReady).Message)
		got = access(c, b, metav1.ConditionFalse, mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror)
		assert.Nil(c, children(c, got)["DaemonSet/b-node"])
	}, wait, tick)

	// A second grant of the host to b changes nothing: the oldest counts (within the same
	// second of creationTimestamp the first by name, and GrantNodes names a's grant first).
	testenv.GrantNodes(t, env.Client, host, ns, "b")
	require.Never(t, func() bool {
		got := getMirror(t, client.ObjectKeyFromObject(b))
		return condition(got, mirrorsv1alpha1.ConditionNodeAccess).Status == metav1.ConditionTrue
	}, 3*time.Second, tick, "a newer grant of a granted host does not take it over")

	// The older grant goes: a loses its node agents, b gets the host.
	revokeA()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := access(c, a, metav1.ConditionFalse, mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror)
		assert.Nil(c, children(c, got)["DaemonSet/a-node"], "node agents removed")
		assert.Positive(c, eventCounts(c, got)["Warning/NodeAccess"+mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror])
		assert.Positive(c, eventCounts(c, got)["Normal/"+EventDeleted])
		got = access(c, b, metav1.ConditionTrue, mirrorsv1alpha1.ReasonGranted)
		assert.NotNil(c, children(c, got)["DaemonSet/b-node"])
	}, wait, tick)
}

// TestPrivateUpstreamIsFencedIn: a mirror whose upstream needs credentials gets a
// NetworkPolicy that lets only its own namespace and the operator's reach the registry;
// without credentials it has none.
func TestPrivateUpstreamIsFencedIn(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	startManager(t, env.Config, scope.Namespaces{Operator: "quartet-system"}, 2)
	m := newMirror(ns, "private", "https://registry.example", "")
	m.Spec.CredentialsSecretRef = &mirrorsv1alpha1.SecretReference{Name: "pull"}
	require.NoError(t, env.Client.Create(ctx, m))
	np := &networkingv1.NetworkPolicy{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if !assert.NoError(c, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "private-registry"}, np)) {
			return
		}
		assert.True(c, metav1.IsControlledBy(np, m))
	}, wait, tick)
	assert.Equal(t, selectorLabels(m, componentReg), np.Spec.PodSelector.MatchLabels)
	require.Len(t, np.Spec.Ingress, 1)
	assert.Equal(t, []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "quartet-system"}}},
	}, np.Spec.Ingress[0].From)

	editSpec(t, client.ObjectKeyFromObject(m), func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.CredentialsSecretRef = nil })
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(np), &networkingv1.NetworkPolicy{}))
	}, wait, tick, "the NetworkPolicy goes with the credentials")
}

// TestCacheTTLIsIgnoredWithAWarning: a mirror that still sets the deprecated cacheTTL
// becomes Ready as any other, and gets one Warning Event per generation saying the field
// has no effect; a registry pod's command line carries the retention, never the TTL.
func TestCacheTTLIsIgnoredWithAWarning(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	startManager(t, env.Config, scope.Namespaces{}, 2)
	newVolume(t, "rm-ttl-"+ns, "10Gi", false)
	m := newMirror(ns, "ttl", "https://"+ns+".example", "rm-ttl-"+ns)
	m.Spec.CacheTTL = &metav1.Duration{Duration: time.Hour}
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	waitReady(t, key, 1)
	warnings := func(c *assert.CollectT) int {
		return eventCounts(c, m)[corev1.EventTypeWarning+"/"+EventCacheTTLIgnored]
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, 1, warnings(c)) }, wait, tick)

	editSpec(t, key, func(m *mirrorsv1alpha1.RegistryMirror) {
		m.Spec.Retention = &metav1.Duration{Duration: 48 * time.Hour}
	})
	waitReady(t, key, 2)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, 2, warnings(c)) }, wait, tick)
	sts := children(t, getMirror(t, key))["StatefulSet/"+statefulSetName(m)].(*appsv1.StatefulSet)
	command := strings.Join(append(sts.Spec.Template.Spec.Containers[0].Command, sts.Spec.Template.Spec.Containers[0].Args...), " ")
	assert.Contains(t, command, "--retention=48h0m0s")
	assert.NotContains(t, command, "1h0m0s")
}

// runningPod creates a pod in ns running image, with imageID as the node reported it (the
// API server lets the test write the status a kubelet would). No scheduler takes it, so no
// kwok node writes a status of its own over the test's.
func runningPod(t *testing.T, ns, name, image, imageID string, phase corev1.PodPhase) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{SchedulerName: "quartet-test-nobody", Containers: []corev1.Container{{Name: "c", Image: image}}}}
	require.NoError(t, env.Client.Create(ctx, p))
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: image, ImageID: imageID}}}
		return env.Client.Status().Update(ctx, p)
	}))
}

// TestGrantedMirrorPinsThePodsImages (issue 22, part 2): a mirror with node access pins,
// in its registry's ConfigMap, the images by digest that pods of any namespace run from
// its host, and counts them in status.imagesInUse; ended pods, pods no node accepted and
// other hosts' images do not count. Without node access it pins nothing: it does not
// serve the nodes, and its namespace's editors learn nothing of other namespaces' pods.
func TestGrantedMirrorPinsThePodsImages(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	apps := testenv.Namespace(t, env.Client, "rm-apps", nil)
	host := ns + ".example"
	startManager(t, env.Config, scope.Namespaces{}, 2)
	newVolume(t, "rm-pins-"+ns, "10Gi", false)
	runningPod(t, apps, "web", host+"/team/app:v1", host+"/team/app@"+digestA, corev1.PodRunning)
	runningPod(t, apps, "web-2", host+"/team/app:v1", host+"/team/app@"+digestA, corev1.PodRunning)
	runningPod(t, apps, "tool", host+"/tools/cli@"+digestB, "", corev1.PodPending)
	runningPod(t, apps, "job", host+"/team/batch:v1", host+"/team/batch@"+digestC, corev1.PodSucceeded)
	runningPod(t, apps, "hub", "nginx:1.27", "docker.io/library/nginx@"+digestC, corev1.PodRunning)
	m := newMirror(ns, "pins", "https://"+host, "rm-pins-"+ns)
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)

	pinned := func(c require.TestingT) (string, *mirrorsv1alpha1.RegistryMirror) {
		got := getMirror(c, key)
		cm, ok := children(c, got)["ConfigMap/pins-registry-config"].(*corev1.ConfigMap)
		require.True(c, ok, "the registry's ConfigMap")
		return cm.Data[pinnedImagesKey], got
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		file, got := pinned(c)
		assert.Contains(c, file, "no node access")
		assert.NotContains(c, file, "@sha256:")
		assert.Nil(c, got.Status.ImagesInUse)
		assert.Equal(c, metav1.ConditionFalse, condition(got, mirrorsv1alpha1.ConditionNodeAccess).Status)
	}, wait, tick)

	revoke := testenv.GrantNodes(t, env.Client, host, ns, "pins")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		file, got := pinned(c)
		var lines []string
		for l := range strings.SplitSeq(file, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		// tools/cli is named by a pod no node accepted (issue 37): not pinned.
		assert.Equal(c, []string{"team/app:v1@" + digestA}, lines, "with the tag the pods name")
		assert.Equal(c, ptr.To[int32](1), got.Status.ImagesInUse)
		assert.Nil(c, got.Status.ImagesCached, "no registry answers in this cluster")
	}, wait, tick)

	revoke()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		file, got := pinned(c)
		assert.NotContains(c, file, "@sha256:")
		assert.Nil(c, got.Status.ImagesInUse)
	}, wait, tick)
}

// scheduledPod creates a pod in ns that the scheduler gives the kwok node, which runs it:
// one container per image.
func scheduledPod(t *testing.T, ns, name string, images ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0)}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	require.NoError(t, env.Client.Create(context.Background(), p))
	return p
}

// TestPinnedImagesSharedFairly (issue 37, review 2026-12-06 finding 3): a tenant cannot
// push another namespace's images off a granted mirror's pinned list. Her pods that no
// node accepts (no scheduler takes them) pin nothing, however their images sort; her
// running pods get an equal share of the cap, and the other namespace's running pods'
// images are pinned. The cap (--registrymirror-max-pinned-images) is 4 here.
func TestPinnedImagesSharedFairly(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	tenant := testenv.Namespace(t, env.Client, "rm-tenant", nil)
	victim := testenv.Namespace(t, env.Client, "rm-victim", nil)
	host := ns + ".example"
	opts := Options{MaxConcurrentReconciles: 2, MaxPinnedImages: 4}
	testenv.StartManager(t, env.Config, scope.Namespaces{}, opts.Setup)

	// The tenant: three pods no scheduler takes, 12 images whose names sort first, and one
	// running pod of 4 images.
	for i := range 3 {
		var imgs []string
		for j := range 4 {
			imgs = append(imgs, fmt.Sprintf("%s/0000/pending-%d-%d@%s", host, i, j, digestA))
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fmt.Sprintf("stuck-%d", i)},
			Spec: corev1.PodSpec{SchedulerName: "nobody"}}
		for j, img := range imgs {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", j), Image: img})
		}
		require.NoError(t, env.Client.Create(ctx, p))
	}
	var tenantRunning, victimRunning []string
	for j := range 4 {
		tenantRunning = append(tenantRunning, fmt.Sprintf("%s/0000/run-%d@%s", host, j, digestB))
	}
	for j := range 2 {
		victimRunning = append(victimRunning, fmt.Sprintf("%s/zzz/app-%d@%s", host, j, digestC))
	}
	pods := []*corev1.Pod{scheduledPod(t, tenant, "web", tenantRunning...), scheduledPod(t, victim, "web", victimRunning...)}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, p := range pods {
			got := &corev1.Pod{}
			require.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(p), got))
			assert.Equal(c, corev1.PodRunning, got.Status.Phase, "%s/%s", p.Namespace, p.Name)
		}
	}, wait, tick)

	newVolume(t, "rm-fair-"+ns, "10Gi", false)
	m := newMirror(ns, "pins", "https://"+host, "rm-fair-"+ns)
	testenv.GrantNodes(t, env.Client, host, ns, "pins")
	require.NoError(t, env.Client.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	// Each namespace's running pods get 2 of the 4: the first of each in its sorted order.
	want := []string{"0000/run-0@" + digestB, "0000/run-1@" + digestB, "zzz/app-0@" + digestC, "zzz/app-1@" + digestC}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getMirror(c, key)
		cm, ok := children(c, got)["ConfigMap/pins-registry-config"].(*corev1.ConfigMap)
		require.True(c, ok, "the registry's ConfigMap")
		var lines []string
		for l := range strings.SplitSeq(cm.Data[pinnedImagesKey], "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		assert.Equal(c, want, lines)
		assert.Contains(c, cm.Data[pinnedImagesKey], "# 6 images in use; 4 are pinned, shared fairly among 2 namespaces.")
		assert.Equal(c, ptr.To[int32](6), got.Status.ImagesInUse, "the stuck pods' images are not in use")
		// The series are set right after the status write.
		assert.Equal(c, 4.0, testutil.ToFloat64(pinnedImagesGauge.WithLabelValues(ns, "pins")))
		assert.Equal(c, 2.0, testutil.ToFloat64(namespacesInUseGauge.WithLabelValues(ns, "pins")))
		assert.Equal(c, 2.0, testutil.ToFloat64(pinnedByNamespaceGauge.WithLabelValues(ns, "pins", tenant)))
		assert.Equal(c, 2.0, testutil.ToFloat64(pinnedByNamespaceGauge.WithLabelValues(ns, "pins", victim)))
	}, wait, tick)
}

// TestLookAlikeDaemonSetHoldsNoHostPort (issue 37, review 2026-12-06 finding 4): a
// tenant's DaemonSets with the node agents' labels and a "mirror" host port, one with no
// owner and one controlled by her mirror without node access, do not keep a granted mirror
// from that port.
func TestLookAlikeDaemonSetHoldsNoHostPort(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := newNamespace(t)
	tenant := testenv.Namespace(t, env.Client, "rm-tenant", nil)
	startManager(t, env.Config, scope.Namespaces{}, 2)
	const port int32 = 34567

	hers := newMirror(tenant, "hers", "https://"+tenant+".example", "")
	hers.Spec.HostPort = ptr.To(port)
	require.NoError(t, env.Client.Create(ctx, hers))
	lookAlike := func(name string, owner *mirrorsv1alpha1.RegistryMirror) {
		labels := map[string]string{labelManagedBy: managedBy, labelComponent: componentAgent, labelInstance: "hub", labelName: "registrymirror"}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name, Labels: labels},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"squat": name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"squat": name}},
					Spec: corev1.PodSpec{NodeSelector: map[string]string{"none": "none"}, Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/x:1",
						Ports: []corev1.ContainerPort{{Name: "mirror", ContainerPort: 5000, HostPort: port, HostIP: "127.0.0.1"}}}}}}}}
		if owner != nil {
			ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: mirrorsv1alpha1.GroupVersion.String(), Kind: "RegistryMirror",
				Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		}
		require.NoError(t, env.Client.Create(ctx, ds))
	}
	lookAlike("squat", nil)
	lookAlike("decoy", hers)

	m := newMirror(ns, "hub", "https://"+ns+".example", "")
	m.Spec.HostPort = ptr.To(port)
	testenv.GrantNodes(t, env.Client, ns+".example", ns, "hub")
	require.NoError(t, env.Client.Create(ctx, m))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getMirror(c, client.ObjectKeyFromObject(m))
		assert.NotEqual(c, mirrorsv1alpha1.ReasonHostPortConflict, condition(got, mirrorsv1alpha1.ConditionDegraded).Reason,
			condition(got, mirrorsv1alpha1.ConditionDegraded).Message)
		assert.Equal(c, fmt.Sprintf("http://127.0.0.1:%d", port), got.Status.NodeEndpoint)
		ds, ok := children(c, got)["DaemonSet/hub-node"].(*appsv1.DaemonSet)
		if assert.True(c, ok, "the node agents") {
			assert.Equal(c, port, hostPortOf(&ds.Spec.Template.Spec))
		}
	}, wait, tick)
}
