package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SourceType is an upstream of euro reference rates.
// +kubebuilder:validation:Enum=ecb;frankfurter;frankfurter-v2
type SourceType string

const (
	// SourceTypeECB is the European Central Bank's daily euro reference rates (about 30
	// currencies), published around 16:00 CET on TARGET working days.
	SourceTypeECB SourceType = "ecb"
	// SourceTypeFrankfurter is Frankfurter's v1 API (/v1/latest): the ECB's rates. Frozen
	// upstream, kept for self-hosted Frankfurters that serve only v1.
	SourceTypeFrankfurter SourceType = "frankfurter"
	// SourceTypeFrankfurterV2 is Frankfurter's v2 API (/v2/rates): about 200 currencies
	// from about 100 central banks, blended or from one provider.
	SourceTypeFrankfurterV2 SourceType = "frankfurter-v2"
)

// ExchangeRateSource is one upstream the rate may come from. Where it is fetched from (the
// public service or a mirror) is the manager's setting, not the ExchangeRate's.
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.type == 'frankfurter-v2'",message="spec.sources[].provider is only for type frankfurter-v2"
type ExchangeRateSource struct {
	// type is the upstream: ecb (the ECB's daily reference rates), frankfurter (Frankfurter's
	// frozen v1 API, the ECB's rates) or frankfurter-v2 (Frankfurter's v2 API, about 200
	// currencies from about 100 central banks).
	// +required
	Type SourceType `json:"type,omitempty"`

	// provider restricts frankfurter-v2 to one of its data providers, by its key as
	// https://api.frankfurter.dev/v2/providers lists it (ECB, BOC, NBP.B); upper case.
	// Without it the rate is Frankfurter's blend of every provider that publishes it.
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Z0-9]{1,15}(\.[A-Z0-9]{1,8})?$`
	// +kubebuilder:validation:MaxLength=25
	// +optional
	Provider string `json:"provider,omitempty"`
}

// ExchangeRateSpec names the currency whose rate is kept in a ConfigMap.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="has(self.currency) != has(self.currencies)",message="exactly one of spec.currency and spec.currencies must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.currency) || !has(self.base) || self.base != self.currency",message="spec.currency must differ from spec.base"
// +kubebuilder:validation:XValidation:rule="!has(self.currencies) || !has(self.base) || !(self.base in self.currencies)",message="spec.currencies must not contain spec.base"
type ExchangeRateSpec struct {
	// currency is the ISO 4217 code of the currency to price, three upper-case letters (USD).
	// The ConfigMap holds its rate under the key rate. Exactly one of currency and
	// currencies is set.
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=3
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Currency"
	Currency string `json:"currency,omitempty"`

	// currencies prices several currencies in one ConfigMap, one key per currency named by
	// its code (USD: "1.1625", GBP: "0.86485"), all from the same source and publication.
	// Exactly one of currency and currencies is set.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[A-Z]{3}$`
	// +kubebuilder:validation:items:MaxLength=3
	// +listType=set
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Currencies"
	Currencies []string `json:"currencies,omitempty"`

	// base is the ISO 4217 code of the currency the rate is expressed in: the ConfigMap's
	// rate is how many units of currency one unit of base buys. Default EUR.
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=3
	// +default="EUR"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Base"
	Base string `json:"base,omitempty"`

	// sources are the upstreams the rate may come from, in order of preference: the rate is
	// the first source's that answered its last fetch with a publication younger than the
	// manager's stale limit; the others cross-check it (condition Divergent). Every source
	// is asked once per refresh for all ExchangeRates that name it. Default: the manager's
	// --exchangerate-source (ecb).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, a.type == b.type && (has(a.provider) ? a.provider : '') == (has(b.provider) ? b.provider : '')))",message="spec.sources must not name a source twice"
	// +listType=atomic
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Sources"
	Sources []ExchangeRateSource `json:"sources,omitempty"`

	// divergenceTolerance is how far another source's rate may be from the rate written,
	// in percent of it, before the ExchangeRate is Divergent: "0.5%", from 0% to 100% with
	// at most three decimals. Sources that publish on different days differ by the market's
	// move in between. Default 1%.
	// +kubebuilder:validation:Pattern=`^(100|[0-9]{1,2}(\.[0-9]{1,3})?)%$`
	// +kubebuilder:validation:MaxLength=7
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Divergence Tolerance"
	DivergenceTolerance string `json:"divergenceTolerance,omitempty"`

	// refreshInterval is how often the rate is refreshed (a Go duration such as 30m or 1h,
	// at least 1m), besides the refresh soon after each publication of a source that
	// publishes at a known time (the ECB, around 16:00 CET on working days). Default: the
	// manager's --exchangerate-refresh-interval (6h).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="spec.refreshInterval must be at least 1m"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="spec.refreshInterval must be at most 168h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Refresh Interval"
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
}

// CurrencyRate is the rate of one of spec.currencies.
type CurrencyRate struct {
	// currency is the ISO 4217 code.
	// +kubebuilder:validation:MaxLength=3
	// +required
	Currency string `json:"currency,omitempty"`
	// rate is how many units of currency one unit of base buys, as a decimal string.
	// +kubebuilder:validation:MaxLength=64
	// +required
	Rate string `json:"rate,omitempty"`
}

// ExchangeRateStatus is the rate last written and how fresh it is.
type ExchangeRateStatus struct {
	// conditions are Ready (the ConfigMap holds a rate for the current spec), Stale (the
	// publication is older than the manager's limit), Degraded (the last fetch from a
	// source failed) and Divergent (two sources disagree beyond spec.divergenceTolerance).
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation of the spec the controller last acted on fully (its
	// last pass without error); each condition carries the generation it describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// rate is the rate written to the ConfigMap, as a decimal string (spec.currency).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Rate"
	Rate string `json:"rate,omitempty"`
	// rates are the rates written to the ConfigMap for spec.currencies.
	// +listType=map
	// +listMapKey=currency
	// +kubebuilder:validation:MaxItems=64
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Rates"
	Rates []CurrencyRate `json:"rates,omitempty"`
	// publicationDate is the date the source published the rate (YYYY-MM-DD); of several
	// currencies, the oldest of their dates.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Publication Date"
	PublicationDate string `json:"publicationDate,omitempty"`
	// source names the upstream the rate came from: ecb, frankfurter, frankfurter-v2, or
	// frankfurter-v2:PROVIDER.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Source"
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
// `rate`), owned by the ExchangeRate, refreshed after each publication and periodically.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=xr
// +kubebuilder:printcolumn:name="Currency",type=string,JSONPath=`.spec.currency`
// +kubebuilder:printcolumn:name="Base",type=string,JSONPath=`.spec.base`
// +kubebuilder:printcolumn:name="Rate",type=string,JSONPath=`.status.rate`
// +kubebuilder:printcolumn:name="Date",type=string,JSONPath=`.status.publicationDate`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`,priority=1
// +kubebuilder:printcolumn:name="Currencies",type=string,JSONPath=`.spec.currencies`,priority=1
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
