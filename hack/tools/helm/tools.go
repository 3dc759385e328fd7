//go:build tools

// Package tools pins Helm (helm.sh/helm/v4) for the Makefile: it renders OLM's release
// chart for the real-node tests and installs, upgrades and lints Quartet's own chart.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
