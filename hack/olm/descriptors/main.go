// Command descriptors gives the CSV's ChaosAgent v1alpha1 entry the spec and status
// descriptors of its v1beta1 entry (run by `make bundle`). v1alpha1 serves the v1beta1
// schema, but its Go spec is a type alias, which operator-sdk's descriptor markers do not
// follow; embedding the struct instead makes `operator-sdk generate kustomize manifests`
// hang. Without the descriptors, `operator-sdk scorecard` (olm-spec-descriptors) fails on
// the fields of the v1alpha1 example.
//
//	go run ./hack/olm/descriptors bundle/manifests/quartet.clusterserviceversion.yaml
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

const (
	crd       = "chaosagents.blackadder.io"
	fromVer   = "v1beta1"
	toVersion = "v1alpha1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: descriptors <CSV file>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "descriptors:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var csv map[string]any
	if err := yaml.Unmarshal(b, &csv); err != nil {
		return err
	}
	spec, _ := csv["spec"].(map[string]any)
	crds, _ := spec["customresourcedefinitions"].(map[string]any)
	owned, _ := crds["owned"].([]any)
	var from, to map[string]any
	for _, o := range owned {
		m, _ := o.(map[string]any)
		if m["name"] != crd {
			continue
		}
		switch m["version"] {
		case fromVer:
			from = m
		case toVersion:
			to = m
		}
	}
	if from == nil || to == nil {
		return fmt.Errorf("%s: owned CRD %s needs a %s and a %s entry", path, crd, fromVer, toVersion)
	}
	for _, k := range []string{"specDescriptors", "statusDescriptors"} {
		if v, ok := from[k]; ok {
			to[k] = v
		}
	}
	out, err := yaml.Marshal(csv)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
