//go:build tools

// Package tools pins github.com/operator-framework/operator-sdk v1.42.2 for the Makefile.
package tools

import (
	_ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
)
