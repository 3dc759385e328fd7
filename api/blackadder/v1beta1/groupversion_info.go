// Package v1beta1 contains API Schema definitions for the blackadder.io v1beta1 API group.
// v1beta1 is the stored ChaosAgent version.
// +kubebuilder:object:generate=true
// +groupName=blackadder.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "blackadder.io", Version: "v1beta1"}

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
