package v1

// Condition types of an ExchangeRate (status.conditions[].type).
const (
	// ConditionReady is True when the ConfigMap holds the rate for the current spec.
	ConditionReady = "Ready"
	// ConditionStale is True when the rate's publication date is older than the manager's
	// limit.
	ConditionStale = "Stale"
	// ConditionDegraded is True when the last fetch from a source failed (the last good rate
	// stays).
	ConditionDegraded = "Degraded"
	// ConditionDivergent is True when another source's rate differs from the one written by
	// more than spec.divergenceTolerance.
	ConditionDivergent = "Divergent"
)

// Condition reasons of an ExchangeRate (status.conditions[].reason).
const (
	// ReasonReconciling is Ready's and Degraded's (Unknown) before the first rate or fetch.
	ReasonReconciling = "Reconciling"
	// ReasonRateWritten is Ready's (True) when the ConfigMap holds the rate.
	ReasonRateWritten = "RateWritten"
	// ReasonUnknownCurrency is Ready's (False) when a source does not know a currency of the
	// spec.
	ReasonUnknownCurrency = "UnknownCurrency"
	// ReasonRateUnavailable is Ready's (False) when no rate could be had yet.
	ReasonRateUnavailable = "RateUnavailable"
	// ReasonConfigMapConflict is Ready's (False) when a ConfigMap of the ExchangeRate's name
	// exists and is not controlled by it.
	ReasonConfigMapConflict = "ConfigMapConflict"
	// ReasonConfigMapWriteFailed is Ready's (False) when writing the ConfigMap failed.
	ReasonConfigMapWriteFailed = "ConfigMapWriteFailed"
	// ReasonFetchSucceeded is Degraded's (False) when the last fetches succeeded.
	ReasonFetchSucceeded = "FetchSucceeded"
	// ReasonPublicationCurrent is Stale's (False) while the rate is within the limit.
	ReasonPublicationCurrent = "PublicationCurrent"
	// ReasonPublicationOld is Stale's (True) when the rate is older than the limit.
	ReasonPublicationOld = "PublicationOld"
	// ReasonNoPublication is Stale's (Unknown) before a rate is published to the ConfigMap.
	ReasonNoPublication = "NoPublication"
	// ReasonTooManySources is Ready's (False) and Degraded's (Unknown) when the spec names a
	// source the manager cannot add.
	ReasonTooManySources = "TooManySources"
	// ReasonSourcesAgree is Divergent's (False) when the sources' rates agree within the
	// tolerance.
	ReasonSourcesAgree = "SourcesAgree"
	// ReasonSourcesDisagree is Divergent's (True) when they do not.
	ReasonSourcesDisagree = "SourcesDisagree"
	// ReasonSingleSource is Divergent's (False) with one source: nothing to cross-check.
	ReasonSingleSource = "SingleSource"
	// ReasonNotCompared is Divergent's (Unknown) while no fresh rates can be compared.
	ReasonNotCompared = "NotCompared"

	// Degraded's (True) reasons of a failed fetch.

	// ReasonUpstreamServerError is set when the source answered with a 5xx status.
	ReasonUpstreamServerError = "UpstreamServerError"
	// ReasonUpstreamRejected is set when the source refused the request (a 4xx status).
	ReasonUpstreamRejected = "UpstreamRejected"
	// ReasonUpstreamTimeout is set when the source did not answer in time.
	ReasonUpstreamTimeout = "UpstreamTimeout"
	// ReasonUpstreamUnreachable is set when the source could not be reached.
	ReasonUpstreamUnreachable = "UpstreamUnreachable"
	// ReasonUpstreamMalformed is set when the source's answer could not be used (another
	// status than 200, too large, or not parsable).
	ReasonUpstreamMalformed = "UpstreamMalformed"
)
