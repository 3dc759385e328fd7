package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Where the project lives; the links of Chart.yaml and its Artifact Hub annotations.
const (
	projectURL  = "https://github.com/quartet-operator/quartet"
	maintainer  = "Quartet maintainers"
	maintainerM = "maintainers@quartet.dev"
)

// crdInfo is one entry of artifacthub.io/crds.
type crdInfo struct {
	Kind        string `json:"kind"`
	Version     string `json:"version"`
	Name        string `json:"name"`
	DisplayName string `json:"displayName"`
	Description string `json:"description"`
}

// artifactImage is one entry of artifacthub.io/images.
type artifactImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

var camelWord = regexp.MustCompile(`[A-Z][a-z0-9]*`)

// describeCRD reads a CRD's Artifact Hub card (its storage version, and the first sentence
// of that version's description) and returns the version's spec schema.
func describeCRD(o *unstructured.Unstructured) (crdInfo, map[string]any, error) {
	kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if storage, _ := m["storage"].(bool); !storage {
			continue
		}
		name, _ := m["name"].(string)
		desc, _, _ := unstructured.NestedString(m, "schema", "openAPIV3Schema", "description")
		spec, _, _ := unstructured.NestedMap(m, "schema", "openAPIV3Schema", "properties", "spec")
		return crdInfo{
			Kind:        kind,
			Version:     name,
			Name:        o.GetName(),
			DisplayName: strings.Join(camelWord.FindAllString(kind, -1), " "),
			Description: firstSentence(desc),
		}, spec, nil
	}
	return crdInfo{}, nil, fmt.Errorf("CRD %s has no storage version", o.GetName())
}

func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// readSamples reads the CRs of a kustomization folder's resources, in its order (comments,
// which YAML drops, aside).
func readSamples(dir string) ([]map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, err
	}
	if len(k.Resources) == 0 {
		return nil, fmt.Errorf("%s/kustomization.yaml lists no resources", dir)
	}
	var out []map[string]any
	for _, r := range k.Resources {
		objs, err := func() ([]*unstructured.Unstructured, error) {
			f, err := os.ReadFile(filepath.Join(dir, r))
			if err != nil {
				return nil, err
			}
			return decode(bytes.NewReader(f))
		}()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		for _, o := range objs {
			out = append(out, o.Object)
		}
	}
	return out, nil
}

// chartYAML is Chart.yaml: the chart's metadata, maintainers, and the annotations Artifact
// Hub reads (docs/helm_annotations.md of artifacthub/hub). artifacthub.io/images lists the
// images itself: Artifact Hub would otherwise find them by rendering the chart for Kubernetes
// 1.29, which kubeVersion refuses, and then lists and scans none.
func chartYAML(version string, images []artifactImage, crds []crdInfo, examples []map[string]any) (string, error) {
	if len(crds) == 0 || len(examples) == 0 {
		return "", errors.New("no CRDs or no examples")
	}
	links := []map[string]string{
		{"name": "Documentation", "url": projectURL + "/blob/main/README.md"},
		{"name": "Install guide", "url": projectURL + "/blob/main/docs/INSTALL.md"},
		{"name": "Security", "url": projectURL + "/blob/main/docs/SECURITY.md"},
		{"name": "support", "url": projectURL + "/issues"},
	}
	var ann strings.Builder
	for _, a := range []struct {
		key string
		v   any
	}{{"artifacthub.io/images", images}, {"artifacthub.io/crds", crds}, {"artifacthub.io/crdsExamples", examples}, {"artifacthub.io/links", links}} {
		b, err := yaml.Marshal(a.v)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&ann, "  %s: |\n", a.key)
		for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			fmt.Fprintf(&ann, "    %s\n", line)
		}
	}
	return header + fmt.Sprintf(`apiVersion: v2
name: quartet
description: Four day-2 controllers in one manager (ChaosAgent, CopyratorRule, ExchangeRate, RegistryMirror).
type: application
version: %[1]s
appVersion: v%[1]s
kubeVersion: ">=1.31.0-0"
home: %[2]s
icon: https://raw.githubusercontent.com/quartet-operator/quartet/main/docs/icon.svg
sources:
- %[2]s
keywords: [chaos, configmap, secret, copy, exchange-rate, registry-mirror, operator]
maintainers:
- name: %[3]s
  email: %[4]s
  url: %[2]s
annotations:
  artifacthub.io/license: Apache-2.0
  artifacthub.io/operator: "true"
%[5]s`, version, projectURL, maintainer, maintainerM, ann.String()), nil
}
