// Package bundlevalidation checks the OLM bundle in bundle/ the way operator-sdk and
// OperatorHub do, and that it was regenerated (`make bundle`) after the last API change.
package bundlevalidation

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		// The mirror's registry is cmd/mirror-registry, released with the operator.
		assert.Equal(t, "quay.io/quartet-operator/mirror-registry:v"+spec.Version.String(), env["RELATED_IMAGE_REGISTRY"])
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

	t.Run("a spec descriptor for every field an example sets", func(t *testing.T) {
		// operator-sdk scorecard's olm-spec-descriptors (make olm-e2e) fails otherwise; this
		// says so in make test. Descriptors are written in config/manifests/bases.
		var examples []map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples))
		for _, e := range examples {
			gv := strings.SplitN(e["apiVersion"].(string), "/", 2)
			meta, _ := e["metadata"].(map[string]any)
			exampleSpec, _ := e["spec"].(map[string]any)
			for _, d := range spec.CustomResourceDefinitions.Owned {
				if d.Kind != e["kind"] || d.Version != gv[1] {
					continue
				}
				paths := map[string]bool{}
				for _, sd := range d.SpecDescriptors {
					paths[sd.Path] = true
				}
				for field := range exampleSpec {
					assert.Truef(t, paths[field], "example %s %s/%s sets spec.%s, which has no specDescriptor in config/manifests/bases",
						e["kind"], gv[1], meta["name"], field)
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
		ann := readAnnotations(t, repoPath(t, "bundle", "metadata", "annotations.yaml"))
		versions := ann[openshiftVersions]
		require.NotEmpty(t, versions, "bundle/metadata/annotations.yaml lacks %s", openshiftVersions)
		label := dockerfileLabels(t, repoPath(t, "bundle.Dockerfile"))[openshiftVersions]
		assert.Equal(t, versions, label, "bundle.Dockerfile's %s label differs from the annotation", openshiftVersions)
		oldest, err := oldestOpenShift(versions)
		require.NoError(t, err)
		minKube, err := majorMinor(spec.MinKubeVersion)
		require.NoError(t, err)
		kube := openShiftKubernetes(oldest)
		assert.Truef(t, kube[0] > minKube[0] || (kube[0] == minKube[0] && kube[1] >= minKube[1]),
			"%s=%s includes OpenShift 4.%d (Kubernetes %d.%d), older than minKubeVersion %s", openshiftVersions, versions, oldest, kube[0], kube[1], spec.MinKubeVersion)
	})

	t.Run("monitoring", func(t *testing.T) {
		// No object of the Prometheus operator's kinds: OLM fails the whole install on a
		// cluster without their CRDs, and OperatorHub.io's community pipeline installs the
		// bundle on such a cluster. The description tells the admin what to apply instead.
		for _, o := range b.Objects {
			assert.NotEqual(t, "monitoring.coreos.com", o.GroupVersionKind().Group,
				"bundle/ carries %s %s: config/manifests must not include config/prometheus", o.GetKind(), o.GetName())
		}
		assert.Contains(t, b.CSV.Spec.Description, "-k config/prometheus", "the CSV's description says how to add the ServiceMonitor and the alerts")
	})
}

const openshiftVersions = "com.redhat.openshift.versions"

// oldestOpenShift returns the oldest OpenShift 4 minor version an annotation value selects:
// "v4.18" (4.18 and later), "v4.18-v4.20" or "=v4.18".
func oldestOpenShift(v string) (int, error) {
	first := strings.TrimPrefix(strings.SplitN(strings.TrimSpace(v), "-", 2)[0], "=")
	ver, err := majorMinor(strings.TrimPrefix(first, "v"))
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", openshiftVersions, v, err)
	}
	if ver[0] != 4 {
		return 0, fmt.Errorf("%s %q: not OpenShift 4", openshiftVersions, v)
	}
	return ver[1], nil
}

// openShiftKubernetes is the Kubernetes release of OpenShift 4.<minor> (4.3 and later: 1.<minor+13>;
// Red Hat's table, access.redhat.com/solutions/4870701, and operator-pipelines' OCP_TO_K8S).
func openShiftKubernetes(minor int) [2]int { return [2]int{1, minor + 13} }

// majorMinor parses the major and minor numbers of "1.31", "1.31.0" or "v1.31.0".
func majorMinor(v string) ([2]int, error) {
	var out [2]int
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return out, fmt.Errorf("version %q has no minor number", v)
	}
	for i := range out {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return out, fmt.Errorf("version %q: %w", v, err)
		}
		out[i] = n
	}
	return out, nil
}

// readAnnotations reads the flat "annotations:" map of a bundle's metadata/annotations.yaml.
func readAnnotations(t *testing.T, file string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var m struct {
		Annotations map[string]string `json:"annotations"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &m), file)
	return m.Annotations
}

// dockerfileLabels reads the `LABEL k=v` lines of a Dockerfile.
func dockerfileLabels(t *testing.T, file string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	out := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if kv, ok := strings.CutPrefix(line, "LABEL "); ok {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	}
	return out
}

// TestCatalogMatchesBundle fails when bundle/ changed and `make catalog` was not run: the
// catalog's entry for each version carries the same CSV and CRDs as its bundle directory:
// bundle/ for the current version, the frozen bundle of each release, the reconstructed v0.1.0.
func TestCatalogMatchesBundle(t *testing.T) {
	current := loadBundle(t)
	dirs := map[string]string{current.CSV.Spec.Version.String(): "bundle", firstVersion: bundleDir(firstVersion)}
	for _, r := range readReleases(t) {
		dirs[r.version] = bundleDir(r.version)
	}
	for version, dir := range dirs {
		t.Run(version, func(t *testing.T) {
			b, err := manifests.GetBundleFromDir(repoPath(t, dir))
			require.NoError(t, err, dir)
			require.Equal(t, version, b.CSV.Spec.Version.String(), "%s holds another version", dir)
			checkCatalogEntry(t, b, dir)
		})
	}
}

func checkCatalogEntry(t *testing.T, b *manifests.Bundle, dir string) {
	t.Helper()
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
			dec := json.NewDecoder(bytes.NewReader(p.Value))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(meta))
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
}

// csvMetadata is opm's olm.csv.metadata property (operator-registry alpha/property), the
// CSV's fields a catalog client shows; an unknown field fails the decode.
type csvMetadata struct {
	Annotations           map[string]string                           `json:"annotations,omitempty"`
	APIServiceDefinitions operatorsv1alpha1.APIServiceDefinitions     `json:"apiServiceDefinitions,omitempty"`
	CRDDescriptions       operatorsv1alpha1.CustomResourceDefinitions `json:"crdDescriptions,omitempty"`
	Description           string                                      `json:"description,omitempty"`
	DisplayName           string                                      `json:"displayName,omitempty"`
	InstallModes          []operatorsv1alpha1.InstallMode             `json:"installModes,omitempty"`
	Keywords              []string                                    `json:"keywords,omitempty"`
	Labels                map[string]string                           `json:"labels,omitempty"`
	Links                 []operatorsv1alpha1.AppLink                 `json:"links,omitempty"`
	Maintainers           []operatorsv1alpha1.Maintainer              `json:"maintainers,omitempty"`
	Maturity              string                                      `json:"maturity,omitempty"`
	MinKubeVersion        string                                      `json:"minKubeVersion,omitempty"`
	NativeAPIs            []metav1.GroupVersionKind                   `json:"nativeAPIs,omitempty"`
	Provider              operatorsv1alpha1.AppLink                   `json:"provider,omitempty"`
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
		versions = append(versions, r.version)
	}
	versions = append(versions, current.Spec.Version.String())

	raw, err := os.ReadFile(repoPath(t, "catalog", "quartet", "channel-stable.yaml"))
	require.NoError(t, err)
	var channel struct {
		Schema  string `json:"schema"`
		Name    string `json:"name"`
		Entries []struct {
			Name      string   `json:"name"`
			Replaces  string   `json:"replaces"`
			Skips     []string `json:"skips"`
			SkipRange string   `json:"skipRange"`
		} `json:"entries"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &channel))
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
		t.Run(r.version, func(t *testing.T) {
			assertTreeEqualsCommit(t, bundleDir(r.version), r.commit, "bundle")
		})
	}
	t.Run(firstVersion, func(t *testing.T) {
		assertTreeEqualsCommit(t, bundleDir(firstVersion), releases[0].commit, bundleDir(firstVersion))
	})
}

// assertTreeEqualsCommit compares the files under dir with those under commitDir at commit.
func assertTreeEqualsCommit(t *testing.T, dir, commit, commitDir string) {
	t.Helper()
	ls := exec.Command("git", "ls-tree", "-r", "--name-only", commit, "--", commitDir+"/")
	ls.Dir = repoPath(t)
	out, err := ls.Output()
	require.NoError(t, err, "git ls-tree %s (a shallow clone? git fetch --unshallow)", commit)
	want := strings.Fields(string(out))
	require.NotEmpty(t, want, "%s has no %s/", commit, commitDir)
	var got []string
	require.NoError(t, filepath.WalkDir(repoPath(t, dir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(repoPath(t, dir), p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	}))
	var wantRel []string
	for _, f := range want {
		wantRel = append(wantRel, strings.TrimPrefix(f, commitDir+"/"))
	}
	slices.Sort(got)
	slices.Sort(wantRel)
	require.Equal(t, wantRel, got, "%s has other files than %s:%s/", dir, commit, commitDir)
	for _, f := range wantRel {
		show := exec.Command("git", "show", commit+":"+commitDir+"/"+f)
		show.Dir = repoPath(t)
		shipped, err := show.Output()
		require.NoError(t, err)
		local, err := os.ReadFile(repoPath(t, dir, f))
		require.NoError(t, err)
		assert.Truef(t, bytes.Equal(shipped, local), "%s/%s differs from %s:%s/%s: a release stays as it shipped", dir, f, commit[:12], commitDir, f)
	}
}

const firstVersion = "0.1.0"

func bundleDir(version string) string {
	return filepath.Join("hack", "olm", "bundles", "quartet.v"+version)
}

// release is one line of hack/olm/releases.
type release struct{ version, commit string }

func readReleases(t *testing.T) []release {
	t.Helper()
	raw, err := os.ReadFile(repoPath(t, "hack", "olm", "releases"))
	require.NoError(t, err)
	var out []release
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		require.Len(t, f, 2, "hack/olm/releases: %q", line)
		out = append(out, release{version: f[0], commit: f[1]})
	}
	require.NotEmpty(t, out, "hack/olm/releases lists no release")
	return out
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

// TestCommunityCatalogSettings: ci.yaml, the community catalogs' settings for the package,
// builds the update graph from the CSVs' spec.replaces (which make bundle sets) and names
// reviewers.
func TestCommunityCatalogSettings(t *testing.T) {
	raw, err := os.ReadFile(repoPath(t, "ci.yaml"))
	require.NoError(t, err)
	var ci struct {
		Reviewers   []string `json:"reviewers"`
		UpdateGraph string   `json:"updateGraph"`
	}
	require.NoError(t, yaml.UnmarshalStrict(raw, &ci))
	assert.Equal(t, "replaces-mode", ci.UpdateGraph)
	assert.NotEmpty(t, ci.Reviewers)
	assert.NotEmpty(t, loadBundle(t).CSV.Spec.Replaces, "replaces-mode needs spec.replaces in the CSV")
}
