// Package api gathers Quartet's API groups, so the manager and the tests register the same
// list.
package api

import (
	"k8s.io/apimachinery/pkg/runtime"

	blackadderv1alpha1 "github.com/quartet-operator/quartet/api/blackadder/v1alpha1"
	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// schemeBuilder lists every group and version Quartet serves.
var schemeBuilder = runtime.SchemeBuilder{
	blackadderv1alpha1.AddToScheme,
	blackadderv1beta1.AddToScheme,
	flantv1.AddToScheme,
	operatorsv1.AddToScheme,
	mirrorsv1alpha1.AddToScheme,
}

// AddToScheme adds every group and version Quartet serves to a scheme.
var AddToScheme = schemeBuilder.AddToScheme
