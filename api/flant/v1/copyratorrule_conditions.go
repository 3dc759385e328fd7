package v1

// Condition types of a CopyratorRule (status.conditions[].type).
const (
	// ConditionReady is True when every copy the rule asks for is in sync (or there is
	// nothing to copy), False while copies are pending, missing, refused or failed.
	ConditionReady = "Ready"
	// ConditionDegraded is True when writes failed, a limit left copies out, target objects
	// conflict, or the spec is invalid.
	ConditionDegraded = "Degraded"
	// ConditionAuthorized is True when every namespace the rule selects lets the rule's
	// ServiceAccount create the copies, False when some refuse.
	ConditionAuthorized = "Authorized"
)

// Condition reasons of a CopyratorRule (status.conditions[].reason).
const (
	// ReasonCopiesInSync is Ready's (True) when every copy is in sync.
	ReasonCopiesInSync = "CopiesInSync"
	// ReasonNoSourcesMatched is Ready's (True) when no source object matches the rule.
	ReasonNoSourcesMatched = "NoSourcesMatched"
	// ReasonSourcesMissing is Ready's (False) when objects spec.sourceNames names do not
	// exist (or are copies).
	ReasonSourcesMissing = "SourcesMissing"
	// ReasonNoTargetNamespaces is Ready's (True) when no active namespace is a target.
	ReasonNoTargetNamespaces = "NoTargetNamespaces"
	// ReasonCopiesPending is Ready's (False) while some copies are not in sync yet.
	ReasonCopiesPending = "CopiesPending"
	// ReasonWriteFailed is Ready's (False) and Degraded's (True) when writing copies failed.
	ReasonWriteFailed = "WriteFailed"
	// ReasonSyncFailed is Ready's (False), Degraded's (True) and, before the first check,
	// Authorized's (Unknown) when a pass could not read what it needs.
	ReasonSyncFailed = "SyncFailed"
	// ReasonInvalidSpec is Ready's (False), Degraded's (True) and Authorized's (Unknown) when
	// the spec cannot be used.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonConflicts is Degraded's (True) when target objects exist that are not this rule's
	// copies (see status.conflicts).
	ReasonConflicts = "Conflicts"
	// ReasonAsExpected is Degraded's (False) with no conflicts and no failed writes.
	ReasonAsExpected = "AsExpected"
	// ReasonTargetsAuthorized is Authorized's (True) when every selected namespace consents.
	ReasonTargetsAuthorized = "TargetsAuthorized"
	// ReasonTargetsRefused is Authorized's (False) when a selected namespace refuses, and
	// Ready's (False) when no namespace the rule selects consents.
	ReasonTargetsRefused = "TargetsRefused"
	// ReasonLimitReached is Ready's (False) and Degraded's (True) when writes were left out
	// because the copies would pass a limit.
	ReasonLimitReached = "LimitReached"
)

// Reasons a target object is a conflict: the word status.conflicts[].reason starts with,
// before a colon and a message.
const (
	// ConflictReasonExistsNotManaged is set for an object Copyrator did not create.
	ConflictReasonExistsNotManaged = "ExistsNotManaged"
	// ConflictReasonManagedByOtherRule is set for another CopyratorRule's copy.
	ConflictReasonManagedByOtherRule = "ManagedByOtherRule"
)
