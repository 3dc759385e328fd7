// Package bundlevalidation checks the OLM bundle in bundle/ the way operator-sdk and
// OperatorHub do, and that it was regenerated (`make bundle`) after the last API change.
package bundlevalidation

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/internal/localcluster"
)

func repoPath(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(append([]string{root}, elem...)...)
}

func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(repoPath(t, "bundle"))
	require.NoError(t, err, "bundle/ must load; run `make bundle`")
	require.NotNil(t, b.CSV, "bundle/ has no ClusterServiceVersion")
	return b
}

// TestBundleValidates runs the validators `operator-sdk bundle validate
// --select-optional suite=operatorframework` runs, and demands no error and no warning.
func TestBundleValidates(t *testing.T) {
	b := loadBundle(t)
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.AlphaDeprecatedAPIsValidator,
		validation.GoodPracticesValidator,
	)
	// The deprecated-API checks target the Kubernetes release the project builds and
	// tests against.
	k8sVersion, err := localcluster.KubernetesVersion()
	require.NoError(t, err)
	objs := append(b.ObjectsToValidate(), map[string]string{"k8s-version": strings.TrimPrefix(k8sVersion, "v")})
	results := validators.Validate(objs...)
	require.NotEmpty(t, results)
	for _, r := range results {
		for _, e := range r.Errors {
			t.Errorf("%s: error: %s", r.Name, e.Error())
		}
		for _, w := range r.Warnings {
			t.Errorf("%s: warning: %s", r.Name, w.Error())
		}
	}
}

// TestBundleCRDsMatchConfig fails when the API changed and `make bundle` was not run.
func TestBundleCRDsMatchConfig(t *testing.T) {
	b := loadBundle(t)
	inBundle := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range b.V1CRDs {
		inBundle[crd.Name] = crd
	}
	files, err := filepath.Glob(repoPath(t, "config", "crd", "bases", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		want := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.UnmarshalStrict(raw, want), f)
		got, ok := inBundle[want.Name]
		if !assert.Truef(t, ok, "CRD %s is in config/crd/bases but not in bundle/: run `make bundle`", want.Name) {
			continue
		}
		assert.Truef(t, equality.Semantic.DeepEqual(want.Spec, got.Spec),
			"CRD %s in bundle/ differs from config/crd/bases: run `make bundle`", want.Name)
		delete(inBundle, want.Name)
	}
	for name := range inBundle {
		t.Errorf("CRD %s is in bundle/ but not in config/crd/bases: run `make bundle`", name)
	}
}

// TestBundleCSVContract checks the promises the CSV makes beyond what validators look at.
func TestBundleCSVContract(t *testing.T) {
	b := loadBundle(t)
	csv := b.CSV
	spec := csv.Spec

	t.Run("permissions name no wildcard", func(t *testing.T) {
		perms := append(slices.Clone(spec.InstallStrategy.StrategySpec.ClusterPermissions), spec.InstallStrategy.StrategySpec.Permissions...)
		require.NotEmpty(t, perms)
		for _, p := range perms {
			for _, r := range p.Rules {
				for _, field := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
					for _, v := range field {
						assert.NotContainsf(t, v, "*", "service account %s: rule %s grants a wildcard", p.ServiceAccountName, ruleString(r))
					}
				}
			}
		}
	})

	t.Run("every CRD version is owned", func(t *testing.T) {
		owned := map[string]bool{}
		for _, d := range spec.CustomResourceDefinitions.Owned {
			owned[d.Name+"/"+d.Version] = true
			assert.NotEmptyf(t, d.Description, "owned %s/%s has no description", d.Name, d.Version)
			assert.NotEmptyf(t, d.DisplayName, "owned %s/%s has no display name", d.Name, d.Version)
		}
		for _, crd := range b.V1CRDs {
			for _, v := range crd.Spec.Versions {
				if v.Served {
					assert.Truef(t, owned[crd.Name+"/"+v.Name], "CRD %s version %s is served but not listed as owned", crd.Name, v.Name)
				}
			}
		}
	})

	t.Run("descriptors name fields that exist", func(t *testing.T) {
		schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
		for _, crd := range b.V1CRDs {
			for _, v := range crd.Spec.Versions {
				if v.Schema != nil {
					schemas[crd.Name+"/"+v.Name] = v.Schema.OpenAPIV3Schema
				}
			}
		}
		for _, d := range spec.CustomResourceDefinitions.Owned {
			root := schemas[d.Name+"/"+d.Version]
			require.NotNilf(t, root, "no schema for %s/%s", d.Name, d.Version)
			for _, sd := range d.SpecDescriptors {
				assert.Truef(t, hasPath(root, "spec."+sd.Path), "%s/%s: specDescriptor %q names no field", d.Name, d.Version, sd.Path)
			}
			for _, sd := range d.StatusDescriptors {
				assert.Truef(t, hasPath(root, "status."+sd.Path), "%s/%s: statusDescriptor %q names no field", d.Name, d.Version, sd.Path)
			}
		}
	})

	t.Run("install modes", func(t *testing.T) {
		supported := map[operatorsv1alpha1.InstallModeType]bool{}
		for _, m := range spec.InstallModes {
			supported[m.Type] = m.Supported
		}
		for _, m := range []operatorsv1alpha1.InstallModeType{
			operatorsv1alpha1.InstallModeTypeOwnNamespace, operatorsv1alpha1.InstallModeTypeSingleNamespace,
			operatorsv1alpha1.InstallModeTypeMultiNamespace, operatorsv1alpha1.InstallModeTypeAllNamespaces,
		} {
			assert.Truef(t, supported[m], "install mode %s must be supported (the manager reads WATCH_NAMESPACE)", m)
		}
	})

	t.Run("deployment", func(t *testing.T) {
		deps := spec.InstallStrategy.StrategySpec.DeploymentSpecs
		require.Len(t, deps, 1)
		pod := deps[0].Spec.Template.Spec
		require.Len(t, pod.Containers, 1)
		c := pod.Containers[0]
		assert.Equal(t, csv.Annotations["containerImage"], c.Image, "containerImage annotation and the manager image differ")
		assert.NotNil(t, c.LivenessProbe)
		assert.NotNil(t, c.ReadinessProbe)
		assert.NotEmpty(t, c.Resources.Requests)
		assert.NotEmpty(t, c.Resources.Limits)
		require.NotNil(t, c.SecurityContext)
		assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation)
		assert.Equal(t, ptr.To(true), c.SecurityContext.ReadOnlyRootFilesystem)
		require.NotNil(t, pod.SecurityContext)
		assert.Equal(t, ptr.To(true), pod.SecurityContext.RunAsNonRoot)

		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
				continue
			}
			env[e.Name] = e.Value
		}
		assert.Equal(t, "fieldRef:metadata.annotations['olm.targetNamespaces']", env["WATCH_NAMESPACE"])
		assert.Equal(t, c.Image, env["RELATED_IMAGE_NODE_AGENT"], "the node agent runs the operator image")

		related := map[string]string{}
		for _, r := range spec.RelatedImages {
			related[r.Name] = r.Image
		}
		assert.Equal(t, env["RELATED_IMAGE_REGISTRY"], related["registry"])
		assert.Equal(t, c.Image, related["node-agent"])
	})

	t.Run("icon is config/manifests/icon.svg", func(t *testing.T) {
		svg, err := os.ReadFile(repoPath(t, "config", "manifests", "icon.svg"))
		require.NoError(t, err)
		require.Len(t, spec.Icon, 1)
		assert.Equal(t, "image/svg+xml", spec.Icon[0].MediaType)
		assert.Equal(t, base64.StdEncoding.EncodeToString(svg), spec.Icon[0].Data)
	})

	t.Run("examples for every kind", func(t *testing.T) {
		var examples []map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples))
		kinds := map[string]bool{}
		for _, e := range examples {
			kinds[e["apiVersion"].(string)+"/"+e["kind"].(string)] = true
		}
		for _, d := range spec.CustomResourceDefinitions.Owned {
			group := strings.SplitN(d.Name, ".", 2)[1]
			assert.Truef(t, kinds[group+"/"+d.Version+"/"+d.Kind], "no alm-example for %s/%s %s", group, d.Version, d.Kind)
		}
	})

	t.Run("no timestamp", func(t *testing.T) {
		_, ok := csv.Annotations["createdAt"]
		assert.False(t, ok, "createdAt makes `make bundle` change the bundle on every run")
	})
}

// TestCatalogMatchesBundle fails when bundle/ changed and `make catalog` was not run: the
// catalog's entry for the current version must carry the same CSV and CRDs.
func TestCatalogMatchesBundle(t *testing.T) {
	b := loadBundle(t)
	version := b.CSV.Spec.Version.String()
	raw, err := os.ReadFile(repoPath(t, "catalog", "quartet", "bundle-v"+version+".yaml"))
	require.NoError(t, err, "catalog/ has no bundle for %s: run `make catalog`", version)
	var entry struct {
		Name       string `json:"name"`
		Image      string `json:"image"`
		Properties []struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"properties"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &entry))
	assert.Equal(t, b.CSV.Name, entry.Name)
	assert.True(t, strings.HasSuffix(entry.Image, "-bundle:v"+version), "bundle image %q is not a BUNDLE_IMG-style name", entry.Image)

	var csv *operatorsv1alpha1.ClusterServiceVersion
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, p := range entry.Properties {
		if p.Type != "olm.bundle.object" {
			continue
		}
		var v struct {
			Data []byte `json:"data"`
		}
		require.NoError(t, json.Unmarshal(p.Value, &v))
		var meta struct{ Kind string }
		require.NoError(t, json.Unmarshal(v.Data, &meta))
		switch meta.Kind {
		case "ClusterServiceVersion":
			csv = &operatorsv1alpha1.ClusterServiceVersion{}
			require.NoError(t, json.Unmarshal(v.Data, csv))
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			require.NoError(t, json.Unmarshal(v.Data, crd))
			crds[crd.Name] = crd
		}
	}
	require.NotNil(t, csv, "the catalog entry carries no CSV")
	assert.True(t, equality.Semantic.DeepEqual(b.CSV.Spec, csv.Spec), "the catalog's CSV differs from bundle/: run `make catalog`")
	assert.Equal(t, b.CSV.Annotations, csv.Annotations, "the catalog's CSV annotations differ from bundle/: run `make catalog`")
	require.Len(t, crds, len(b.V1CRDs))
	for _, want := range b.V1CRDs {
		got, ok := crds[want.Name]
		if assert.Truef(t, ok, "CRD %s missing from the catalog: run `make catalog`", want.Name) {
			assert.Truef(t, equality.Semantic.DeepEqual(want.Spec, got.Spec), "CRD %s differs from bundle/: run `make catalog`", want.Name)
		}
	}
}

// hasPath reports whether a dotted path of property names exists in a schema.
func hasPath(s *apiextensionsv1.JSONSchemaProps, path string) bool {
	for _, name := range strings.Split(path, ".") {
		next, ok := s.Properties[name]
		if !ok {
			return false
		}
		s = &next
	}
	return true
}

func ruleString(r rbacv1.PolicyRule) string {
	return strings.Join(r.APIGroups, ",") + "/" + strings.Join(r.Resources, ",") + ":" + strings.Join(r.Verbs, ",")
}
