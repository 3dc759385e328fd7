package copyratorrule

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/status"
)

// maxListedConflicts bounds status.conflicts and status.refused (the CRD allows 20 each).
const maxListedConflicts = 20

// outcome is what one pass found and did: computeStatus turns it into the status, and the
// same value feeds the pass's Events and metrics.
type outcome struct {
	// Generation is the one the pass read; Namespace holds the sources; Kind is copied.
	Generation int64
	Namespace  string
	Kind       string
	// SpecErr is a mistake in the rule's spec, SyncErr a failure to read the sources,
	// namespaces or copies, or to ask for consent: nothing (more) was copied.
	SpecErr, SyncErr error
	// ServiceAccount is the identity whose consent the pass asked for.
	ServiceAccount types.NamespacedName
	Sources        int
	// Skipped sources are never copied (forbiddenType); Missing are named, not there.
	Skipped, Missing []string
	// Targets consent, Refused (sorted) do not; Frozen copies are left in refusing ones.
	Targets int
	Refused []refusal
	Frozen  int
	// Unadopted of the Frozen copies have no LabelRuleUID yet (adopting).
	Unadopted int
	Dropped   int    // writes a limit left out (admit)
	Limit     string // the first limit
	// Desired copies (sources × targets), InSync after the pass's writes.
	Desired, InSync int
	// Conflicts are left alone (sorted); Checked foreign ones a failed create confirmed.
	Conflicts []conflict
	Checked   map[copyKey]bool
	// Written are the copies each kind of write made right (sorted); WriteErrs failed.
	Written   map[op][]copyKey
	WriteErrs []string
	// FreshOnly: the counts cover the fresh namespaces alone (freshOnly): no status.
	FreshOnly bool
}

// err is the pass's error, which Reconcile returns to retry the pass: a failed read or
// failed writes. With it status.Writer.Finish leaves observedGeneration where it was
// (docs/STYLE.md, "Status writes and observedGeneration"). A spec mistake, a conflict, a
// refusing namespace or a limit is no error of the pass: the conditions report it.
func (o outcome) err() error {
	switch {
	case o.SyncErr != nil:
		return o.SyncErr
	case len(o.WriteErrs) > 0:
		return fmt.Errorf("%d writes failed: %s", len(o.WriteErrs), summarize(o.WriteErrs))
	}
	return nil
}

// computeStatus returns the rule's status after a pass (the derive of status.Writer.Finish,
// which sets observedGeneration). The previous status supplies the conditions' transition
// times and, after a read failure, the last known counts. Every condition is set on every pass.
func computeStatus(prev flantv1.CopyratorRuleStatus, o outcome, now time.Time) flantv1.CopyratorRuleStatus {
	st := *prev.DeepCopy()
	set := status.NewConditions(&st.Conditions, o.Generation, now).Set
	switch {
	case o.SpecErr != nil:
		// No error: the next edit of the spec brings a new generation.
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonInvalidSpec, o.SpecErr.Error())
		set(flantv1.ConditionDegraded, metav1.ConditionTrue, flantv1.ReasonInvalidSpec, o.SpecErr.Error())
		set(flantv1.ConditionAuthorized, metav1.ConditionUnknown, flantv1.ReasonInvalidSpec, "Not checked: the spec is invalid")
		return st
	case o.SyncErr != nil:
		// Nothing was acted on: the counts stay as they were.
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonSyncFailed, o.SyncErr.Error())
		set(flantv1.ConditionDegraded, metav1.ConditionTrue, flantv1.ReasonSyncFailed, o.SyncErr.Error())
		if meta.FindStatusCondition(st.Conditions, flantv1.ConditionAuthorized) == nil {
			set(flantv1.ConditionAuthorized, metav1.ConditionUnknown, flantv1.ReasonSyncFailed, "Not checked yet")
		}
		return st
	}
	setCounts(&st, o)
	if len(o.Refused) == 0 {
		set(flantv1.ConditionAuthorized, metav1.ConditionTrue, flantv1.ReasonTargetsAuthorized,
			fmt.Sprintf("Every namespace the rule selects lets ServiceAccount %s create %ss", o.ServiceAccount, o.Kind))
	} else {
		set(flantv1.ConditionAuthorized, metav1.ConditionFalse, flantv1.ReasonTargetsRefused, refusedMessage(o))
	}
	expected := o.Desired - len(o.Conflicts)
	ready, reason, msg := readiness(o, expected)
	set(flantv1.ConditionReady, ready, reason, msg)
	switch {
	case o.Dropped > 0:
		set(flantv1.ConditionDegraded, metav1.ConditionTrue, flantv1.ReasonLimitReached, limitMessage(o, expected))
	case len(o.WriteErrs) > 0:
		set(flantv1.ConditionDegraded, metav1.ConditionTrue, flantv1.ReasonWriteFailed, summarize(o.WriteErrs))
	case len(o.Conflicts) > 0:
		set(flantv1.ConditionDegraded, metav1.ConditionTrue, flantv1.ReasonConflicts,
			fmt.Sprintf("%d target objects exist and are not this rule's copies; they are left alone", len(o.Conflicts)))
	default:
		set(flantv1.ConditionDegraded, metav1.ConditionFalse, flantv1.ReasonAsExpected, "No conflicts and no failed writes")
	}
	return st
}

// setCounts sets the counts and lists of a pass that read everything.
func setCounts(st *flantv1.CopyratorRuleStatus, o outcome) {
	st.SourcesMatched, st.TargetNamespaces, st.CopiesInSync = int32(o.Sources), int32(o.Targets), int32(o.InSync)
	st.ConflictCount, st.Conflicts = int32(len(o.Conflicts)), nil
	for _, c := range o.Conflicts[:min(len(o.Conflicts), maxListedConflicts)] {
		st.Conflicts = append(st.Conflicts, flantv1.CopyConflict{Namespace: c.Key.Namespace, Name: c.Key.Name, Reason: c.Reason})
	}
	st.RefusedCount, st.Refused = int32(len(o.Refused)), nil
	for _, r := range o.Refused[:min(len(o.Refused), maxListedConflicts)] {
		st.Refused = append(st.Refused, flantv1.RefusedNamespace{Namespace: r.Namespace, Reason: r.Reason})
	}
}

// readiness is the Ready condition after a pass that read everything; expected is the
// number of copies it wants and may write (conflicts left out).
func readiness(o outcome, expected int) (metav1.ConditionStatus, string, string) {
	switch {
	case o.Dropped > 0:
		return metav1.ConditionFalse, flantv1.ReasonLimitReached, limitMessage(o, expected)
	case len(o.WriteErrs) > 0:
		return metav1.ConditionFalse, flantv1.ReasonWriteFailed,
			fmt.Sprintf("%d of %d copies in sync; %d writes failed: %s", o.InSync, expected, len(o.WriteErrs), summarize(o.WriteErrs))
	case o.Sources == 0 && len(o.Missing) > 0:
		return metav1.ConditionFalse, flantv1.ReasonSourcesMissing, missingMessage(o)
	case o.Sources == 0:
		return metav1.ConditionTrue, flantv1.ReasonNoSourcesMatched, noSourcesMessage(o)
	case o.Targets == 0 && len(o.Refused) > 0:
		return metav1.ConditionFalse, flantv1.ReasonTargetsRefused,
			fmt.Sprintf("No namespace the rule selects consents to its copies (%d refuse; see the Authorized condition)", len(o.Refused))
	case o.Targets == 0:
		return metav1.ConditionTrue, flantv1.ReasonNoTargetNamespaces, "No active namespace is a target"
	case o.InSync < expected:
		return metav1.ConditionFalse, flantv1.ReasonCopiesPending, fmt.Sprintf("%d of %d copies in sync", o.InSync, expected)
	case len(o.Missing) > 0:
		return metav1.ConditionFalse, flantv1.ReasonSourcesMissing,
			fmt.Sprintf("%d copies of %d %ss in %d namespaces are in sync; %s", o.InSync, o.Sources, o.Kind, o.Targets, missingMessage(o))
	}
	msg := fmt.Sprintf("%d copies of %d %ss in %d namespaces are in sync", o.InSync, o.Sources, o.Kind, o.Targets)
	if len(o.Skipped) > 0 {
		msg += fmt.Sprintf("; %d matching %s never copied (%s: types %s)", len(o.Skipped),
			plural(len(o.Skipped), "Secret is", "Secrets are"), strings.Join(o.Skipped, ", "), skippedTypes())
	}
	return metav1.ConditionTrue, flantv1.ReasonCopiesInSync, msg
}

func limitMessage(o outcome, expected int) string {
	return fmt.Sprintf("%d of %d copies in sync; %d %s left out: the copies would pass %s (a cluster admin's limit on copies)",
		o.InSync, expected, o.Dropped, plural(o.Dropped, "write was", "writes were"), o.Limit)
}

// refusedMessage explains the Authorized condition when namespaces refuse: the first few
// and why, what to do, and what became of copies already there.
func refusedMessage(o outcome) string {
	reasons := make([]string, 0, len(o.Refused))
	for _, r := range o.Refused {
		reasons = append(reasons, r.Reason)
	}
	msg := fmt.Sprintf("%d %s the rule selects receive no copies: %s", len(o.Refused),
		plural(len(o.Refused), "namespace", "namespaces"), firstOf(reasons, 3, "; ", "; and %d more (status.refused)"))
	msg += fmt.Sprintf(". A namespace receives copies when ServiceAccount %s may create %ss there: its owner grants it with a RoleBinding to ClusterRole %s",
		o.ServiceAccount, o.Kind, TargetClusterRole)
	if o.Frozen > 0 {
		msg += fmt.Sprintf(". %d %s already in refusing namespaces %s and no longer updated", o.Frozen,
			plural(o.Frozen, "copy", "copies"), plural(o.Frozen, "is left as it is", "are left as they are"))
	}
	return msg
}

// missingMessage names the sources spec.sourceNames names that are not there.
func missingMessage(o outcome) string {
	names := firstOf(o.Missing, 5, ", ", " and %d more")
	return fmt.Sprintf("%d %s spec.sourceNames names %s not in namespace %s (or %s Copyrator's copies, never sources): %s; copied once they exist",
		len(o.Missing), plural(len(o.Missing), o.Kind, o.Kind+"s"), plural(len(o.Missing), "is", "are"), o.Namespace,
		plural(len(o.Missing), "is one of", "are"), names)
}

// noSourcesMessage says that no source matches, and names the matching Secrets that are
// never copied.
func noSourcesMessage(o outcome) string {
	msg := fmt.Sprintf("No %s in namespace %s matches the selector", o.Kind, o.Namespace)
	if len(o.Skipped) > 0 {
		msg += fmt.Sprintf(" and may be copied (%s: Secrets of types %s are never copied)", strings.Join(o.Skipped, ", "), skippedTypes())
	}
	return msg
}

func skippedTypes() string {
	names := make([]string, 0, len(forbiddenSecretTypes))
	for _, t := range forbiddenSecretTypes {
		names = append(names, string(t))
	}
	return strings.Join(names, " and ")
}

func summarize(msgs []string) string { return firstOf(msgs, 3, "; ", "; and %d more") }

// firstOf joins the first shown items with sep, and counts the rest with more (a format).
func firstOf(items []string, shown int, sep, more string) string {
	s := strings.Join(items[:min(len(items), shown)], sep)
	if len(items) > shown {
		s += fmt.Sprintf(more, len(items)-shown)
	}
	return s
}
