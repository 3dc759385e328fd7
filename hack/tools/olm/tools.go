//go:build tools

// Package tools pins github.com/operator-framework/operator-lifecycle-manager v0.46.0 for the Makefile:
// the olm and catalog operators (make olm-tools) and, for the olm image (make images),
// package-server, copy-content and cpb as OLM's own Dockerfile ships them.
package tools

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/package-server"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
)
