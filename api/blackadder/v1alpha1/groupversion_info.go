// Package v1alpha1 contains API Schema definitions for the blackadder.io v1alpha1 API group.
// v1alpha1 is the ChaosAgent version of the original Python operator, still served;
// v1beta1 is stored.
// +kubebuilder:object:generate=true
// +groupName=blackadder.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "blackadder.io", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group-version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ChaosAgent{}, &ChaosAgentList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
