package status

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conditions sets the conditions of one pass, each stamped with the generation the pass
// read and the pass's time (meta.SetStatusCondition keeps a condition's
// lastTransitionTime while its status stays).
type Conditions struct {
	list       *[]metav1.Condition
	generation int64
	now        metav1.Time
}

// NewConditions sets conditions in list for the pass over generation at now. now is kept
// in whole seconds, as the API server stores it, so that a status computed in memory
// equals the same status read back.
func NewConditions(list *[]metav1.Condition, generation int64, now time.Time) Conditions {
	return Conditions{list: list, generation: generation, now: metav1.NewTime(now.Truncate(time.Second))}
}

// Set sets condition typ.
func (c Conditions) Set(typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(c.list, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: c.generation, LastTransitionTime: c.now})
}

// Began returns condition typ of next when it marks the start of something worth one Event:
// it is in status (and, when reason is not empty, has that reason) and prev's was not; or,
// with renewed, prev's was too but with another reason or message (a new problem of the
// same kind). Otherwise nil. metav1.ConditionUnknown is never news.
func Began(prev, next []metav1.Condition, typ string, status metav1.ConditionStatus, reason string, renewed bool) *metav1.Condition {
	n := meta.FindStatusCondition(next, typ)
	if n == nil || n.Status != status || status == metav1.ConditionUnknown || (reason != "" && n.Reason != reason) {
		return nil
	}
	p := meta.FindStatusCondition(prev, typ)
	switch {
	case p == nil || p.Status != status || (reason != "" && p.Reason != reason):
		return n
	case renewed && (p.Reason != n.Reason || p.Message != n.Message):
		return n
	}
	return nil
}
