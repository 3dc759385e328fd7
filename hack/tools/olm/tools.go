//go:build tools

// Package tools pins github.com/operator-framework/operator-lifecycle-manager v0.46.0 for the Makefile.
package tools

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
)
