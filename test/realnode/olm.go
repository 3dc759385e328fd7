package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OLM as its releases are made: the release's Helm chart (deploy/chart of
// operator-lifecycle-manager v0.46.0, read from the Go module cache) rendered with the
// release's upstream values (deploy/upstream/values.yaml), as upstream renders the
// quickstart manifests, with the images `make images` built from the same release. (The
// module's deploy/upstream/quickstart files are stale for v0.46.0: they lack the OLMConfig
// CRD the olm operator waits for and pass -namespace, which the catalog binary refuses.)
const (
	OLMModule    = "github.com/operator-framework/operator-lifecycle-manager"
	OLMVersion   = "v0.46.0"
	OLMImage     = "quay.io/operator-framework/olm:" + OLMVersion
	OPMImage     = "quay.io/operator-framework/opm:v1.74.0"
	OLMNamespace = "olm"
	// HelmVersion is the Helm CLI `make helm-tool` builds (hack/tools/helm).
	HelmVersion = "v4.3.1"
	// KustomizeVersion is the Makefile's KUSTOMIZE_VERSION (bin/tools/kustomize-<version>).
	KustomizeVersion = "v5.8.2"
)

// OLMModuleDir finds OLM's module in the module cache (downloading the version
// hack/tools/olm pins if needed).
func OLMModuleDir(root string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", OLMModule)
	cmd.Dir = filepath.Join(root, "hack", "tools", "olm")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s in hack/tools/olm: %w", OLMModule, err)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", err
	}
	if mod.Version != OLMVersion {
		return "", fmt.Errorf("hack/tools/olm pins %s %s, the tests expect %s", OLMModule, mod.Version, OLMVersion)
	}
	return mod.Dir, nil
}

// Helm is the Helm CLI: $HELM, else bin/tools/helm-<version>.
func (e *Env) Helm() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	return filepath.Join(e.Root, "bin", "tools", "helm-"+HelmVersion)
}

// OLMManifests renders OLM's release chart with its upstream values and the local images:
// one packageserver replica (one node) and the catalog operator's opm image.
func (e *Env) OLMManifests(ctx context.Context) ([]byte, error) {
	dir, err := OLMModuleDir(e.Root)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, e.Helm(), "template", "olm", filepath.Join(dir, "deploy", "chart"),
		"--include-crds", "--namespace", OLMNamespace,
		"-f", filepath.Join(dir, "deploy", "upstream", "values.yaml"),
		"--set", "olm.image.ref="+OLMImage, "--set", "catalog.image.ref="+OLMImage, "--set", "package.image.ref="+OLMImage,
		"--set", "package.replicaCount=1", "--set", "catalog.opmImageArgs=--opmImage="+OPMImage)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template of OLM's chart: %v: %s", err, stderr.String())
	}
	return out, nil
}

// DeployOLM applies OLM's CRDs (and no others: the bundle must install on a cluster without
// the Prometheus operator's), waits until they are established, applies the rest of the
// release (without the operatorhub.io CatalogSource: it could never be pulled here) and waits until the olm and catalog operators are available
// and the packageserver CSV (OLM's aggregated API) has Succeeded.
func (e *Env) DeployOLM(ctx context.Context) error {
	manifests, err := e.OLMManifests(ctx)
	if err != nil {
		return err
	}
	var crds []string
	onlyCRDs := func(u *unstructured.Unstructured) bool {
		if u.GetKind() != "CustomResourceDefinition" {
			return false
		}
		crds = append(crds, u.GetName())
		return true
	}
	if err := e.ApplyYAML(ctx, manifests, onlyCRDs); err != nil {
		return err
	}
	for _, name := range crds {
		if err := WaitFor(ctx, "CRD "+name+" established", time.Minute, func(ctx context.Context) (bool, string, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return false, "", err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, "", nil
				}
			}
			return false, "not established", nil
		}); err != nil {
			return err
		}
	}
	if err := e.ApplyYAML(ctx, manifests, func(u *unstructured.Unstructured) bool {
		return u.GetKind() != "CustomResourceDefinition" && u.GetKind() != "CatalogSource"
	}); err != nil {
		return err
	}
	for _, name := range []string{"olm-operator", "catalog-operator"} {
		if err := e.WaitDeploymentAvailable(ctx, OLMNamespace, name, 3*time.Minute); err != nil {
			return err
		}
	}
	return WaitFor(ctx, "OLM's packageserver CSV Succeeded", 4*time.Minute, func(ctx context.Context) (bool, string, error) {
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: OLMNamespace, Name: "packageserver"}, csv); err != nil {
			return false, "", err
		}
		return csv.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded, fmt.Sprintf("phase %q %s: %s; %s", csv.Status.Phase, csv.Status.Reason, csv.Status.Message, e.PodProblems(ctx, OLMNamespace)), nil
	})
}

// WaitDeploymentAvailable waits for a Deployment's pods to be available, failing at once
// with the pods' problems when one cannot start (image pull failure, crash loop).
func (e *Env) WaitDeploymentAvailable(ctx context.Context, ns, name string, timeout time.Duration) error {
	return WaitFor(ctx, fmt.Sprintf("Deployment %s/%s available", ns, name), timeout, func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, "", err
		}
		problems := e.FindPodProblems(ctx, ns)
		if h := hopelessProblems(problems); len(h) > 0 {
			return false, "", Failed{Reason: fmt.Sprint(h)}
		}
		ready := d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
			d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas
		return ready, fmt.Sprintf("%d/%d available; %v", d.Status.AvailableReplicas, *d.Spec.Replicas, problems), nil
	})
}
