// Package v1alpha1 contains API Schema definitions for the mirrors.quartet.dev v1alpha1 API group.
// It holds RegistryMirror, a pull-through image cache for one upstream registry, and
// RegistryHostGrant, a cluster admin's consent that a mirror configures the nodes.
// +kubebuilder:object:generate=true
// +groupName=mirrors.quartet.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "mirrors.quartet.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group-version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &RegistryMirror{}, &RegistryMirrorList{}, &RegistryHostGrant{}, &RegistryHostGrantList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
