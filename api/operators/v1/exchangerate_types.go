package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExchangeRateSpec names the currency whose rate is kept in a ConfigMap.
// +kubebuilder:validation:XValidation:rule="!has(self.base) || self.base != self.currency",message="spec.currency must differ from spec.base"
type ExchangeRateSpec struct {
	// currency is the ISO 4217 code of the currency to price, three upper-case letters (USD).
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=3
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Currency"
	Currency string `json:"currency,omitempty"`

	// base is the ISO 4217 code of the currency the rate is expressed in: the ConfigMap's
	// rate is how many units of currency one unit of base buys. Default EUR.
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=3
	// +default="EUR"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Base"
	Base string `json:"base,omitempty"`

	// refreshInterval is how often the rate is refreshed (a Go duration such as 30m or 1h,
	// at least 1m). Default: the manager's --exchangerate-refresh-interval (1h).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="spec.refreshInterval must be at least 1m"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="spec.refreshInterval must be at most 168h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Refresh Interval"
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
}

// ExchangeRateStatus is the rate last written and how fresh it is.
type ExchangeRateStatus struct {
	// conditions are Ready (the ConfigMap holds a rate for the current spec), Stale (the
	// publication is older than the manager's limit) and Degraded (the last fetch failed).
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// rate is the rate written to the ConfigMap, as a decimal string.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Rate"
	Rate string `json:"rate,omitempty"`
	// publicationDate is the date the source published the rate (YYYY-MM-DD).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Publication Date"
	PublicationDate string `json:"publicationDate,omitempty"`
	// source names the upstream the rate came from (ecb or frankfurter).
	// +optional
	Source string `json:"source,omitempty"`
	// lastSuccessfulFetch is when the rate in status was fetched: the time of the fetch that
	// brought it (the source's full answer, not a 304 confirming it). It changes only with the
	// rate, so that a refresh bringing no new data writes no status: with a check time here,
	// every refresh would write every ExchangeRate. When the source last answered at all is
	// the manager's metric quartet_exchangerate_last_successful_fetch_timestamp_seconds.
	// +optional
	LastSuccessfulFetch *metav1.Time `json:"lastSuccessfulFetch,omitempty"`
	// configMapName is the ConfigMap that holds the rate.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
}

// ExchangeRate keeps a currency's exchange rate in a ConfigMap of the same name (key
// `rate`), owned by the ExchangeRate, refreshed periodically.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=xr
// +kubebuilder:printcolumn:name="Currency",type=string,JSONPath=`.spec.currency`
// +kubebuilder:printcolumn:name="Base",type=string,JSONPath=`.spec.base`
// +kubebuilder:printcolumn:name="Rate",type=string,JSONPath=`.status.rate`
// +kubebuilder:printcolumn:name="Date",type=string,JSONPath=`.status.publicationDate`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Exchange Rate",resources={{ConfigMap,v1}}
type ExchangeRate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the currency.
	// +required
	Spec ExchangeRateSpec `json:"spec,omitzero"`
	// status is the rate last written.
	// +optional
	Status ExchangeRateStatus `json:"status,omitempty"`
}

// ExchangeRateList is a list of ExchangeRates.
// +kubebuilder:object:root=true
type ExchangeRateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExchangeRate `json:"items"`
}
