package status

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestConditionsStamp(t *testing.T) {
	var list []metav1.Condition
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 700_000_000, time.UTC)
	NewConditions(&list, 3, t0).Set("Ready", metav1.ConditionFalse, "Waiting", "not yet")
	c := meta.FindStatusCondition(list, "Ready")
	require.NotNil(t, c)
	assert.Equal(t, int64(3), c.ObservedGeneration)
	assert.Equal(t, t0.Truncate(time.Second), c.LastTransitionTime.Time, "whole seconds, as stored")

	NewConditions(&list, 4, t0.Add(time.Minute)).Set("Ready", metav1.ConditionFalse, "Waiting", "still not")
	c = meta.FindStatusCondition(list, "Ready")
	assert.Equal(t, int64(4), c.ObservedGeneration)
	assert.Equal(t, "still not", c.Message)
	assert.Equal(t, t0.Truncate(time.Second), c.LastTransitionTime.Time, "the status stayed: no transition")

	NewConditions(&list, 4, t0.Add(2*time.Minute)).Set("Ready", metav1.ConditionTrue, "Done", "")
	assert.Equal(t, t0.Add(2*time.Minute).Truncate(time.Second), meta.FindStatusCondition(list, "Ready").LastTransitionTime.Time)
}

func TestBegan(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: "Degraded", Status: status, Reason: reason, Message: msg}}
	}
	for _, tc := range []struct {
		name       string
		prev, next []metav1.Condition
		status     metav1.ConditionStatus
		reason     string
		renewed    bool
		want       bool
	}{
		{"first seen", nil, cond("True", "A", "m"), "True", "", false, true},
		{"entered", cond("False", "OK", ""), cond("True", "A", "m"), "True", "", false, true},
		{"stays", cond("True", "A", "m"), cond("True", "A", "m"), "True", "", false, false},
		{"new message, not renewed", cond("True", "A", "m"), cond("True", "A", "n"), "True", "", false, false},
		{"new message, renewed", cond("True", "A", "m"), cond("True", "A", "n"), "True", "", true, true},
		{"new reason, renewed", cond("True", "A", "m"), cond("True", "B", "m"), "True", "", true, true},
		{"other status", cond("False", "OK", ""), cond("False", "OK", ""), "True", "", false, false},
		{"gone", cond("True", "A", "m"), nil, "True", "", false, false},
		{"reason entered", cond("True", "A", "m"), cond("True", "B", "m"), "True", "B", false, true},
		{"reason stays", cond("True", "B", "m"), cond("True", "B", "n"), "True", "B", false, false},
		{"reason stays, renewed", cond("True", "B", "m"), cond("True", "B", "n"), "True", "B", true, true},
		{"another reason", nil, cond("True", "A", "m"), "True", "B", false, false},
		{"unknown is never news", nil, cond("Unknown", "A", "m"), "Unknown", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Began(tc.prev, tc.next, "Degraded", tc.status, tc.reason, tc.renewed)
			assert.Equal(t, tc.want, got != nil)
		})
	}
}
