package v1beta1

// Condition types of a ChaosAgent (status.conditions[].type). v1alpha1 serves the same
// status, so they hold for both versions.
const (
	// ConditionReady is True while rounds run (or wait for a window of spec.schedule), False
	// when the agent is paused, its run ended, its spec is invalid or a round failed.
	ConditionReady = "Ready"
	// ConditionPaused is True while spec.paused is set or after the run ended on its own.
	ConditionPaused = "Paused"
	// ConditionDegraded is True when an action or a restore of the last pass that acted failed
	// or was left undone.
	ConditionDegraded = "Degraded"
	// ConditionInWindow is True while spec.schedule lets rounds run (always without one).
	ConditionInWindow = "InWindow"
	// ConditionGuardTripped is True from the pass a guard failed until spec.runName changes.
	ConditionGuardTripped = "GuardTripped"
)

// Condition reasons of a ChaosAgent (status.conditions[].reason).
const (
	// ReasonRoundsRunning is Ready's (True) while rounds run every spec.pauseDuration seconds.
	ReasonRoundsRunning = "RoundsRunning"
	// ReasonPausedBySpec is Ready's (False) and Paused's (True) while spec.paused is true.
	ReasonPausedBySpec = "PausedBySpec"
	// ReasonNotPaused is Paused's (False) while rounds may run.
	ReasonNotPaused = "NotPaused"
	// ReasonInvalidSelector is Ready's (False) when a selector of the spec does not parse.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonRoundFailed is Ready's (False) when a pass failed (reading the cache, restoring);
	// the pass is retried.
	ReasonRoundFailed = "RoundFailed"
	// ReasonActionsFailed is Degraded's (True) when an action of the last pass failed.
	ReasonActionsFailed = "ActionsFailed"
	// ReasonRestoreFailed is Degraded's (True) when a changed object could not be put back
	// yet; it is retried.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonRestoreSkipped is Degraded's (True) when objects carrying the agent's marks were
	// left as they are (outside the agent's scope, or immutable).
	ReasonRestoreSkipped = "RestoreSkipped"
	// ReasonNoFailures is Degraded's (False) when no action of the last pass that acted failed.
	ReasonNoFailures = "NoFailures"
	// ReasonInvalidSchedule is Ready's (False) when spec.schedule cannot be used.
	ReasonInvalidSchedule = "InvalidSchedule"
	// ReasonWaitingForWindow is Ready's (True) outside every window of spec.schedule.
	ReasonWaitingForWindow = "WaitingForWindow"
	// ReasonGuardTripped is Ready's (False) and Paused's (True) after a guard ended the run,
	// and GuardTripped's (True) when the failed guard's own reason is not known.
	ReasonGuardTripped = "GuardTripped"
	// ReasonDurationElapsed is Ready's (False) and Paused's (True) after spec.durationSeconds
	// ended the run.
	ReasonDurationElapsed = "DurationElapsed"
	// ReasonNoSchedule is InWindow's (True) without spec.schedule.
	ReasonNoSchedule = "NoSchedule"
	// ReasonInsideWindow is InWindow's (True) inside a window of spec.schedule.
	ReasonInsideWindow = "InsideWindow"
	// ReasonOutsideWindow is InWindow's (False) outside every window of spec.schedule.
	ReasonOutsideWindow = "OutsideWindow"
	// ReasonNoGuards is GuardTripped's (False) without spec.guards.
	ReasonNoGuards = "NoGuards"
	// ReasonGuardsPassed is GuardTripped's (False) when every guard held at the last check.
	ReasonGuardsPassed = "GuardsPassed"
	// ReasonNotChecked is GuardTripped's (Unknown) before the first guard check of a run.
	ReasonNotChecked = "NotChecked"
)

// Reasons of a guard's result (status.guards[].reason), and the GuardTripped condition's
// reason when that guard trips.
const (
	// GuardReasonPassed is set when the guard held.
	GuardReasonPassed = "Passed"
	// GuardReasonDeploymentBelowFloor is set when the Deployment has fewer ready replicas
	// than minReady (or minReady is not a count or a percentage).
	GuardReasonDeploymentBelowFloor = "DeploymentBelowFloor"
	// GuardReasonDeploymentNotFound is set when the Deployment does not exist.
	GuardReasonDeploymentNotFound = "DeploymentNotFound"
	// GuardReasonDeploymentNotWatched is set when the Deployment's namespace is not watched
	// by the manager (WATCH_NAMESPACE), so its readiness cannot be known.
	GuardReasonDeploymentNotWatched = "DeploymentNotWatched"
	// GuardReasonDeploymentUnreadable is set when the manager's cache could not be read.
	GuardReasonDeploymentUnreadable = "DeploymentUnreadable"
	// GuardReasonHTTPUnexpectedStatus is set when the answer had another status code than
	// expectedStatus.
	GuardReasonHTTPUnexpectedStatus = "HTTPUnexpectedStatus"
	// GuardReasonHTTPTooSlow is set when the answer took longer than maxLatencyMilliseconds.
	GuardReasonHTTPTooSlow = "HTTPTooSlow"
	// GuardReasonHTTPFailed is set when no answer came (refused, timed out, TLS, …).
	GuardReasonHTTPFailed = "HTTPFailed"
	// GuardReasonHTTPAddressRefused is set when the URL's address is one the manager may not
	// dial.
	GuardReasonHTTPAddressRefused = "HTTPAddressRefused"
)
