package copyratorrule

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// Condition types and reasons.
const (
	ConditionReady    = "Ready"
	ConditionDegraded = "Degraded"

	ReasonCopiesInSync  = "CopiesInSync"
	ReasonNoSources     = "NoSourcesMatched"
	ReasonNoTargets     = "NoTargetNamespaces"
	ReasonCopiesPending = "CopiesPending"
	ReasonWriteFailed   = "WriteFailed"
	ReasonSyncFailed    = "SyncFailed"
	ReasonInvalidSpec   = "InvalidSpec"
	ReasonConflicts     = "Conflicts"
	ReasonAsExpected    = "AsExpected"
)

// maxListedConflicts bounds status.conflicts (the CRD allows 20).
const maxListedConflicts = 20

// passResult is what one reconcile pass found and did.
type passResult struct {
	// SpecErr is a mistake in the rule's spec; nothing was copied.
	SpecErr error
	// SyncErr is a failure to read the sources, namespaces or copies; nothing was copied.
	SyncErr error

	Kind      string
	Sources   int
	Targets   int
	Desired   int
	InSync    int
	Conflicts []conflict
	// WriteErrs are the failed writes, one message each.
	WriteErrs []string
}

// computeStatus returns the rule's status after a pass. The previous status supplies the
// conditions' transition times and, after a read failure, the last known counts.
func computeStatus(rule *flantv1.CopyratorRule, r passResult, now metav1.Time) flantv1.CopyratorRuleStatus {
	st := *rule.Status.DeepCopy()
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: rule.Generation, LastTransitionTime: now})
	}
	switch {
	case r.SpecErr != nil:
		st.ObservedGeneration = rule.Generation
		set(ConditionReady, metav1.ConditionFalse, ReasonInvalidSpec, r.SpecErr.Error())
		set(ConditionDegraded, metav1.ConditionTrue, ReasonInvalidSpec, r.SpecErr.Error())
		return st
	case r.SyncErr != nil:
		set(ConditionReady, metav1.ConditionFalse, ReasonSyncFailed, r.SyncErr.Error())
		set(ConditionDegraded, metav1.ConditionTrue, ReasonSyncFailed, r.SyncErr.Error())
		return st
	}

	st.ObservedGeneration = rule.Generation
	st.SourcesMatched = int32(r.Sources)
	st.TargetNamespaces = int32(r.Targets)
	st.CopiesInSync = int32(r.InSync)
	st.ConflictCount = int32(len(r.Conflicts))
	st.Conflicts = nil
	for _, c := range r.Conflicts[:min(len(r.Conflicts), maxListedConflicts)] {
		st.Conflicts = append(st.Conflicts, flantv1.CopyConflict{Namespace: c.Key.Namespace, Name: c.Key.Name, Reason: c.Reason})
	}

	expected := r.Desired - len(r.Conflicts)
	switch {
	case len(r.WriteErrs) > 0:
		set(ConditionReady, metav1.ConditionFalse, ReasonWriteFailed,
			fmt.Sprintf("%d of %d copies in sync; %d writes failed: %s", r.InSync, expected, len(r.WriteErrs), summarize(r.WriteErrs)))
	case r.Sources == 0:
		set(ConditionReady, metav1.ConditionTrue, ReasonNoSources,
			fmt.Sprintf("No %s in namespace %s matches the selector", r.Kind, rule.Namespace))
	case r.Targets == 0:
		set(ConditionReady, metav1.ConditionTrue, ReasonNoTargets, "No active namespace is a target")
	case r.InSync < expected:
		set(ConditionReady, metav1.ConditionFalse, ReasonCopiesPending,
			fmt.Sprintf("%d of %d copies in sync", r.InSync, expected))
	default:
		set(ConditionReady, metav1.ConditionTrue, ReasonCopiesInSync,
			fmt.Sprintf("%d copies of %d %ss in %d namespaces are in sync", r.InSync, r.Sources, r.Kind, r.Targets))
	}
	switch {
	case len(r.WriteErrs) > 0:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonWriteFailed, summarize(r.WriteErrs))
	case len(r.Conflicts) > 0:
		set(ConditionDegraded, metav1.ConditionTrue, ReasonConflicts,
			fmt.Sprintf("%d target objects exist and are not this rule's copies; they are left alone", len(r.Conflicts)))
	default:
		set(ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "No conflicts and no failed writes")
	}
	return st
}

// summarize joins the first few messages.
func summarize(msgs []string) string {
	const shown = 3
	s := strings.Join(msgs[:min(len(msgs), shown)], "; ")
	if len(msgs) > shown {
		s += fmt.Sprintf("; and %d more", len(msgs)-shown)
	}
	return s
}
