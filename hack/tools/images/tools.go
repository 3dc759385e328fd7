//go:build tools

// Package tools pins the image tooling of hack/images/build.sh (make images): crane builds
// and pushes the images, grpc_health_probe goes into the opm image (see ../../images/build.sh).
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "github.com/grpc-ecosystem/grpc-health-probe"
)
