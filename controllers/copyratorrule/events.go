package copyratorrule

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// Event reasons.
const (
	EventCopiesCreated   = "CopiesCreated"
	EventCopiesUpdated   = "CopiesUpdated"
	EventCopiesRecreated = "CopiesRecreated"
	EventCopiesDeleted   = "CopiesDeleted"
	EventCopiesReleased  = "CopiesReleased"
	// EventCopyConflict is a Warning per new conflict, EventCopyConflicts the one that
	// sums up those beyond maxConflictEvents.
	EventCopyConflict  = "CopyConflict"
	EventCopyConflicts = "CopyConflicts"
	// EventCopyRefused is a Warning per namespace that newly refuses the rule's copies,
	// EventCopiesRefused the one that sums up those beyond maxConflictEvents.
	EventCopyRefused   = "CopyRefused"
	EventCopiesRefused = "CopiesRefused"
	// EventLimitReached is a Warning when a limit starts leaving writes out.
	EventLimitReached = "CopyLimitReached"
)

// maxConflictEvents bounds the Warning Events of one pass that each name a conflict.
const maxConflictEvents = 10

// writeEvents are the Event and log line of each kind of copy write in a pass, in the
// order they are sent.
var writeEvents = []struct {
	op                   op
	reason, action, verb string
}{
	{opCreate, EventCopiesCreated, "Create", "Created"},
	{opUpdate, EventCopiesUpdated, "Update", "Updated"},
	{opRecreate, EventCopiesRecreated, "Recreate", "Re-created"},
	{opDelete, EventCopiesDeleted, "Delete", "Deleted"},
}

// recordWrites sums up a pass's writes in one Event per kind of write, naming the first few copies.
func (r *Reconciler) recordWrites(ctx context.Context, rule *flantv1.CopyratorRule, written map[op][]copyKey) {
	for _, x := range writeEvents {
		keys := written[x.op]
		if len(keys) == 0 {
			continue
		}
		note := fmt.Sprintf("%s %d %s: %s", x.verb, len(keys), plural(len(keys), "copy", "copies"), describeKeys(keys))
		r.Recorder.Eventf(rule, nil, corev1.EventTypeNormal, x.reason, x.action, "%s", note)
		ctrl.LoggerFrom(ctx).Info(x.verb+" copies", "copyratorRule", klog.KObj(rule), "count", len(keys), "first", keys[0].String())
	}
}

// recordConflicts sends a Warning Event for each conflict that is new, up to
// maxConflictEvents, and one more that counts the rest.
func (r *Reconciler) recordConflicts(ctx context.Context, rule *flantv1.CopyratorRule, fresh []conflict) {
	for i, c := range fresh {
		if i == maxConflictEvents {
			r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, EventCopyConflicts, "Skip",
				"%d more target objects are not this rule's copies and are left alone", len(fresh)-maxConflictEvents)
			break
		}
		related := &corev1.ObjectReference{APIVersion: "v1", Kind: c.Key.Kind, Namespace: c.Key.Namespace, Name: c.Key.Name}
		r.Recorder.Eventf(rule, related, corev1.EventTypeWarning, EventCopyConflict, "Skip",
			"Left %s alone: %s", c.Key, c.Reason)
		ctrl.LoggerFrom(ctx).Info("Left a conflicting object alone", "copyratorRule", klog.KObj(rule), "object", c.Key.String(), "reason", c.Reason)
	}
}

// recordCleanup reports the copies a deleted rule's cleanup deleted and released.
func (r *Reconciler) recordCleanup(ctx context.Context, rule *flantv1.CopyratorRule, deleted, released int) {
	for _, x := range []struct {
		n                    int
		reason, action, verb string
	}{{deleted, EventCopiesDeleted, "Delete", "Deleted"}, {released, EventCopiesReleased, "Release", "Released"}} {
		if x.n == 0 {
			continue
		}
		r.Recorder.Eventf(rule, nil, corev1.EventTypeNormal, x.reason, x.action,
			"%s %d %s (deletionPolicy %s)", x.verb, x.n, plural(x.n, "copy", "copies"), rule.Spec.DeletionPolicy)
		ctrl.LoggerFrom(ctx).Info(x.verb+" copies of a deleted rule", "copyratorRule", klog.KObj(rule), "count", x.n)
	}
}

// newRefusals returns the refusals of next that prev does not list, and how many
// namespaces refuse beyond those listed (when the count grew past the listed ones). The
// previous status is the memory: a restart sends nothing twice.
func newRefusals(prev, next flantv1.CopyratorRuleStatus) (fresh []flantv1.RefusedNamespace, unlisted int) {
	seen := make(map[string]bool, len(prev.Refused))
	for _, r := range prev.Refused {
		seen[r.Namespace] = true
	}
	for _, r := range next.Refused {
		if !seen[r.Namespace] {
			fresh = append(fresh, r)
		}
	}
	if grew := int(next.RefusedCount - prev.RefusedCount); grew > len(fresh) {
		unlisted = grew - len(fresh)
	}
	return fresh, unlisted
}

// recordLimit sends a Warning Event when a limit starts leaving the rule's writes out
// (the Degraded condition's reason becomes LimitReached).
func (r *Reconciler) recordLimit(rule *flantv1.CopyratorRule, prev, next flantv1.CopyratorRuleStatus) {
	before := meta.FindStatusCondition(prev.Conditions, flantv1.ConditionDegraded)
	after := meta.FindStatusCondition(next.Conditions, flantv1.ConditionDegraded)
	if after != nil && after.Reason == flantv1.ReasonLimitReached && (before == nil || before.Reason != flantv1.ReasonLimitReached) {
		r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, EventLimitReached, "Skip", "%s", after.Message)
	}
}

// recordRefusals sends a Warning Event for each namespace that newly refuses the rule's
// copies, up to maxConflictEvents, and one more that counts the rest.
func (r *Reconciler) recordRefusals(ctx context.Context, rule *flantv1.CopyratorRule, prev, next flantv1.CopyratorRuleStatus) {
	fresh, unlisted := newRefusals(prev, next)
	for i, ref := range fresh {
		if i == maxConflictEvents {
			unlisted += len(fresh) - maxConflictEvents
			break
		}
		related := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ref.Namespace}
		r.Recorder.Eventf(rule, related, corev1.EventTypeWarning, EventCopyRefused, "Skip", "No copies in %s: %s", ref.Namespace, ref.Reason)
		ctrl.LoggerFrom(ctx).Info("Refused copies into a namespace", "copyratorRule", klog.KObj(rule), "namespace", ref.Namespace, "reason", ref.Reason)
	}
	if unlisted > 0 {
		r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, EventCopiesRefused, "Skip",
			"%d more namespaces refuse this rule's copies (%d in all; status.refused lists the first)", unlisted, next.RefusedCount)
	}
}

// describeKeys names the first three keys and counts the rest.
func describeKeys(keys []copyKey) string {
	const shown = 3
	parts := make([]string, 0, shown)
	for _, k := range keys[:min(len(keys), shown)] {
		parts = append(parts, k.String())
	}
	s := strings.Join(parts, ", ")
	if len(keys) > shown {
		s += fmt.Sprintf(" and %d more", len(keys)-shown)
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
