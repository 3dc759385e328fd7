// Command golangci-lint is golangci-lint with kube-api-linter compiled in as a module
// plugin, both at the versions go.mod pins (see ../../../Makefile, target lint).
// `golangci-lint custom` would build the same binary but clones golangci-lint's git
// repository; building this module needs only the Go module proxy.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// Registers the "kubeapilinter" module plugin (.golangci.yml, linters.settings.custom).
	_ "sigs.k8s.io/kube-api-linter"
)

func main() {
	info := commands.BuildInfo{Version: "unknown", Commit: "?", Date: "(unknown)", GoVersion: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		versions := map[string]string{}
		for _, dep := range bi.Deps {
			versions[dep.Path] = dep.Version
		}
		// "2.15.0+kube-api-linter.v0.0.0-…": golangci-lint's own release and the plugin's pseudo-version.
		info.Version = strings.TrimPrefix(versions["github.com/golangci/golangci-lint/v2"], "v") +
			"+kube-api-linter." + versions["sigs.k8s.io/kube-api-linter"]
		info.Commit = "(module build, " + bi.Main.Path + ")"
		info.BuildInfo = bi
	}
	if err := commands.Execute(info); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}
