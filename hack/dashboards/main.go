// Command dashboards writes Quartet's Grafana dashboards, built with the Grafana Foundation
// SDK from dashboards.go, as JSON into config/grafana (`make dashboards`); the kustomization
// there turns them into ConfigMaps for the Grafana sidecar, and `make helm` copies them into
// the chart. Every query is checked against the metrics the manager exports (this module's
// tests) and against a real Prometheus after the real-node tests (test/e2e).
//
//	go run . -out ../../config/grafana
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "../../config/grafana", "folder of the dashboards' JSON files")
	flag.Parse()
	for _, s := range dashboards {
		b, err := render(s)
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, s.file+".json"), b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dashboards: %s: %v\n", s.file, err)
			os.Exit(1)
		}
	}
}

// render is the dashboard's JSON as committed: indented, ending in a newline.
func render(s spec) ([]byte, error) {
	d, err := build(s)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
