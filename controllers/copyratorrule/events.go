package copyratorrule

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/status"
)

// Event reasons (docs/copyratorrule.md, "Events"); CopyConflicts and CopiesRefused sum up
// what maxConflictEvents CopyConflict or CopyRefused Events a pass leave out.
const (
	EventCopiesCreated   = "CopiesCreated"
	EventCopiesUpdated   = "CopiesUpdated"
	EventCopiesRecreated = "CopiesRecreated"
	EventCopiesDeleted   = "CopiesDeleted"
	EventCopiesReleased  = "CopiesReleased"
	EventCopyConflict    = "CopyConflict"
	EventCopyConflicts   = "CopyConflicts"
	EventCopyRefused     = "CopyRefused"
	EventCopiesRefused   = "CopiesRefused"
	EventLimitReached    = "CopyLimitReached"
)

const maxConflictEvents = 10

// writeEvents are the Event and log line of each kind of copy write, in the order sent.
var writeEvents = []struct {
	op                   op
	reason, action, verb string
}{
	{opCreate, EventCopiesCreated, "Create", "Created"},
	{opUpdate, EventCopiesUpdated, "Update", "Updated"},
	{opRecreate, EventCopiesRecreated, "Recreate", "Re-created"},
	{opDelete, EventCopiesDeleted, "Delete", "Deleted"},
	{opRelease, EventCopiesReleased, "Release", "Released"},
}

// report sends a pass's Events and sets its metrics: the writes, and what began since prev,
// the rule before Finish (nil: a fresh-only pass). Events regard the rule as read: the
// recorder sums up Events of a reason regarding one object version into a series.
func (r *Reconciler) report(ctx context.Context, rule, prev *flantv1.CopyratorRule, o outcome) {
	read := cmp.Or(prev, rule)
	r.recordWrites(ctx, read, o.Written, "")
	var st *flantv1.CopyratorRuleStatus
	if prev != nil {
		st = &rule.Status
		r.recordConflicts(ctx, read, o.Kind, prev.Status, rule.Status)
		r.recordRefusals(ctx, read, prev.Status, rule.Status)
		if c := status.Began(prev.Status.Conditions, rule.Status.Conditions, flantv1.ConditionDegraded,
			metav1.ConditionTrue, flantv1.ReasonLimitReached, false); c != nil {
			r.Recorder.Eventf(read, nil, corev1.EventTypeWarning, EventLimitReached, "Skip", "%s", c.Message)
		}
	}
	recordPass(client.ObjectKeyFromObject(rule), o, st)
}

// recordWrites sums up a pass's writes (a deleted rule's: with why) in an Event per kind.
func (r *Reconciler) recordWrites(ctx context.Context, rule *flantv1.CopyratorRule, written map[op][]copyKey, why string) {
	for _, x := range writeEvents {
		keys := written[x.op]
		if len(keys) == 0 {
			continue
		}
		note := fmt.Sprintf("%s %d %s: %s%s", x.verb, len(keys), plural(len(keys), "copy", "copies"), describeKeys(keys), why)
		r.Recorder.Eventf(rule, nil, corev1.EventTypeNormal, x.reason, x.action, "%s", note)
		ctrl.LoggerFrom(ctx).Info(x.verb+" copies", "copyratorRule", klog.KObj(rule), "count", len(keys), "first", keys[0].String())
	}
}

// newlyListed returns the entries next lists and prev does not, and how many more came:
// the previous status is the memory, so a restart sends nothing twice.
func newlyListed[T any](prev, next []T, prevCount, nextCount int32, key func(T) string) (fresh []T, unlisted int) {
	seen := make(map[string]bool, len(prev))
	for _, x := range prev {
		seen[key(x)] = true
	}
	for _, x := range next {
		if !seen[key(x)] {
			fresh = append(fresh, x)
		}
	}
	if grew := int(nextCount - prevCount); grew > len(fresh) {
		unlisted = grew - len(fresh)
	}
	return fresh, unlisted
}

// recordConflicts announces the conflicts the status newly lists.
func (r *Reconciler) recordConflicts(ctx context.Context, rule *flantv1.CopyratorRule, kind string, prev, next flantv1.CopyratorRuleStatus) {
	fresh, unlisted := newlyListed(prev.Conflicts, next.Conflicts, prev.ConflictCount, next.ConflictCount,
		func(c flantv1.CopyConflict) string { return c.Namespace + "/" + c.Name + ":" + c.Reason })
	named := min(len(fresh), maxConflictEvents)
	more := unlisted + len(fresh) - named
	for _, c := range fresh[:named] {
		key := copyKey{Kind: kind, Namespace: c.Namespace, Name: c.Name}
		related := &corev1.ObjectReference{APIVersion: "v1", Kind: kind, Namespace: c.Namespace, Name: c.Name}
		r.Recorder.Eventf(rule, related, corev1.EventTypeWarning, EventCopyConflict, "Skip", "Left %s alone: %s", key, c.Reason)
		ctrl.LoggerFrom(ctx).Info("Left a conflicting object alone", "copyratorRule", klog.KObj(rule), "object", key.String(), "reason", c.Reason)
	}
	if more > 0 {
		r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, EventCopyConflicts, "Skip",
			"%d more target objects are not this rule's copies and are left alone", more)
	}
}

// newRefusals returns the refusals next newly lists, and how many more there are.
func newRefusals(prev, next flantv1.CopyratorRuleStatus) (fresh []flantv1.RefusedNamespace, unlisted int) {
	return newlyListed(prev.Refused, next.Refused, prev.RefusedCount, next.RefusedCount,
		func(r flantv1.RefusedNamespace) string { return r.Namespace })
}

// recordRefusals announces the namespaces that newly refuse the rule's copies.
func (r *Reconciler) recordRefusals(ctx context.Context, rule *flantv1.CopyratorRule, prev, next flantv1.CopyratorRuleStatus) {
	fresh, unlisted := newRefusals(prev, next)
	named := min(len(fresh), maxConflictEvents)
	more := unlisted + len(fresh) - named
	for _, ref := range fresh[:named] {
		related := &corev1.ObjectReference{APIVersion: "v1", Kind: "Namespace", Name: ref.Namespace}
		r.Recorder.Eventf(rule, related, corev1.EventTypeWarning, EventCopyRefused, "Skip", "No copies in %s: %s", ref.Namespace, ref.Reason)
		ctrl.LoggerFrom(ctx).Info("Refused copies into a namespace", "copyratorRule", klog.KObj(rule), "namespace", ref.Namespace, "reason", ref.Reason)
	}
	if more > 0 {
		r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, EventCopiesRefused, "Skip",
			"%d more namespaces refuse this rule's copies (%d in all; status.refused lists the first)", more, next.RefusedCount)
	}
}

func describeKeys(keys []copyKey) string {
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, k.String())
	}
	return firstOf(names, 3, ", ", " and %d more")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
