// Command csvmeta sets what `make bundle` adds to the CSV that operator-sdk generates.
//
// The upgrade edge, spec.replaces and the olm.skipRange annotation, is for catalogs that
// build the update graph from the CSVs (OperatorHub's community catalogs in replaces-mode,
// ci.yaml); `make catalog` writes the same edge into the channel.
//
// createdAt is the commit time of HEAD (given with -created-at), so that the same commit
// always gives the same bundle. When nothing else in the CSV changed since the previous
// bundle (-previous), its createdAt is kept: committing a regenerated bundle and running
// `make bundle` again on the new commit changes nothing.
//
//	go run ./hack/olm/csvmeta -csv bundle/manifests/quartet.clusterserviceversion.yaml \
//	    -previous bin/bundle-previous-csv.yaml -replaces quartet.v0.2.0 \
//	    -skip-range '>=0.1.0 <0.3.0' -created-at 2026-11-23T21:28:11Z
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/hack/olm/csvmap"
)

const (
	createdAt = "createdAt"
	skipRange = "olm.skipRange"
)

func main() {
	csvPath := flag.String("csv", "bundle/manifests/quartet.clusterserviceversion.yaml", "the generated CSV, rewritten in place")
	previous := flag.String("previous", "", "the CSV before it was regenerated (may not exist)")
	replaces := flag.String("replaces", "", "spec.replaces: the CSV name of the previous release")
	skip := flag.String("skip-range", "", "the olm.skipRange annotation")
	created := flag.String("created-at", "", "createdAt (RFC 3339), the commit time of HEAD")
	flag.Parse()
	if err := run(*csvPath, *previous, *replaces, *skip, *created); err != nil {
		fmt.Fprintln(os.Stderr, "csvmeta:", err)
		os.Exit(1)
	}
}

func run(csvPath, previous, replaces, skip, created string) error {
	if replaces == "" || skip == "" {
		return errors.New("-replaces and -skip-range are required")
	}
	if _, err := time.Parse(time.RFC3339, created); err != nil {
		return fmt.Errorf("-created-at %q: %w", created, err)
	}
	csv, err := read(csvPath)
	if err != nil {
		return err
	}
	spec := csvmap.Nested(csv, "spec")
	spec["replaces"] = replaces
	annotations := csvmap.Nested(csv, "metadata", "annotations")
	annotations[skipRange] = skip
	delete(annotations, createdAt) // operator-sdk's wall-clock time

	if previous != "" {
		old, err := read(previous)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		default:
			oldAnnotations := csvmap.Nested(old, "metadata", "annotations")
			oldCreated, _ := oldAnnotations[createdAt].(string)
			delete(oldAnnotations, createdAt)
			if oldCreated != "" && reflect.DeepEqual(old, csv) {
				created = oldCreated
			}
		}
	}
	annotations[createdAt] = created
	out, err := yaml.Marshal(csv)
	if err != nil {
		return err
	}
	return os.WriteFile(csvPath, out, 0o644)
}

func read(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
