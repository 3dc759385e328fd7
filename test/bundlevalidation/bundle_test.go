// Package bundlevalidation checks the OLM bundle in bundle/ the way operator-sdk and
// OperatorHub do, and that it was regenerated (`make bundle`) after the last API change.
package bundlevalidation

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/hack/olm/release"
	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/testenv"
)

func repoPath(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(append([]string{root}, elem...)...)
}

// read returns the content of a file of the repository.
func read(t *testing.T, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, elem...))
	require.NoError(t, err)
	return b
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
	validators := validation.DefaultBundleValidators.WithValidators(validation.OperatorHubV2Validator, validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator, validation.AlphaDeprecatedAPIsValidator, validation.GoodPracticesValidator)
	// The deprecated-API checks target the Kubernetes release the project builds and tests against.
	k8sVersion, err := localcluster.KubernetesVersion()
	require.NoError(t, err)
	results := validators.Validate(append(b.ObjectsToValidate(), map[string]string{"k8s-version": strings.TrimPrefix(k8sVersion, "v")})...)
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
	inBundle := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range loadBundle(t).V1CRDs {
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
		if assert.Truef(t, ok, "CRD %s is in config/crd/bases but not in bundle/: run `make bundle`", want.Name) {
			assert.Truef(t, equality.Semantic.DeepEqual(want.Spec, got.Spec), "CRD %s in bundle/ differs from config/crd/bases: run `make bundle`", want.Name)
			delete(inBundle, want.Name)
		}
	}
	for name := range inBundle {
		t.Errorf("CRD %s is in bundle/ but not in config/crd/bases: run `make bundle`", name)
	}
}

const openshiftVersions = "com.redhat.openshift.versions"

// TestBundleCSVContract checks the promises the CSV makes beyond what validators look at.
func TestBundleCSVContract(t *testing.T) {
	b := loadBundle(t)
	csv := b.CSV
	spec := csv.Spec
	examples := func(t *testing.T) (out []unstructured.Unstructured) {
		t.Helper()
		require.NoError(t, yaml.Unmarshal([]byte(csv.Annotations["alm-examples"]), &out))
		return out
	}

	t.Run("permissions name no wildcard", func(t *testing.T) {
		perms := append(slices.Clone(spec.InstallStrategy.StrategySpec.ClusterPermissions), spec.InstallStrategy.StrategySpec.Permissions...)
		require.NotEmpty(t, perms)
		for _, p := range perms {
			for _, r := range p.Rules {
				for _, v := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs) {
					assert.NotContainsf(t, v, "*", "service account %s: rule %s grants a wildcard", p.ServiceAccountName, r.String())
				}
			}
		}
	})

	t.Run("every CRD version is owned", func(t *testing.T) {
		var owned []string
		for _, d := range spec.CustomResourceDefinitions.Owned {
			owned = append(owned, d.Name+"/"+d.Version)
			assert.NotEmptyf(t, d.Description, "owned %s/%s has no description", d.Name, d.Version)
			assert.NotEmptyf(t, d.DisplayName, "owned %s/%s has no display name", d.Name, d.Version)
		}
		for _, crd := range b.V1CRDs {
			for _, v := range crd.Spec.Versions {
				assert.Truef(t, !v.Served || slices.Contains(owned, crd.Name+"/"+v.Name), "CRD %s version %s is served but not listed as owned", crd.Name, v.Name)
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
		for _, m := range []operatorsv1alpha1.InstallModeType{operatorsv1alpha1.InstallModeTypeOwnNamespace, operatorsv1alpha1.InstallModeTypeSingleNamespace,
			operatorsv1alpha1.InstallModeTypeMultiNamespace, operatorsv1alpha1.InstallModeTypeAllNamespaces} {
			assert.Containsf(t, spec.InstallModes, operatorsv1alpha1.InstallMode{Type: m, Supported: true},
				"install mode %s must be supported (the manager reads WATCH_NAMESPACE)", m)
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
			env[e.Name] = e.Value
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
			}
		}
		assert.Equal(t, "fieldRef:metadata.annotations['olm.targetNamespaces']", env["WATCH_NAMESPACE"])
		assert.Equal(t, c.Image, env["RELATED_IMAGE_NODE_AGENT"], "the node agent runs the operator image")

		related := map[string]string{}
		for _, r := range spec.RelatedImages {
			related[r.Name] = r.Image
		}
		assert.Equal(t, env["RELATED_IMAGE_REGISTRY"], related["registry"])
		// The mirror's registry is cmd/mirror-registry, released with the operator.
		assert.Equal(t, "quay.io/quartet-operator/mirror-registry:v"+spec.Version.String(), env["RELATED_IMAGE_REGISTRY"])
		assert.Equal(t, c.Image, related["node-agent"])
	})

	t.Run("icon is config/manifests/icon.svg", func(t *testing.T) {
		require.Len(t, spec.Icon, 1)
		assert.Equal(t, "image/svg+xml", spec.Icon[0].MediaType)
		assert.Equal(t, base64.StdEncoding.EncodeToString(read(t, "config", "manifests", "icon.svg")), spec.Icon[0].Data)
	})

	t.Run("examples for every kind", func(t *testing.T) {
		var kinds []string
		for _, e := range examples(t) {
			kinds = append(kinds, e.GetAPIVersion()+"/"+e.GetKind())
		}
		for _, d := range spec.CustomResourceDefinitions.Owned {
			group := strings.SplitN(d.Name, ".", 2)[1]
			assert.Containsf(t, kinds, group+"/"+d.Version+"/"+d.Kind, "no alm-example for %s/%s %s", group, d.Version, d.Kind)
		}
	})

	t.Run("a spec descriptor for every field an example sets", func(t *testing.T) {
		// operator-sdk scorecard's olm-spec-descriptors (make olm-e2e) fails otherwise; this
		// says so in make test. Descriptors are written in config/manifests/bases.
		for _, e := range examples(t) {
			version := e.GroupVersionKind().Version
			exampleSpec, _, _ := unstructured.NestedMap(e.Object, "spec")
			for _, d := range spec.CustomResourceDefinitions.Owned {
				if d.Kind != e.GetKind() || d.Version != version {
					continue
				}
				for field := range exampleSpec {
					assert.Truef(t, slices.ContainsFunc(d.SpecDescriptors, func(sd operatorsv1alpha1.SpecDescriptor) bool { return sd.Path == field }),
						"example %s %s/%s sets spec.%s, which has no specDescriptor in config/manifests/bases", e.GetKind(), version, e.GetName(), field)
				}
			}
		}
	})

	t.Run("createdAt is a commit time", func(t *testing.T) {
		// make bundle sets it from HEAD's commit time (hack/olm/csvmeta), never the wall clock:
		// CI's `make bundle` on a clean checkout must reproduce it.
		created, err := time.Parse(time.RFC3339, csv.Annotations["createdAt"])
		require.NoError(t, err, "createdAt %q (the community catalogs require it)", csv.Annotations["createdAt"])
		assert.Equal(t, time.UTC, created.Location(), "createdAt in UTC")
	})

	t.Run("OpenShift versions", func(t *testing.T) {
		// OpenShift's community pipeline (operator-pipelines, check_api_version_constraints)
		// refuses a bundle with minKubeVersion and without com.redhat.openshift.versions, or
		// whose OpenShift versions include one older than minKubeVersion's Kubernetes.
		var ann struct{ Annotations map[string]string }
		require.NoError(t, yaml.Unmarshal(read(t, "bundle", "metadata", "annotations.yaml"), &ann))
		versions := ann.Annotations[openshiftVersions]
		require.NotEmpty(t, versions, "bundle/metadata/annotations.yaml lacks %s", openshiftVersions)
		label := ""
		for _, line := range strings.Split(string(read(t, "bundle.Dockerfile")), "\n") {
			if v, ok := strings.CutPrefix(line, "LABEL "+openshiftVersions+"="); ok {
				label = v
			}
		}
		assert.Equal(t, versions, label, "bundle.Dockerfile's %s label differs from the annotation", openshiftVersions)
		// The oldest version selected: "v4.18" (4.18 and later), "v4.18-v4.20" or "=v4.18"
		// (ParseGeneric reads the leading version).
		oldest, err := version.ParseGeneric(strings.TrimPrefix(strings.TrimSpace(versions), "="))
		require.NoError(t, err, "%s %q", openshiftVersions, versions)
		require.Equal(t, uint(4), oldest.Major(), "%s %q: not OpenShift 4", openshiftVersions, versions)
		minKube, err := version.ParseGeneric(spec.MinKubeVersion)
		require.NoError(t, err)
		// OpenShift 4.<minor> (4.3 and later) is Kubernetes 1.<minor+13> (Red Hat's table,
		// access.redhat.com/solutions/4870701, and operator-pipelines' OCP_TO_K8S).
		kube := version.MajorMinor(1, oldest.Minor()+13)
		assert.Truef(t, kube.AtLeast(version.MajorMinor(minKube.Major(), minKube.Minor())), "%s=%s includes OpenShift 4.%d (Kubernetes %s), older than minKubeVersion %s",
			openshiftVersions, versions, oldest.Minor(), kube, spec.MinKubeVersion)
	})

	t.Run("monitoring", func(t *testing.T) {
		// No object of the Prometheus operator's kinds: OLM fails the whole install on a
		// cluster without their CRDs, and OperatorHub.io's community pipeline installs the
		// bundle on such a cluster. The description tells the admin what to apply instead.
		for _, o := range b.Objects {
			assert.NotEqual(t, "monitoring.coreos.com", o.GroupVersionKind().Group,
				"bundle/ carries %s %s: config/manifests must not include config/prometheus", o.GetKind(), o.GetName())
		}
		assert.Contains(t, spec.Description, "-k config/prometheus", "the CSV's description says how to add the ServiceMonitor and the alerts")
	})
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

// TestCatalogMatchesBundle fails when bundle/ changed and `make catalog` was not run: the
// catalog's entry for each version carries the same CSV and CRDs as its bundle directory:
// bundle/ for the current version, the frozen bundle of each release, the reconstructed v0.1.0.
func TestCatalogMatchesBundle(t *testing.T) {
	dirs := map[string]string{loadBundle(t).CSV.Spec.Version.String(): "bundle", firstVersion: bundleDir(firstVersion)}
	for _, r := range readReleases(t) {
		dirs[r.Version] = bundleDir(r.Version)
	}
	for version, dir := range dirs {
		t.Run(version, func(t *testing.T) {
			b, err := manifests.GetBundleFromDir(repoPath(t, dir))
			require.NoError(t, err, dir)
			require.Equal(t, version, b.CSV.Spec.Version.String(), "%s holds another version", dir)
			raw, err := os.ReadFile(repoPath(t, "catalog", "quartet", "bundle-v"+version+".yaml"))
			require.NoError(t, err, "catalog/ has no bundle for %s: run `make catalog`", version)
			var entry struct {
				Name, Image string
				Properties  []struct {
					Type  string
					Value json.RawMessage
				}
			}
			require.NoError(t, yaml.Unmarshal(raw, &entry))
			assert.Equal(t, b.CSV.Name, entry.Name)
			assert.Equal(t, "quay.io/quartet-operator/quartet-bundle:v"+version, entry.Image, "not the BUNDLE_IMG-style name of %s", version)

			// The entry carries the CSV's metadata (olm.csv.metadata, not the bundle's objects: OLM
			// reads those from the bundle image) and one olm.gvk per served version of each CRD.
			var meta *csvMetadata
			var gvks []string
			for _, p := range entry.Properties {
				switch p.Type {
				case "olm.bundle.object":
					t.Errorf("the catalog entry of %s carries olm.bundle.object (catalogs for OpenShift 4.17+ refuse it): run `make catalog`", version)
				case "olm.csv.metadata":
					require.Nil(t, meta, "two olm.csv.metadata properties")
					meta = &csvMetadata{}
					require.NoError(t, yaml.UnmarshalStrict(p.Value, meta))
				case "olm.gvk":
					var v struct{ Group, Kind, Version string }
					require.NoError(t, json.Unmarshal(p.Value, &v))
					gvks = append(gvks, v.Group+"/"+v.Version+"/"+v.Kind)
				}
			}
			require.NotNil(t, meta, "the catalog entry carries no olm.csv.metadata")
			spec := b.CSV.Spec
			want := csvMetadata{
				Annotations: b.CSV.Annotations, APIServiceDefinitions: spec.APIServiceDefinitions,
				CRDDescriptions: spec.CustomResourceDefinitions, Description: spec.Description,
				DisplayName: spec.DisplayName, InstallModes: spec.InstallModes, Keywords: spec.Keywords,
				Labels: b.CSV.Labels, Links: spec.Links, Maintainers: spec.Maintainers, Maturity: spec.Maturity,
				MinKubeVersion: spec.MinKubeVersion, NativeAPIs: spec.NativeAPIs, Provider: spec.Provider,
			}
			assert.True(t, equality.Semantic.DeepEqual(want, *meta), "the catalog's CSV metadata differs from %s: run `make catalog`", dir)
			var wantGVKs []string
			for _, crd := range b.V1CRDs {
				for _, v := range crd.Spec.Versions {
					if v.Served {
						wantGVKs = append(wantGVKs, crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind)
					}
				}
			}
			assert.ElementsMatch(t, wantGVKs, gvks, "the catalog's APIs differ from the CRDs of %s: run `make catalog`", dir)
		})
	}
}

// csvMetadata is opm's olm.csv.metadata property (operator-registry alpha/property), the
// CSV's fields a catalog client shows (encoding/json matches the camelCase names); an unknown
// field fails the decode.
type csvMetadata struct {
	Annotations, Labels                                map[string]string
	APIServiceDefinitions                              operatorsv1alpha1.APIServiceDefinitions
	CRDDescriptions                                    operatorsv1alpha1.CustomResourceDefinitions
	Description, DisplayName, Maturity, MinKubeVersion string
	InstallModes                                       []operatorsv1alpha1.InstallMode
	Keywords                                           []string
	Links                                              []operatorsv1alpha1.AppLink
	Maintainers                                        []operatorsv1alpha1.Maintainer
	NativeAPIs                                         []metav1.GroupVersionKind
	Provider                                           operatorsv1alpha1.AppLink
}

// TestUpgradeChain: the stable channel is v0.1.0, then each release of hack/olm/releases, then
// the current version, each replacing the one before and skipping every version from v0.1.0
// (an install of any older version goes straight to the newest); the current CSV names the
// same edge (spec.replaces, olm.skipRange), for catalogs built from the CSVs (ci.yaml's
// replaces-mode).
func TestUpgradeChain(t *testing.T) {
	current := loadBundle(t).CSV
	versions := []string{firstVersion}
	for _, r := range readReleases(t) {
		versions = append(versions, r.Version)
	}
	versions = append(versions, current.Spec.Version.String())

	var channel struct {
		Schema, Name string
		Entries      []struct {
			Name, Replaces, SkipRange string
			Skips                     []string
		}
	}
	require.NoError(t, yaml.Unmarshal(read(t, "catalog", "quartet", "channel-stable.yaml"), &channel))
	require.Equal(t, "olm.channel", channel.Schema)
	require.Equal(t, "stable", channel.Name)
	require.Len(t, channel.Entries, len(versions), "channel stable: want %v", versions)
	for i, v := range versions {
		e := channel.Entries[i]
		assert.Equal(t, "quartet.v"+v, e.Name)
		assert.Empty(t, e.Skips)
		if i == 0 {
			assert.Empty(t, e.Replaces+e.SkipRange, "v%s is the first version", v)
			continue
		}
		assert.Equal(t, "quartet.v"+versions[i-1], e.Replaces, "v%s replaces the version before it", v)
		assert.Equal(t, ">="+firstVersion+" <"+v, e.SkipRange, "v%s skips every version before it", v)
	}
	last := channel.Entries[len(channel.Entries)-1]
	assert.Equal(t, last.Replaces, current.Spec.Replaces, "the CSV's spec.replaces differs from the channel: run `make bundle catalog`")
	assert.Equal(t, last.SkipRange, current.Annotations["olm.skipRange"], "the CSV's olm.skipRange differs from the channel")
}

// TestReleasesStayAsShipped: each release's bundle in hack/olm/bundles/ is, byte for byte,
// the bundle/ of its commit, and the reconstructed v0.1.0 is what it was when the oldest
// release shipped (it is derived from that release's frozen bundle, not from today's). Needs
// the clone's history (CI clones it all).
func TestReleasesStayAsShipped(t *testing.T) {
	releases := readReleases(t)
	for _, r := range releases {
		t.Run(r.Version, func(t *testing.T) {
			assertTreeEqualsCommit(t, bundleDir(r.Version), r.Commit, "bundle")
		})
	}
	t.Run(firstVersion, func(t *testing.T) {
		assertTreeEqualsCommit(t, bundleDir(firstVersion), releases[0].Commit, bundleDir(firstVersion))
	})
}

// assertTreeEqualsCommit compares the files under dir with those under commitDir at commit.
func assertTreeEqualsCommit(t *testing.T, dir, commit, commitDir string) {
	t.Helper()
	git := func(args ...string) ([]byte, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repoPath(t)
		return cmd.Output()
	}
	out, err := git("ls-tree", "-r", "--name-only", commit+":"+commitDir)
	require.NoError(t, err, "git ls-tree %s:%s (a shallow clone? git fetch --unshallow)", commit, commitDir)
	want := strings.Fields(string(out))
	require.NotEmpty(t, want, "%s has no %s/", commit, commitDir)
	got := testenv.Files(t, repoPath(t, dir))
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got, "%s has other files than %s:%s/", dir, commit, commitDir)
	for _, f := range want {
		shipped, err := git("show", commit+":"+commitDir+"/"+f)
		require.NoError(t, err)
		assert.Truef(t, bytes.Equal(shipped, read(t, dir, f)), "%s/%s differs from %s:%s/%s: a release stays as it shipped", dir, f, commit[:12], commitDir, f)
	}
}

const firstVersion = "0.1.0"

func bundleDir(version string) string {
	return filepath.Join("hack", "olm", "bundles", "quartet.v"+version)
}

func readReleases(t *testing.T) []release.Release {
	t.Helper()
	out, err := release.Read(repoPath(t))
	require.NoError(t, err)
	return out
}

// TestCommunityCatalogSettings: ci.yaml, the community catalogs' settings for the package,
// builds the update graph from the CSVs' spec.replaces (which make bundle sets) and names
// reviewers.
func TestCommunityCatalogSettings(t *testing.T) {
	var ci struct {
		Reviewers   []string
		UpdateGraph string
	}
	require.NoError(t, yaml.UnmarshalStrict(read(t, "ci.yaml"), &ci))
	assert.Equal(t, "replaces-mode", ci.UpdateGraph)
	assert.NotEmpty(t, ci.Reviewers)
	assert.NotEmpty(t, loadBundle(t).CSV.Spec.Replaces, "replaces-mode needs spec.replaces in the CSV")
}
