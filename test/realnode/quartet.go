package realnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What `make images` and `make catalog` publish, by the names users see. The channel is
// OldCSV (reconstructed), ReleasedCSV (0.2.0 as it shipped, its operator image built from its
// own commit), NewCSV (the current version, which skips both).
const (
	CatalogImage          = "quay.io/quartet-operator/quartet-catalog:v0.3.0"
	CatalogName           = "quartet-catalog"
	Package               = "quartet"
	Channel               = "stable"
	OldCSV                = "quartet.v0.1.0"
	ReleasedCSV           = "quartet.v0.2.0"
	NewCSV                = "quartet.v0.3.0"
	ManagerDeployment     = "quartet-controller-manager"
	OperatorImage         = "quay.io/quartet-operator/quartet:v0.3.0"
	ReleasedOperatorImage = "quay.io/quartet-operator/quartet:v0.2.0"
	// OldOperatorImage is ReleasedOperatorImage under 0.1.0's tag (the same image).
	OldOperatorImage = "quay.io/quartet-operator/quartet:v0.1.0"
	// MirrorRegistryImage is the RegistryMirror's registry of NewCSV (cmd/mirror-registry).
	MirrorRegistryImage = "quay.io/quartet-operator/mirror-registry:v0.3.0"
)

// CreateCatalogSource creates a grpc CatalogSource in OLM's namespace served from image by
// its own registry pod (restricted security context) and waits until it is READY.
func (e *Env) CreateCatalogSource(ctx context.Context, name, image string) error {
	cs := &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: OLMNamespace},
		Spec: operatorsv1alpha1.CatalogSourceSpec{
			SourceType:    operatorsv1alpha1.SourceTypeGrpc,
			Image:         image,
			DisplayName:   "Quartet (local)",
			Publisher:     "Quartet",
			GrpcPodConfig: &operatorsv1alpha1.GrpcPodConfig{SecurityContextConfig: operatorsv1alpha1.Restricted},
		},
	}
	if err := e.Client.Create(ctx, cs); err != nil {
		return err
	}
	return e.WaitCatalogReady(ctx, name)
}

// WaitCatalogReady waits until OLM's catalog operator holds a READY gRPC connection to
// the CatalogSource's registry.
func (e *Env) WaitCatalogReady(ctx context.Context, name string) error {
	return WaitFor(ctx, "CatalogSource "+name+" READY", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		cs := &operatorsv1alpha1.CatalogSource{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: OLMNamespace, Name: name}, cs); err != nil {
			return false, "", err
		}
		if h := hopelessProblems(e.FindPodProblems(ctx, OLMNamespace)); len(h) > 0 {
			return false, "", Failed{Reason: fmt.Sprint(h)}
		}
		state := "no connection yet"
		if cs.Status.GRPCConnectionState != nil {
			state = cs.Status.GRPCConnectionState.LastObservedState
		}
		return state == "READY", state + "; " + cs.Status.Message, nil
	})
}

// Install is one way of installing Quartet with OLM.
type Install struct {
	// Namespace holds the OperatorGroup, the Subscription and the manager.
	Namespace string
	// Targets are the OperatorGroup's target namespaces; none means AllNamespaces.
	Targets []string
	// Catalog is the CatalogSource (default CatalogName).
	Catalog string
	// StartingCSV installs this version first (default: the channel head).
	StartingCSV string
	// Manual asks for manual InstallPlan approval.
	Manual bool
	// Config reaches the manager's Deployment (environment variables, resources).
	Config *operatorsv1alpha1.SubscriptionConfig
	// OperatorGroupAnnotations, e.g. operatorframework.io/bundle-unpack-timeout.
	OperatorGroupAnnotations map[string]string
}

// Subscribe creates the namespaces, the OperatorGroup and the Subscription.
func (e *Env) Subscribe(ctx context.Context, in Install) error {
	if in.Catalog == "" {
		in.Catalog = CatalogName
	}
	for _, ns := range append([]string{in.Namespace}, in.Targets...) {
		if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if err := e.Client.Create(ctx, &operatorsv1.OperatorGroup{
		ObjectMeta: metav1.ObjectMeta{Name: Package, Namespace: in.Namespace, Annotations: in.OperatorGroupAnnotations},
		Spec:       operatorsv1.OperatorGroupSpec{TargetNamespaces: in.Targets},
	}); err != nil {
		return err
	}
	approval := operatorsv1alpha1.ApprovalAutomatic
	if in.Manual {
		approval = operatorsv1alpha1.ApprovalManual
	}
	return e.Client.Create(ctx, &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: Package, Namespace: in.Namespace},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource: in.Catalog, CatalogSourceNamespace: OLMNamespace,
			Package: Package, Channel: Channel, StartingCSV: in.StartingCSV,
			InstallPlanApproval: approval, Config: in.Config,
		},
	})
}

// subscriptionFailure returns OLM's own verdict when the Subscription cannot proceed.
func (e *Env) subscriptionFailure(ctx context.Context, ns string) string {
	subs := &operatorsv1alpha1.SubscriptionList{}
	if err := e.Client.List(ctx, subs, client.InNamespace(ns)); err != nil {
		return ""
	}
	for _, s := range subs.Items {
		for _, c := range s.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == operatorsv1alpha1.SubscriptionBundleUnpackFailed ||
				c.Type == operatorsv1alpha1.SubscriptionInstallPlanFailed) {
				return fmt.Sprintf("Subscription %s/%s %s: %s: %s", ns, s.Name, c.Type, c.Reason, c.Message)
			}
		}
	}
	return ""
}

// ApproveInstallPlan waits for the InstallPlan that installs csv, approves it and waits
// until it is Complete. It returns the plan's steps (Kind/name).
func (e *Env) ApproveInstallPlan(ctx context.Context, ns, csv string) ([]string, error) {
	var plan *operatorsv1alpha1.InstallPlan
	err := WaitFor(ctx, "InstallPlan for "+csv+" awaiting approval", 5*time.Minute, func(ctx context.Context) (bool, string, error) {
		plans := &operatorsv1alpha1.InstallPlanList{}
		if err := e.Client.List(ctx, plans, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		for i := range plans.Items {
			p := &plans.Items[i]
			if slices.Contains(p.Spec.ClusterServiceVersionNames, csv) && p.Status.Phase == operatorsv1alpha1.InstallPlanPhaseRequiresApproval {
				plan = p
				return true, "", nil
			}
		}
		if f := e.subscriptionFailure(ctx, ns); f != "" {
			return false, "", Failed{Reason: f + "\n" + e.DiagnoseInstall(ctx, ns)}
		}
		return false, e.DiagnoseInstall(ctx, ns), nil
	})
	if err != nil {
		return nil, err
	}
	var steps []string
	for _, s := range plan.Status.Plan {
		steps = append(steps, s.Resource.Kind+"/"+s.Resource.Name)
	}
	patch := client.MergeFrom(plan.DeepCopy())
	plan.Spec.Approved = true
	if err := e.Client.Patch(ctx, plan, patch); err != nil {
		return nil, err
	}
	return steps, WaitFor(ctx, "InstallPlan "+plan.Name+" Complete", 5*time.Minute, func(ctx context.Context) (bool, string, error) {
		p := &operatorsv1alpha1.InstallPlan{}
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(plan), p); err != nil {
			return false, "", err
		}
		if p.Status.Phase == operatorsv1alpha1.InstallPlanPhaseFailed {
			return false, "", Failed{Reason: e.DiagnoseInstall(ctx, ns)}
		}
		return p.Status.Phase == operatorsv1alpha1.InstallPlanPhaseComplete, string(p.Status.Phase), nil
	})
}

// WaitCSVSucceeded waits until csv in ns has Succeeded, which OLM decides when the
// manager's Deployment is available, i.e. its readiness probe passes. It fails at once,
// with OLM's statuses and the pods' problems, when the CSV Failed, the Subscription
// reports an unpack or InstallPlan failure, a pod cannot start, or the CSV's requirements
// stay unmet.
func (e *Env) WaitCSVSucceeded(ctx context.Context, ns, csv string, timeout time.Duration) error {
	var unmetSince time.Time
	return WaitFor(ctx, "CSV "+ns+"/"+csv+" Succeeded", timeout, func(ctx context.Context) (bool, string, error) {
		c := &operatorsv1alpha1.ClusterServiceVersion{}
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: csv}, c)
		if f := e.subscriptionFailure(ctx, ns); f != "" {
			return false, "", Failed{Reason: f + "\n" + e.DiagnoseInstall(ctx, ns)}
		}
		for _, n := range []string{ns, OLMNamespace} {
			if h := hopelessProblems(e.FindPodProblems(ctx, n)); len(h) > 0 {
				return false, "", Failed{Reason: fmt.Sprint(h) + "\n" + e.DiagnoseInstall(ctx, ns)}
			}
		}
		if err != nil {
			return false, e.DiagnoseInstall(ctx, ns), err
		}
		if c.Status.Phase == operatorsv1alpha1.CSVPhaseFailed {
			return false, "", Failed{Reason: e.DiagnoseInstall(ctx, ns)}
		}
		// The InstallPlan creates a bundle's CRDs and RBAC before its CSV: requirements
		// still missing 45 s later will not appear on their own.
		if c.Status.Reason == operatorsv1alpha1.CSVReasonRequirementsNotMet {
			if unmetSince.IsZero() {
				unmetSince = time.Now()
			} else if time.Since(unmetSince) > 45*time.Second {
				return false, "", Failed{Reason: e.DiagnoseInstall(ctx, ns)}
			}
		} else {
			unmetSince = time.Time{}
		}
		return c.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded, e.DiagnoseInstall(ctx, ns), nil
	})
}

// ManagerPod returns the manager's running pod in ns (an error unless exactly one).
func (e *Env) ManagerPod(ctx context.Context, ns string) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return nil, err
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("%d running manager pods in %s", len(running), ns)
	}
	return &running[0], nil
}

// Uninstall removes the Subscription, every CSV and the OperatorGroup in ns, as an admin
// uninstalls an operator from OLM, and waits until the manager's Deployment and pods are
// gone. CRDs and CRs stay (OLM never deletes them).
func (e *Env) Uninstall(ctx context.Context, ns string) error {
	var errs []error
	for _, obj := range []client.Object{&operatorsv1alpha1.Subscription{}, &operatorsv1alpha1.ClusterServiceVersion{}, &operatorsv1.OperatorGroup{}} {
		if err := e.Client.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return WaitFor(ctx, "the manager in "+ns+" gone", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ManagerDeployment}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return false, "Deployment still there", nil
		}
		pods := &corev1.PodList{}
		if err := e.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return false, "", err
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return len(pods.Items) == 0, "pods: " + strings.Join(names, ", "), nil
	})
}

// CSVsNamed lists the namespaces holding a CSV of that name (the original and the copies
// OLM places in every target namespace).
func (e *Env) CSVsNamed(ctx context.Context, name string) []string {
	csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
	if err := e.Client.List(ctx, csvs); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, c := range csvs.Items {
		if c.Name == name {
			out = append(out, c.Namespace)
		}
	}
	return out
}

// DeleteQuartetCRDs removes Quartet's CRDs (and so every CR left), as docs/OLM.md tells an
// admin to after an uninstall, and waits until they are gone. OLM keeps CRDs when an
// operator is uninstalled and refuses to install an older bundle over newer ones (0.1.0's
// ChaosAgent CRD would drop the stored version v1beta1), so a test that installs 0.1.0 or
// 0.2.0 starts from a cluster without them, as a cluster that ran them had.
func (e *Env) DeleteQuartetCRDs(ctx context.Context) error {
	names := []string{"chaosagents.blackadder.io", "copyrators.flant.com", "exchangerates.operators.brennerm.github.io",
		"registrymirrors.mirrors.quartet.dev", "registryhostgrants.mirrors.quartet.dev"}
	for _, n := range names {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := e.Client.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return WaitFor(ctx, "Quartet's CRDs deleted", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, n := range names {
			if err := e.Client.Get(ctx, client.ObjectKey{Name: n}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
				left = append(left, n)
			}
		}
		return len(left) == 0, fmt.Sprintf("still there (a CR with a finalizer and no manager to remove it?): %v", left), nil
	})
}
