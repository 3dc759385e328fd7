package olm

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/operator-framework/api/crds"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/internal/localcluster"
)

const (
	olmNamespace     = "olm" // OLM's global catalog namespace: CatalogSource and bundle unpack Jobs
	installNamespace = "quartet-system"
	otherTarget      = "quartet-e2e-target"
	catalogName      = "quartet-catalog"
	packageName      = "quartet"
	oldCSV           = "quartet.v0.1.0"
	newCSV           = "quartet.v0.2.0"
	agentName        = "princeedmund"
	// unpackRefLabel marks OLM's bundle unpack Jobs; its value names the ConfigMap to fill.
	unpackRefLabel = "operatorframework.io/bundle-unpack-ref"
)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(operatorsv1alpha1.AddToScheme(s))
	utilruntime.Must(operatorsv1.AddToScheme(s))
	return s
}

// e2e holds what the steps share.
type e2e struct {
	t          *testing.T
	root       string
	dir        string
	cluster    *localcluster.Cluster
	c          client.Client
	opm        string
	start      time.Time
	timings    []string
	bundleDirs map[string]string // bundle image -> bundle directory, from catalog/
}

func (e *e2e) phase(name string, since time.Time) {
	d := time.Since(since).Round(100 * time.Millisecond)
	e.timings = append(e.timings, fmt.Sprintf("%-52s %6s", name, d))
	e.t.Logf("PHASE %s: %s", name, d)
}

// TestOLMInstallAndUpgrade installs Quartet with OLM v0.46.0 from catalog/ on the local
// cluster and upgrades it from 0.1.0 to 0.2.0. docs/OLM.md says what it proves. Opt-in:
// QUARTET_OLM_E2E=1 (make olm-e2e), with OPM, OLM and OLM_CATALOG naming the binaries.
func TestOLMInstallAndUpgrade(t *testing.T) {
	if os.Getenv("QUARTET_OLM_E2E") == "" {
		t.Skip("set QUARTET_OLM_E2E=1 to run (make olm-e2e)")
	}
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	tool := func(env, name string) string {
		if v := os.Getenv(env); v != "" {
			return v
		}
		return filepath.Join(root, "bin", "tools", name)
	}
	opm, olmBin, catalogBin := tool("OPM", "opm-v1.74.0"), tool("OLM", "olm-v0.46.0"), tool("OLM_CATALOG", "catalog-v0.46.0")
	for _, b := range []string{opm, olmBin, catalogBin} {
		_, err := os.Stat(b)
		require.NoErrorf(t, err, "%s missing: run `make olm-tools`", b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "quartet-olm-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("QUARTET_OLM_E2E_KEEP") != "" {
			t.Logf("logs kept in %s/logs", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	e := &e2e{t: t, root: root, dir: dir, opm: opm, start: time.Now()}
	defer func() {
		e.phase("total", e.start)
		t.Logf("timings:\n%s", strings.Join(e.timings, "\n"))
	}()
	e.bundleDirs = e.readCatalogImages()

	// 1. The full local cluster: kube-controller-manager and kwok make Deployments Available
	//    and Job pods Succeeded (no kubelet: images are never pulled).
	since := time.Now()
	binDir, kwokDir, err := localcluster.DefaultBinDirs()
	require.NoError(t, err)
	e.cluster, err = localcluster.Start(ctx, localcluster.Options{Dir: dir, BinDir: binDir, KwokDir: kwokDir, Full: true, Log: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.cluster.Stop() })
	e.c, err = client.New(e.cluster.RestConfig(), client.Options{Scheme: scheme()})
	require.NoError(t, err)
	e.phase("local cluster (etcd, apiserver, kcm, scheduler, kwok)", since)

	// 2. OLM: its CRDs from operator-framework/api, then the olm and catalog operators as
	//    processes with the admin kubeconfig (OLM's own RBAC is not exercised).
	since = time.Now()
	e.installOLMCRDs(ctx)
	for _, ns := range []string{olmNamespace, installNamespace, otherTarget} {
		require.NoError(t, e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	env := []string{"KUBECONFIG=" + e.cluster.Kubeconfig}
	e.startProcess(ctx, "olm-operator", env, olmBin, "--namespace="+olmNamespace)
	e.startProcess(ctx, "catalog-operator", env, catalogBin, "--namespace="+olmNamespace,
		"--kubeconfig="+e.cluster.Kubeconfig,
		// Images of pods OLM would start; kwok never pulls them.
		"--opmImage=quay.io/operator-framework/opm:v1.74.0",
		"--util-image=quay.io/operator-framework/olm:v0.46.0",
		"--configmapServerImage=quay.io/operator-framework/opm:v1.74.0")
	e.phase("OLM CRDs + olm and catalog operators started", since)

	// 3. The catalog served by opm on loopback, and a CatalogSource pointing at it.
	since = time.Now()
	port := e.freePort()
	e.startProcess(ctx, "opm-serve", nil, opm, "serve", filepath.Join(root, "catalog"),
		"-p", strconv.Itoa(port), "--pprof-addr=", "-t", filepath.Join(dir, "logs", "opm-termination.log"))
	e.waitTCP(ctx, port)
	require.NoError(t, e.c.Create(ctx, &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: catalogName, Namespace: olmNamespace},
		Spec: operatorsv1alpha1.CatalogSourceSpec{
			SourceType:  operatorsv1alpha1.SourceTypeGrpc,
			Address:     fmt.Sprintf("127.0.0.1:%d", port),
			DisplayName: "Quartet (local)",
			Publisher:   "Quartet",
		},
	}))
	e.eventually(ctx, "CatalogSource READY", 2*time.Minute, func() (bool, string) {
		cs := &operatorsv1alpha1.CatalogSource{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: olmNamespace, Name: catalogName}, cs); err != nil {
			return false, err.Error()
		}
		if cs.Status.GRPCConnectionState == nil {
			return false, "no connection state"
		}
		return cs.Status.GRPCConnectionState.LastObservedState == "READY", cs.Status.GRPCConnectionState.LastObservedState
	})
	e.phase("opm serve + CatalogSource READY", since)

	// 4. Bundle unpacking: OLM starts a Job per bundle image whose pod pulls the image and
	//    runs `opm alpha bundle extract` into a ConfigMap. Here the harness runs that same
	//    opm command on the bundle directory the image is built from (see docs/OLM.md).
	unpackCtx, stopUnpack := context.WithCancel(ctx)
	t.Cleanup(stopUnpack) // before the cluster stops
	unpacked := e.emulateBundleUnpack(unpackCtx)

	// 5. OperatorGroup (MultiNamespace: the install namespace and one more) and a
	//    Subscription to stable starting at 0.1.0, with manual approval to step through.
	since = time.Now()
	require.NoError(t, e.c.Create(ctx, &operatorsv1.OperatorGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "quartet", Namespace: installNamespace},
		Spec:       operatorsv1.OperatorGroupSpec{TargetNamespaces: []string{installNamespace, otherTarget}},
	}))
	require.NoError(t, e.c.Create(ctx, &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: packageName, Namespace: installNamespace},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource: catalogName, CatalogSourceNamespace: olmNamespace,
			Package: packageName, Channel: "stable", StartingCSV: oldCSV,
			InstallPlanApproval: operatorsv1alpha1.ApprovalManual,
		},
	}))
	e.approveAndComplete(ctx, oldCSV)
	e.phase("install 0.1.0: resolve, unpack, approve, InstallPlan Complete", since)
	since = time.Now()
	e.waitCSVSucceeded(ctx, oldCSV)
	e.phase("install 0.1.0: CSV Succeeded", since)

	dep := &appsv1.Deployment{}
	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "quartet-controller-manager"}, dep))
	require.Equal(t, "quay.io/quartet-operator/quartet:v0.1.0", dep.Spec.Template.Spec.Containers[0].Image)
	targets := strings.Split(dep.Spec.Template.Annotations["olm.targetNamespaces"], ",")
	slices.Sort(targets)
	require.Equal(t, []string{otherTarget, installNamespace}, targets, "WATCH_NAMESPACE comes from this annotation")
	require.EqualValues(t, 1, dep.Status.AvailableReplicas, "kwok runs the manager's pod (as a fake)")
	t.Logf("Deployment %s/%s: image %s, %d available, olm.targetNamespaces=%q (the manager's WATCH_NAMESPACE)",
		dep.Namespace, dep.Name, dep.Spec.Template.Spec.Containers[0].Image, dep.Status.AvailableReplicas,
		dep.Spec.Template.Annotations["olm.targetNamespaces"])
	crd := e.chaosCRD(ctx)
	require.Equal(t, []string{"v1alpha1"}, servedVersions(crd))

	// 6. A ChaosAgent written as v1alpha1 (stored as v1alpha1), then the upgrade to 0.2.0.
	agent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "blackadder.io/v1alpha1", "kind": "ChaosAgent",
		"metadata": map[string]any{"name": agentName},
		"spec":     map[string]any{"tantrumMode": true, "podTolerance": int64(7)},
	}}
	require.NoError(t, e.c.Create(ctx, agent))
	uid := agent.GetUID()

	since = time.Now()
	e.approveAndComplete(ctx, newCSV)
	e.phase("upgrade to 0.2.0: resolve, unpack, approve, InstallPlan Complete", since)
	since = time.Now()
	e.waitCSVSucceeded(ctx, newCSV)
	e.eventually(ctx, "CSV "+oldCSV+" removed after replacement", 2*time.Minute, func() (bool, string) {
		err := e.c.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: oldCSV}, &operatorsv1alpha1.ClusterServiceVersion{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	e.phase("upgrade to 0.2.0: CSV Succeeded, 0.1.0 replaced", since)

	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "quartet-controller-manager"}, dep))
	require.Equal(t, "quay.io/quartet-operator/quartet:v0.2.0", dep.Spec.Template.Spec.Containers[0].Image)
	sub := &operatorsv1alpha1.Subscription{}
	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: packageName}, sub))
	require.Equal(t, newCSV, sub.Status.InstalledCSV)

	// 7. The CRD now serves v1alpha1 and v1beta1 (storage); the agent survived and reads as v1beta1.
	crd = e.chaosCRD(ctx)
	require.Equal(t, []string{"v1alpha1", "v1beta1"}, servedVersions(crd))
	require.Equal(t, "v1beta1", storageVersion(crd))
	t.Logf("ChaosAgent CRD after upgrade: served %v, storage %s, status.storedVersions %v",
		servedVersions(crd), storageVersion(crd), crd.Status.StoredVersions)
	require.Contains(t, crd.Status.StoredVersions, "v1alpha1", "the agent is still stored as v1alpha1 until rewritten")

	got := &unstructured.Unstructured{}
	got.SetAPIVersion("blackadder.io/v1beta1")
	got.SetKind("ChaosAgent")
	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Name: agentName}, got))
	require.Equal(t, uid, got.GetUID(), "the same object, not a re-creation")
	spec, _, _ := unstructured.NestedMap(got.Object, "spec")
	require.Equal(t, true, spec["tantrumMode"])
	require.EqualValues(t, 7, spec["podTolerance"])
	t.Logf("ChaosAgent %s read as %s after the upgrade: spec %v", agentName, got.GetAPIVersion(), spec)

	// Rewriting it through v1beta1 moves it to the new storage version (what a storage
	// version migration does for every object before v1alpha1 may be dropped).
	require.NoError(t, e.c.Patch(ctx, got, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"quartet.dev/migrated":"v1beta1"}}}`))))
	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Name: agentName}, got))
	require.Equal(t, "v1beta1", got.GetLabels()["quartet.dev/migrated"])

	// MultiNamespace: OLM copies the CSV into the other target namespace.
	copied := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, e.c.Get(ctx, client.ObjectKey{Namespace: otherTarget, Name: newCSV}, copied))
	require.Equal(t, operatorsv1alpha1.CSVReasonCopied, copied.Status.Reason)

	e.phase("checks after upgrade", since)
	jobs := &batchv1.JobList{}
	require.NoError(t, e.c.List(ctx, jobs, client.InNamespace(olmNamespace), client.HasLabels{unpackRefLabel}))
	for _, j := range jobs.Items {
		var conds []string
		for _, c := range j.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
		t.Logf("unpack Job %s/%s: %s, succeeded pods %d", j.Namespace, j.Name, strings.Join(conds, ","), j.Status.Succeeded)
	}
	require.ElementsMatch(t, unpacked(), jobNames(jobs.Items), "the harness filled the ConfigMap of every unpack Job")
}

func (e *e2e) readCatalogImages() map[string]string {
	dirs := map[string]string{}
	files, err := filepath.Glob(filepath.Join(e.root, "catalog", packageName, "bundle-*.yaml"))
	require.NoError(e.t, err)
	require.Len(e.t, files, 2, "catalog/ must hold two bundles: run `make catalog`")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(e.t, err)
		var b struct{ Name, Image string }
		require.NoError(e.t, yaml.Unmarshal(raw, &b), f)
		switch b.Name {
		case oldCSV:
			dirs[b.Image] = filepath.Join(e.root, "hack", "olm", "bundles", oldCSV)
		case newCSV:
			dirs[b.Image] = filepath.Join(e.root, "bundle")
		default:
			e.t.Fatalf("%s: unexpected bundle %s", f, b.Name)
		}
	}
	return dirs
}

func jobNames(jobs []batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}

func (e *e2e) installOLMCRDs(ctx context.Context) {
	all := []*apiextensionsv1.CustomResourceDefinition{crds.CatalogSource(), crds.ClusterServiceVersion(), crds.InstallPlan(),
		crds.OperatorGroup(), crds.Operator(), crds.Subscription(), crds.OperatorCondition(), crds.OLMConfig()}
	for _, crd := range all {
		require.NoError(e.t, e.c.Create(ctx, crd), crd.Name)
	}
	for _, crd := range all {
		e.eventually(ctx, "CRD "+crd.Name+" Established", time.Minute, func() (bool, string) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := e.c.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
				return false, err.Error()
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, ""
				}
			}
			return false, "not established"
		})
	}
}

// emulateBundleUnpack stands in for the unpack Job's pod: for every Job OLM creates, it
// runs the pod's command, `opm alpha bundle extract -m <bundle> -n <ns> -c <configmap> -z`,
// with CONTAINER_IMAGE set as in the pod, on the directory the bundle image is built from.
// kwok marks the Job's pod Succeeded on its own; OLM then reads the ConfigMap.
func (e *e2e) emulateBundleUnpack(ctx context.Context) func() []string {
	var mu sync.Mutex
	var done []string
	handled := map[string]bool{}
	failures := map[string]int{}
	go func() {
		for ctx.Err() == nil {
			jobs := &batchv1.JobList{}
			if err := e.c.List(ctx, jobs, client.InNamespace(olmNamespace), client.HasLabels{unpackRefLabel}); err == nil {
				for _, job := range jobs.Items {
					key := string(job.UID)
					if handled[key] {
						continue
					}
					if err := e.extract(ctx, &job); err != nil {
						if failures[key]++; failures[key] == 1 && ctx.Err() == nil {
							e.t.Logf("unpack %s: %v (retrying)", job.Name, err)
						}
						continue
					}
					handled[key] = true
					mu.Lock()
					done = append(done, job.Name)
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(done)
	}
}

func (e *e2e) extract(ctx context.Context, job *batchv1.Job) error {
	var image string
	for _, c := range job.Spec.Template.Spec.Containers {
		for _, env := range c.Env {
			if env.Name == "CONTAINER_IMAGE" {
				image = env.Value
			}
		}
	}
	// The pod's "pull" init container runs the bundle image itself.
	for _, c := range job.Spec.Template.Spec.InitContainers {
		if c.Name == "pull" && image == "" {
			image = c.Image
		}
	}
	bundleDir, ok := e.bundleDirs[image]
	if !ok {
		return fmt.Errorf("unknown bundle image %q", image)
	}
	cm := job.Labels[unpackRefLabel]
	args := []string{"alpha", "bundle", "extract", "-m", bundleDir + "/", "-n", job.Namespace, "-c", cm, "-z", "-k", e.cluster.Kubeconfig}
	cmd := exec.CommandContext(ctx, e.opm, args...)
	// opm reads KUBECONFIG before -k; point both at the test cluster.
	cmd.Env = append(os.Environ(), "CONTAINER_IMAGE="+image, "KUBECONFIG="+e.cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("opm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	e.t.Logf("unpacked %s into ConfigMap %s/%s for Job %s (opm alpha bundle extract)", image, job.Namespace, cm, job.Name)
	return nil
}

// approveAndComplete waits for the InstallPlan that installs csv, logs its steps,
// approves it and waits until it is Complete.
func (e *e2e) approveAndComplete(ctx context.Context, csv string) {
	var plan *operatorsv1alpha1.InstallPlan
	e.eventually(ctx, "InstallPlan for "+csv+" awaiting approval", 5*time.Minute, func() (bool, string) {
		plans := &operatorsv1alpha1.InstallPlanList{}
		if err := e.c.List(ctx, plans, client.InNamespace(installNamespace)); err != nil {
			return false, err.Error()
		}
		var states []string
		for i := range plans.Items {
			p := &plans.Items[i]
			states = append(states, fmt.Sprintf("%s %v %s", p.Name, p.Spec.ClusterServiceVersionNames, p.Status.Phase))
			if slices.Contains(p.Spec.ClusterServiceVersionNames, csv) && p.Status.Phase == operatorsv1alpha1.InstallPlanPhaseRequiresApproval {
				plan = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("plans: %v; subscription: %s", states, e.subscriptionState(ctx))
	})
	var steps []string
	for _, s := range plan.Status.Plan {
		steps = append(steps, s.Resource.Kind+"/"+s.Resource.Name)
	}
	e.t.Logf("InstallPlan %s for %s: %d steps: %s", plan.Name, csv, len(steps), strings.Join(steps, ", "))
	patch := client.MergeFrom(plan.DeepCopy())
	plan.Spec.Approved = true
	require.NoError(e.t, e.c.Patch(ctx, plan, patch))
	e.eventually(ctx, "InstallPlan "+plan.Name+" Complete", 5*time.Minute, func() (bool, string) {
		p := &operatorsv1alpha1.InstallPlan{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(plan), p); err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == operatorsv1alpha1.InstallPlanPhaseFailed {
			e.t.Fatalf("InstallPlan %s failed: %+v", p.Name, p.Status.Conditions)
		}
		return p.Status.Phase == operatorsv1alpha1.InstallPlanPhaseComplete, string(p.Status.Phase)
	})
	e.t.Logf("InstallPlan %s Complete", plan.Name)
}

func (e *e2e) subscriptionState(ctx context.Context) string {
	sub := &operatorsv1alpha1.Subscription{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: packageName}, sub); err != nil {
		return err.Error()
	}
	var conds []string
	for _, c := range sub.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, fmt.Sprintf("%s(%s: %s)", c.Type, c.Reason, c.Message))
		}
	}
	return fmt.Sprintf("state %q current %q installed %q %v", sub.Status.State, sub.Status.CurrentCSV, sub.Status.InstalledCSV, conds)
}

func (e *e2e) waitCSVSucceeded(ctx context.Context, name string) {
	e.eventually(ctx, "CSV "+name+" Succeeded", 5*time.Minute, func() (bool, string) {
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: name}, csv); err != nil {
			return false, err.Error()
		}
		if csv.Status.Phase == operatorsv1alpha1.CSVPhaseFailed {
			e.t.Fatalf("CSV %s Failed: %s: %s", name, csv.Status.Reason, csv.Status.Message)
		}
		return csv.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded, fmt.Sprintf("%s %s: %s", csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	})
	e.t.Logf("CSV %s/%s Succeeded", installNamespace, name)
}

func (e *e2e) chaosCRD(ctx context.Context) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(e.t, e.c.Get(ctx, client.ObjectKey{Name: "chaosagents.blackadder.io"}, crd))
	return crd
}

func servedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	slices.Sort(out)
	return out
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// startProcess runs a binary with its output in <dir>/logs/<name>.log and stops it
// (SIGTERM, then SIGKILL) when the test ends, before the cluster stops.
func (e *e2e) startProcess(ctx context.Context, name string, env []string, bin string, args ...string) {
	logPath := filepath.Join(e.dir, "logs", name+".log")
	logFile, err := os.Create(logPath)
	require.NoError(e.t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(e.t, cmd.Start(), name)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
		if e.t.Failed() {
			e.t.Logf("last lines of %s:\n%s", logPath, tail(logPath, 30))
		}
	})
	go func() {
		select {
		case <-exited:
			if ctx.Err() == nil {
				e.t.Logf("%s exited early; see %s", name, logPath)
			}
		case <-ctx.Done():
		}
	}()
}

func (e *e2e) freePort() int {
	p, err := localcluster.FreePort()
	require.NoError(e.t, err)
	return p
}

func (e *e2e) waitTCP(ctx context.Context, port int) {
	e.eventually(ctx, "opm serve listening", time.Minute, func() (bool, string) {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		return true, ""
	})
}

// eventually polls cond every 250 ms until it holds, failing the test after timeout with
// the last detail cond reported.
func (e *e2e) eventually(ctx context.Context, what string, timeout time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var detail string
	for {
		var ok bool
		ok, detail = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, detail)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
