//go:build tools

// Package tools pins github.com/operator-framework/operator-sdk v1.42.2 for the Makefile:
// operator-sdk itself and the scorecard-test binary of its scorecard-test image (make images).
package tools

import (
	_ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
	_ "github.com/operator-framework/operator-sdk/images/scorecard-test"
)
