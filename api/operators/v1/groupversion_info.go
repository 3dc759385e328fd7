// Package v1 contains API Schema definitions for the operators.brennerm.github.io v1 API group.
// It holds ExchangeRate, which keeps a currency's exchange rate in a ConfigMap.
// +kubebuilder:object:generate=true
// +groupName=operators.brennerm.github.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "operators.brennerm.github.io", Version: "v1"}

	// SchemeBuilder adds the types of this group-version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ExchangeRate{}, &ExchangeRateList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
