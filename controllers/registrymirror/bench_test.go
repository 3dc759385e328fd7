package registrymirror

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/cmd/nodeagent"
	"github.com/quartet-operator/quartet/internal/manager"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/benchutil"
)

// benchMirrors is 100, the fleet BenchmarkMirrorsToReady reports on in docs/PERFORMANCE.md;
// QUARTET_RM_BENCH_MIRRORS overrides it for a quick look (and QUARTET_RM_BENCH_WORKERS
// the worker count, to compare others with the default).
var benchMirrors = func() int {
	if n, err := strconv.Atoi(os.Getenv("QUARTET_RM_BENCH_MIRRORS")); err == nil && n > 0 {
		return n
	}
	return 100
}()

// createVolumes makes n PersistentVolumes of a storage class so n cache PVCs bind.
func createVolumes(ctx context.Context, b *testing.B, c client.Client, class string, n int) {
	b.Helper()
	require.NoError(b, benchutil.Parallel(ctx, n, func(i int) error {
		return c.Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", class, i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              class,
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/tmp/%s-%d", class, i)}},
			},
		})
	}))
	b.Cleanup(func() {
		for i := 0; i < n; i++ {
			_ = c.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", class, i)}})
		}
	})
}

// rawObjects are the six objects of mirror i, built by the controller's own builders,
// as plain typed objects without owner references (nothing owns them).
func rawObjects(b *testing.B, m *mirrorsv1alpha1.RegistryMirror, hostPort int32) []client.Object {
	b.Helper()
	dir, err := HostsDir(m.Spec.Upstream)
	require.NoError(b, err)
	var out []client.Object
	for _, c := range desiredChildren(m, ImagesFromEnv(), reach{hostPort: hostPort, hostsPath: hostsPath("", dir), capabilities: nodeagent.DefaultCapabilities}) {
		require.NoError(b, roundTrip(c.desired, c.live))
		c.live.SetOwnerReferences(nil)
		out = append(out, c.live)
	}
	return out
}

// allReady polls until every StatefulSet and DaemonSet in ns is rolled out and ready.
func allReady(ctx context.Context, b *testing.B, c client.Client, ns string, n int) {
	b.Helper()
	for {
		var stss appsv1.StatefulSetList
		var dss appsv1.DaemonSetList
		require.NoError(b, c.List(ctx, &stss, client.InNamespace(ns)))
		require.NoError(b, c.List(ctx, &dss, client.InNamespace(ns)))
		ready := 0
		for i := range stss.Items {
			s := &stss.Items[i]
			if statefulSetRolledOut(s) && s.Status.ReadyReplicas == 1 {
				ready++
			}
		}
		for i := range dss.Items {
			d := &dss.Items[i].Status
			if d.DesiredNumberScheduled > 0 && d.NumberReady == d.DesiredNumberScheduled && d.UpdatedNumberScheduled == d.DesiredNumberScheduled {
				ready++
			}
		}
		if ready == 2*n {
			return
		}
		require.NoError(b, ctx.Err(), "%d/%d workloads ready", ready, 2*n)
		time.Sleep(100 * time.Millisecond)
	}
}

// BenchmarkMirrorsToReady creates 100 RegistryMirrors and waits until all are Ready
// (registry and node agent rolled out, cache PVC bound), and compares that with writing
// the same 600 objects (built by the same builders) straight to the API server in the
// same run — once until they exist, once until their workloads are ready too. A first
// baseline server-side applies the same objects (32 workers, the controller's field owner,
// forced) into a namespace that is then deleted, and gone, before the raw create:
// raw-apply-over-create is its time over the raw create's, x-raw-apply and
// x-raw-apply-children-written divide by it. The manager
// runs as shipped: no client-side rate limit and the controller's flag defaults.
// x-raw-create-children-written compares the time until every mirror's first pass has
// written its children (and its first status) with the raw create: the part the
// controller's own speed decides, before the cluster's controllers take over.
// api-writes/mirror counts the controller's writes from create to Ready (Events left
// out): child-writes/mirror are the applies of the six children, status-writes/mirror the
// status patches. Eight is the least an honest status allows: six applies, then the
// first pass's Ready=False (what the mirror waits for) and Ready=True; each step of the
// rollout that lasts longer than the progress hold (5 s) (a volume slow to bind, node agents coming up
// meanwhile) adds a status write that reports it.
func BenchmarkMirrorsToReady(b *testing.B) {
	env.Require(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tuned := benchutil.TunedConfig(env.Config)
	c, err := client.New(tuned, client.Options{Scheme: env.Scheme})
	require.NoError(b, err)
	stamp := fmt.Sprintf("%d", time.Now().Unix()%100000)
	rawNS, ctrlNS := "rm-bench-raw-"+stamp, "rm-bench-ctrl-"+stamp
	for _, ns := range []string{rawNS, ctrlNS} {
		require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		b.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	}
	createVolumes(ctx, b, c, rawNS, benchMirrors)
	createVolumes(ctx, b, c, ctrlNS, benchMirrors)

	mirror := func(ns string, i int) *mirrorsv1alpha1.RegistryMirror {
		m := newMirror(ns, fmt.Sprintf("m%d", i), fmt.Sprintf("https://registry-%d.example", i), ns)
		m.Spec.ConfigureNodes = true
		return m
	}

	// First baseline: the same objects server-side applied by 32 workers, as the
	// controller writes them (apply, field owner, forced), into a namespace of their own
	// that is deleted, and gone, before the next baseline: the cluster's Service range
	// holds two mirror fleets, not three.
	applyNS := "rm-bench-apply-" + stamp
	require.NoError(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: applyNS}}))
	b.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: applyNS}})
	})
	createVolumes(ctx, b, c, applyNS, benchMirrors)
	var applies []runtime.ApplyConfiguration
	for i := 0; i < benchMirrors; i++ {
		for _, o := range rawObjects(b, mirror(applyNS, i), 41000+int32(i)) {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			require.NoError(b, err)
			applies = append(applies, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}))
		}
	}
	start := time.Now()
	require.NoError(b, benchutil.Parallel(ctx, len(applies), func(i int) error {
		return c.Apply(ctx, applies[i], client.FieldOwner(FieldOwner), client.ForceOwnership)
	}))
	rawApply := time.Since(start)
	allReady(ctx, b, c, applyNS, benchMirrors)
	b.Logf("raw apply: applied in %s, workloads ready after %s", rawApply, time.Since(start))
	require.NoError(b, c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: applyNS}}))
	for {
		err := c.Get(ctx, client.ObjectKey{Name: applyNS}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			break
		}
		require.NoError(b, ctx.Err(), "namespace %s still there: %v", applyNS, err)
		time.Sleep(200 * time.Millisecond)
	}

	// Second baseline: the same objects, created directly by 32 workers.
	var raw []client.Object
	for i := 0; i < benchMirrors; i++ {
		raw = append(raw, rawObjects(b, mirror(rawNS, i), 40000+int32(i))...)
	}
	start = time.Now()
	require.NoError(b, benchutil.Parallel(ctx, len(raw), func(i int) error { return c.Create(ctx, raw[i]) }))
	rawCreate := time.Since(start)
	allReady(ctx, b, c, rawNS, benchMirrors)
	rawToReady := time.Since(start)
	b.Logf("raw: created in %s, workloads ready after %s", rawCreate, rawToReady)

	// The cluster admin's consent for every mirror's node access (configureNodes), given
	// before the timed part: a RegistryHostGrant per upstream host naming its mirror.
	for i := 0; i < benchMirrors; i++ {
		g := &mirrorsv1alpha1.RegistryHostGrant{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rm-bench-%s-%d", stamp, i)},
			Spec: mirrorsv1alpha1.RegistryHostGrantSpec{
				Host:         fmt.Sprintf("registry-%d.example", i),
				Mirror:       mirrorsv1alpha1.MirrorReference{Namespace: ctrlNS, Name: fmt.Sprintf("m%d", i)},
				Capabilities: []mirrorsv1alpha1.Capability{mirrorsv1alpha1.CapabilityPull},
			},
		}
		require.NoError(b, c.Create(ctx, g))
		b.Cleanup(func() { _ = c.Delete(context.Background(), g) })
	}

	// The controller, as deployed: the manager's client limits and the controller's flag
	// defaults, a client counting its requests.
	var calls benchutil.CallCounter
	cfg := rest.CopyConfig(env.Config)
	manager.SetClientLimits(cfg, manager.DefaultKubeAPIQPS, manager.DefaultKubeAPIBurst)
	calls.Wrap(cfg)
	var opts Options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	opts.BindFlags(fs)
	require.NoError(b, fs.Parse(nil))
	if n, err := strconv.Atoi(os.Getenv("QUARTET_RM_BENCH_WORKERS")); err == nil && n > 0 {
		opts.MaxConcurrentReconciles = n // for comparing worker counts; not the reported figure
	}
	b.Logf("workers: %d", opts.MaxConcurrentReconciles)
	startManager(b, cfg, scope.Namespaces{}, opts.MaxConcurrentReconciles)

	start = time.Now()
	lastLog := start
	var allVisited time.Duration
	require.NoError(b, benchutil.Parallel(ctx, benchMirrors, func(i int) error { return c.Create(ctx, mirror(ctrlNS, i)) }))
	for {
		var list mirrorsv1alpha1.RegistryMirrorList
		require.NoError(b, c.List(ctx, &list, client.InNamespace(ctrlNS)))
		ready, visited := 0, 0
		for i := range list.Items {
			if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, mirrorsv1alpha1.ConditionReady) {
				ready++
			}
			if len(list.Items[i].Status.Conditions) > 0 {
				visited++
			}
		}
		if allVisited == 0 && visited == benchMirrors {
			// A mirror's first pass writes its status after applying all its children.
			allVisited = time.Since(start)
			b.Logf("every mirror's children written after %s (%.2f× raw create)", allVisited, allVisited.Seconds()/rawCreate.Seconds())
		}
		if ready == benchMirrors {
			break
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			reasons := map[string]int{}
			for i := range list.Items {
				if c := meta.FindStatusCondition(list.Items[i].Status.Conditions, mirrorsv1alpha1.ConditionReady); c != nil {
					reasons[c.Reason]++
				} else {
					reasons["none"]++
				}
			}
			var nodes corev1.NodeList
			require.NoError(b, c.List(ctx, &nodes))
			nodeReady := map[string]corev1.ConditionStatus{}
			for _, n := range nodes.Items {
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady {
						nodeReady[n.Name] = cond.Status
					}
				}
			}
			b.Logf("%s: %d/%d mirrors ready, Ready reasons %v, nodes Ready %v", time.Since(start).Round(time.Second), ready, benchMirrors, reasons, nodeReady)
		}
		require.NoError(b, ctx.Err(), "%d/%d mirrors ready", ready, benchMirrors)
		time.Sleep(100 * time.Millisecond)
	}
	toReady := time.Since(start)
	b.Logf("raw create %s, raw until workloads ready %s, mirrors to Ready %s", rawCreate, rawToReady, toReady)

	writes := writesByResource(calls.Snapshot())
	total, status, children := 0, writes["PATCH registrymirrors/status"], 0
	keys := make([]string, 0, len(writes))
	for k, v := range writes {
		total += v
		keys = append(keys, k)
		switch _, res, _ := strings.Cut(k, " "); res {
		case "configmaps", "services", "persistentvolumeclaims", "statefulsets", "daemonsets":
			children += v
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.Logf("writes %-40s %6d  %.2f/mirror", k, writes[k], float64(writes[k])/float64(benchMirrors))
	}
	b.ReportMetric(toReady.Seconds(), "s-100-mirrors-to-ready")
	b.ReportMetric(toReady.Seconds()/rawCreate.Seconds(), "x-raw-create")
	b.ReportMetric(toReady.Seconds()/rawToReady.Seconds(), "x-raw-create-until-workloads-ready")
	b.ReportMetric(allVisited.Seconds()/rawCreate.Seconds(), "x-raw-create-children-written")
	b.ReportMetric(toReady.Seconds()/rawApply.Seconds(), "x-raw-apply")
	b.ReportMetric(allVisited.Seconds()/rawApply.Seconds(), "x-raw-apply-children-written")
	b.ReportMetric(rawApply.Seconds()/rawCreate.Seconds(), "raw-apply-over-create")
	b.ReportMetric(rawCreate.Seconds()*1000, "ms-raw-create-600-objects")
	b.ReportMetric(rawApply.Seconds()*1000, "ms-raw-apply-600-objects")
	b.ReportMetric(rawToReady.Seconds(), "s-raw-600-objects-until-workloads-ready")
	b.ReportMetric(float64(total)/float64(benchMirrors), "api-writes/mirror")
	b.ReportMetric(float64(status)/float64(benchMirrors), "status-writes/mirror")
	b.ReportMetric(float64(children)/float64(benchMirrors), "child-writes/mirror")
}

// writesByResource sums the writes (POST, PUT, PATCH, DELETE; Events left out) among
// counts of "VERB /path" by verb and resource, subresource included: "PATCH
// statefulsets", "PATCH registrymirrors/status".
func writesByResource(counts map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range counts {
		verb, path, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE":
		default:
			continue
		}
		res := benchutil.ResourceOf(path)
		if res == "events" {
			continue
		}
		out[verb+" "+res] += v
	}
	return out
}
