//go:build tools

// Package tools pins github.com/operator-framework/operator-registry v1.74.0 for the Makefile.
package tools

import (
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
