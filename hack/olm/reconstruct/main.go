// Command reconstruct derives the bundle of Quartet's first version, v0.1.0, from the
// bundle of the oldest release (0.2.0, frozen as it shipped), so the catalog has a real
// upgrade to offer: the same operator, whose ChaosAgent CRD serves (and stores) v1alpha1
// only. Installing it and then upgrading moves ChaosAgent storage from v1alpha1 to v1beta1,
// as the real upgrade does. Derived from a frozen bundle, v0.1.0 stays the same whatever
// the current bundle becomes.
//
// It is not a copy of an old build (none was published); docs/OLM.md says so. Run by
// `make catalog` (hack/olm/catalog.sh):
//
//	go run ./hack/olm/reconstruct -from hack/olm/bundles/quartet.v0.2.0 \
//	    -to hack/olm/bundles/quartet.v0.1.0 -version 0.1.0 -image quay.io/quartet-operator/quartet:v0.1.0
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/hack/olm/csvmap"
)

const (
	csvFile        = "quartet.clusterserviceversion.yaml"
	chaosCRDFile   = "blackadder.io_chaosagents.yaml"
	chaosCRDName   = "chaosagents.blackadder.io"
	chaosGroup     = "blackadder.io"
	oldVersion     = "v1alpha1"
	newVersion     = "v1beta1"
	packageName    = "quartet"
	containerImage = "containerImage"
)

func main() {
	from := flag.String("from", "hack/olm/bundles/quartet.v0.2.0", "bundle directory of the oldest release")
	to := flag.String("to", "hack/olm/bundles/quartet.v0.1.0", "directory to write the reconstructed bundle to (replaced)")
	version := flag.String("version", "0.1.0", "version of the reconstructed release")
	image := flag.String("image", "quay.io/quartet-operator/quartet:v0.1.0", "operator image of the reconstructed release")
	flag.Parse()
	if err := reconstruct(*from, *to, *version, *image); err != nil {
		fmt.Fprintln(os.Stderr, "reconstruct:", err)
		os.Exit(1)
	}
}

func reconstruct(from, to, version, image string) error {
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		out := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch filepath.Base(path) {
		case csvFile:
			data, err = oldCSV(data, version, image)
		case chaosCRDFile:
			data, err = oldChaosCRD(data)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return os.WriteFile(out, data, 0o644)
	})
}

// oldChaosCRD keeps only v1alpha1 of the ChaosAgent CRD, as the storage version.
func oldChaosCRD(data []byte) ([]byte, error) {
	crd := map[string]any{}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	var kept []any
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == oldVersion {
			m["served"], m["storage"] = true, true
			v1alpha1Spec(m)
			kept = append(kept, m)
		}
	}
	if len(kept) != 1 {
		return nil, fmt.Errorf("ChaosAgent CRD has no %s version", oldVersion)
	}
	spec["versions"] = kept
	return yaml.Marshal(crd)
}

// v1alpha1Spec cuts the version's spec schema down to the original v1alpha1 fields
// (tantrumMode, podTolerance), as v0.1.0 served it; v0.2.0 serves the v1beta1 schema under
// both names.
func v1alpha1Spec(version map[string]any) {
	schema, _ := version["schema"].(map[string]any)
	root, _ := schema["openAPIV3Schema"].(map[string]any)
	props, _ := root["properties"].(map[string]any)
	spec, _ := props["spec"].(map[string]any)
	fields, _ := spec["properties"].(map[string]any)
	for name := range fields {
		if name != "tantrumMode" && name != "podTolerance" {
			delete(fields, name)
		}
	}
	delete(spec, "x-kubernetes-validations")
}

// oldCSV renames the CSV to the old version, points it at the old operator image, and
// drops what v1beta1 ChaosAgents add: the owned CRD version and its examples.
func oldCSV(data []byte, version, image string) ([]byte, error) {
	probe := map[string]any{}
	if err := yaml.Unmarshal(data, &probe); err != nil {
		return nil, err
	}
	currentImage, _ := csvmap.Nested(probe, "metadata", "annotations")[containerImage].(string)
	if currentImage == "" {
		return nil, errors.New("no containerImage annotation to find the operator image by")
	}
	// The operator image appears in the annotation, the Deployment, the node agent's
	// related image and relatedImages: replace it everywhere at once.
	data = bytes.ReplaceAll(data, []byte(currentImage), []byte(image))

	csv := map[string]any{}
	if err := yaml.Unmarshal(data, &csv); err != nil {
		return nil, err
	}
	csvmap.Nested(csv, "metadata")["name"] = packageName + ".v" + version
	spec := csvmap.Nested(csv, "spec")
	spec["version"] = version
	if d, ok := spec["description"].(string); ok {
		spec["description"] = "This is v" + version + ", reconstructed from a later bundle to test upgrades " +
			"(see docs/OLM.md): its ChaosAgent CRD serves and stores " + oldVersion + " only, so its manager " +
			"runs without the chaosagent controller (which watches " + newVersion + "); ChaosAgents created " +
			"under it act after the upgrade.\n\n" + d
	}
	if err := withoutChaosController(spec); err != nil {
		return nil, err
	}
	delete(spec, "replaces")
	delete(spec, "skips")
	annotations := csvmap.Nested(csv, "metadata", "annotations")
	delete(annotations, "olm.skipRange")

	crds := csvmap.Nested(csv, "spec", "customresourcedefinitions")
	owned, _ := crds["owned"].([]any)
	var keep []any
	for _, o := range owned {
		m, _ := o.(map[string]any)
		if m["name"] == chaosCRDName && m["version"] != oldVersion {
			continue
		}
		keep = append(keep, o)
	}
	crds["owned"] = keep

	if raw, ok := annotations["alm-examples"].(string); ok {
		var examples []map[string]any
		if err := json.Unmarshal([]byte(raw), &examples); err != nil {
			return nil, fmt.Errorf("alm-examples: %w", err)
		}
		var kept []map[string]any
		for _, e := range examples {
			if av, _ := e["apiVersion"].(string); strings.HasPrefix(av, chaosGroup+"/") && av != chaosGroup+"/"+oldVersion {
				continue
			}
			kept = append(kept, e)
		}
		b, err := json.MarshalIndent(kept, "", "  ")
		if err != nil {
			return nil, err
		}
		annotations["alm-examples"] = string(b)
	}
	return yaml.Marshal(csv)
}

// withoutChaosController starts the manager with every controller but chaosagent: the
// current manager watches ChaosAgents as v1beta1, which v0.1.0's CRD does not serve, and
// a real manager would otherwise never become ready.
func withoutChaosController(spec map[string]any) error {
	deployments, _ := csvmap.Nested(spec, "install", "spec")["deployments"].([]any)
	for _, d := range deployments {
		dep, _ := d.(map[string]any)
		containers, _ := csvmap.Nested(dep, "spec", "template", "spec")["containers"].([]any)
		for _, c := range containers {
			container, _ := c.(map[string]any)
			if container["name"] != "manager" {
				continue
			}
			args, _ := container["args"].([]any)
			container["args"] = append(args, "--controllers=copyratorrule,exchangerate,registrymirror")
			return nil
		}
	}
	return errors.New("no manager container in the CSV's deployments")
}
