package copyratorrule

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// maxListedConflicts bounds status.conflicts and status.refused (the CRD allows 20 each).
const maxListedConflicts = 20

// outcome is what one pass found and did. reconcileCopies returns it; computeStatus turns
// it into the status, and the same value feeds the pass's Events and metrics.
type outcome struct {
	// Generation is the rule's generation the pass acted on.
	Generation int64
	// Namespace is the rule's namespace, where its sources are.
	Namespace string
	// Kind is the kind the rule copies.
	Kind string

	// SpecErr is a mistake in the rule's spec; nothing was copied.
	SpecErr error
	// SyncErr is a failure to read the sources, namespaces or copies, or to ask for
	// consent; nothing was copied.
	SyncErr error

	// ServiceAccount is the identity whose consent the pass asked for.
	ServiceAccount serviceAccountRef
	Sources        int
	// Skipped are the names of the sources never copied (forbiddenType).
	Skipped []string
	// Missing are the names in spec.sourceNames that no source has.
	Missing []string
	// Targets are the namespaces that consent and receive copies.
	Targets int
	// Refused are the namespaces the rule selects that do not consent, sorted.
	Refused []refusal
	// Frozen is the number of copies left as they are in namespaces RBAC refuses.
	Frozen int
	// Dropped is the number of writes left out because they would pass a limit (limits.go),
	// Limit the first limit (a flag and its value).
	Dropped int
	Limit   string
	// Desired is the number of copies the rule wants (sources × targets).
	Desired int
	// InSync is the number of copies that equal their source after the pass's writes.
	InSync int
	// Conflicts are the target objects left alone, sorted by key: those the plan found and
	// those a failed create found.
	Conflicts []conflict
	// Checked are the foreign conflicts a failed create confirmed in this pass.
	Checked map[copyKey]bool
	// Written are the copies each kind of write made equal to their source (or removed),
	// sorted by key.
	Written map[op][]copyKey
	// WriteErrs are the failed writes, one message each.
	WriteErrs []string
	// FreshOnly: the pass looked only at namespaces that just appeared (freshOnly); the
	// counts above cover those alone, so neither the status nor the gauges are computed
	// from them.
	FreshOnly bool
}

// withWrites adds a plan and the results of its writes (in any order) to what the pass found.
func (o outcome) withWrites(p plan, results []writeResult) outcome {
	o.Desired, o.InSync, o.Frozen = p.Desired, p.InSync, p.Frozen
	o.Conflicts = slices.Clone(p.Conflicts)
	o.Checked = map[copyKey]bool{}
	o.Written = map[op][]copyKey{}
	for _, wr := range results {
		switch {
		case wr.Err != nil:
			o.WriteErrs = append(o.WriteErrs, wr.Err.Error())
		case wr.Conflict != nil:
			o.Conflicts = append(o.Conflicts, *wr.Conflict)
			o.Checked[wr.Conflict.Key] = true
		case wr.Found:
			o.InSync++
		case wr.Done:
			o.Written[wr.Action.Op] = append(o.Written[wr.Action.Op], wr.Action.Key)
			if wr.Action.Op != opDelete {
				o.InSync++
			}
		}
	}
	sort.Slice(o.Conflicts, func(i, j int) bool { return lessKey(o.Conflicts[i].Key, o.Conflicts[j].Key) })
	sort.Slice(o.Refused, func(i, j int) bool { return o.Refused[i].Namespace < o.Refused[j].Namespace })
	for _, keys := range o.Written {
		sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	}
	return o
}

// computeStatus returns the rule's status after a pass. The previous status supplies the
// conditions' transition times and, after a read failure, the last known counts. Both
// conditions are set on every pass.
func computeStatus(prev flantv1.CopyratorRuleStatus, o outcome, now metav1.Time) flantv1.CopyratorRuleStatus {
	st := *prev.DeepCopy()
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: o.Generation, LastTransitionTime: now})
	}
	// observedGeneration claims only a spec the pass acted on fully: one that returned no
	// error (docs/STYLE.md, "Status writes and observedGeneration"). A spec mistake, a
	// conflict, a refusing namespace or a limit is no error of the pass (the conditions say
	// so); a failed read or write is, and Reconcile returns it to retry the pass.
	if o.SyncErr == nil && len(o.WriteErrs) == 0 {
		st.ObservedGeneration = o.Generation
	}
	switch {
	case o.SpecErr != nil:
		// A spec mistake ends the pass without an error: the next edit of the spec brings a
		// new generation.
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

	st.SourcesMatched = int32(o.Sources)
	st.TargetNamespaces = int32(o.Targets)
	st.CopiesInSync = int32(o.InSync)
	st.ConflictCount = int32(len(o.Conflicts))
	st.Conflicts = nil
	for _, c := range o.Conflicts[:min(len(o.Conflicts), maxListedConflicts)] {
		st.Conflicts = append(st.Conflicts, flantv1.CopyConflict{Namespace: c.Key.Namespace, Name: c.Key.Name, Reason: c.Reason})
	}
	st.RefusedCount = int32(len(o.Refused))
	st.Refused = nil
	for _, r := range o.Refused[:min(len(o.Refused), maxListedConflicts)] {
		st.Refused = append(st.Refused, flantv1.RefusedNamespace{Namespace: r.Namespace, Reason: r.Reason})
	}
	if len(o.Refused) == 0 {
		set(flantv1.ConditionAuthorized, metav1.ConditionTrue, flantv1.ReasonTargetsAuthorized,
			fmt.Sprintf("Every namespace the rule selects lets ServiceAccount %s create %ss", o.ServiceAccount, o.Kind))
	} else {
		set(flantv1.ConditionAuthorized, metav1.ConditionFalse, flantv1.ReasonTargetsRefused, refusedMessage(o))
	}

	expected := o.Desired - len(o.Conflicts)
	switch {
	case o.Dropped > 0:
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonLimitReached, limitMessage(o, expected))
	case len(o.WriteErrs) > 0:
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonWriteFailed,
			fmt.Sprintf("%d of %d copies in sync; %d writes failed: %s", o.InSync, expected, len(o.WriteErrs), summarize(o.WriteErrs)))
	case o.Sources == 0 && len(o.Missing) > 0:
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonSourcesMissing, missingMessage(o))
	case o.Sources == 0:
		set(flantv1.ConditionReady, metav1.ConditionTrue, flantv1.ReasonNoSourcesMatched, noSourcesMessage(o))
	case o.Targets == 0 && len(o.Refused) > 0:
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonTargetsRefused,
			fmt.Sprintf("No namespace the rule selects consents to its copies (%d refuse; see the Authorized condition)", len(o.Refused)))
	case o.Targets == 0:
		set(flantv1.ConditionReady, metav1.ConditionTrue, flantv1.ReasonNoTargetNamespaces, "No active namespace is a target")
	case o.InSync < expected:
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonCopiesPending,
			fmt.Sprintf("%d of %d copies in sync", o.InSync, expected))
	case len(o.Missing) > 0:
		set(flantv1.ConditionReady, metav1.ConditionFalse, flantv1.ReasonSourcesMissing,
			fmt.Sprintf("%d copies of %d %ss in %d namespaces are in sync; %s", o.InSync, o.Sources, o.Kind, o.Targets, missingMessage(o)))
	default:
		msg := fmt.Sprintf("%d copies of %d %ss in %d namespaces are in sync", o.InSync, o.Sources, o.Kind, o.Targets)
		if len(o.Skipped) > 0 {
			msg += fmt.Sprintf("; %d matching %s never copied (%s: types %s)", len(o.Skipped),
				plural(len(o.Skipped), "Secret is", "Secrets are"), strings.Join(o.Skipped, ", "), skippedTypes())
		}
		set(flantv1.ConditionReady, metav1.ConditionTrue, flantv1.ReasonCopiesInSync, msg)
	}
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

// limitMessage says how many writes a limit left out.
func limitMessage(o outcome, expected int) string {
	return fmt.Sprintf("%d of %d copies in sync; %d %s left out: the copies would pass %s (a cluster admin's limit on copies)",
		o.InSync, expected, o.Dropped, plural(o.Dropped, "write was", "writes were"), o.Limit)
}

// refusedMessage explains the Authorized condition when namespaces refuse: the first few
// and why, what to do, and what became of copies already there.
func refusedMessage(o outcome) string {
	const shown = 3
	parts := make([]string, 0, shown)
	for _, r := range o.Refused[:min(len(o.Refused), shown)] {
		parts = append(parts, r.Reason)
	}
	msg := fmt.Sprintf("%d %s the rule selects receive no copies: %s", len(o.Refused),
		plural(len(o.Refused), "namespace", "namespaces"), strings.Join(parts, "; "))
	if len(o.Refused) > shown {
		msg += fmt.Sprintf("; and %d more (status.refused)", len(o.Refused)-shown)
	}
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
	const shown = 5
	names := strings.Join(o.Missing[:min(len(o.Missing), shown)], ", ")
	if len(o.Missing) > shown {
		names += fmt.Sprintf(" and %d more", len(o.Missing)-shown)
	}
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

// summarize joins the first few messages.
func summarize(msgs []string) string {
	const shown = 3
	s := strings.Join(msgs[:min(len(msgs), shown)], "; ")
	if len(msgs) > shown {
		s += fmt.Sprintf("; and %d more", len(msgs)-shown)
	}
	return s
}
