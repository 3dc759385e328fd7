// Command csvtext makes the first paragraph of each kind's section of a CSV's description
// README.md's text for that kind (hack/catalogtext), in place:
//
//	go run ./hack/olm/csvtext -readme README.md config/manifests/bases/quartet.clusterserviceversion.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quartet-operator/quartet/hack/catalogtext"
)

func main() {
	readme := flag.String("readme", "README.md", "the README whose table of kinds is the source")
	flag.Parse()
	if err := run(*readme, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "csvtext:", err)
		os.Exit(1)
	}
}

func run(readme string, csvs []string) error {
	b, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	kinds, err := catalogtext.Kinds(string(b))
	if err != nil {
		return err
	}
	for _, f := range csvs {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out, err := catalogtext.SetLeads(string(b), kinds)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}
