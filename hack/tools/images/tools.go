//go:build tools

// Package tools pins the image tooling of make images (hack/images): grpc_health_probe goes
// into the opm image. The images themselves are built and pushed with go-containerregistry's
// Go API, a requirement of the main module.
package tools

import (
	_ "github.com/grpc-ecosystem/grpc-health-probe"
)
