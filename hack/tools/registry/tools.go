//go:build tools

// Package tools pins the CNCF distribution registry that the RegistryMirror tests run
// with the configuration the operator renders (see ../../build-registry.sh).
package tools

import (
	_ "github.com/distribution/distribution/v3/cmd/registry"
)
