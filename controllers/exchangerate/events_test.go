package exchangerate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/status"
)

func TestBegan(t *testing.T) {
	c := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: operatorsv1.ConditionReady, Status: status, Reason: reason, Message: msg}}
	}
	tests := []struct {
		name       string
		prev, next []metav1.Condition
		status     metav1.ConditionStatus
		reason     string
		want       bool
	}{
		{"first time", nil, c(metav1.ConditionTrue, "X", "a"), metav1.ConditionTrue, "", true},
		{"status unchanged", c(metav1.ConditionTrue, "X", "a"), c(metav1.ConditionTrue, "X", "b"), metav1.ConditionTrue, "", false},
		{"status changed", c(metav1.ConditionFalse, "X", "a"), c(metav1.ConditionTrue, "X", "a"), metav1.ConditionTrue, "", true},
		{"other status", nil, c(metav1.ConditionFalse, "X", "a"), metav1.ConditionTrue, "", false},
		{"reason appears", c(metav1.ConditionFalse, "Y", "a"), c(metav1.ConditionFalse, "X", "a"), metav1.ConditionFalse, "X", true},
		{"same reason, new message", c(metav1.ConditionFalse, "X", "a"), c(metav1.ConditionFalse, "X", "b"), metav1.ConditionFalse, "X", true},
		{"same reason and message", c(metav1.ConditionFalse, "X", "a"), c(metav1.ConditionFalse, "X", "a"), metav1.ConditionFalse, "X", false},
		{"other reason", nil, c(metav1.ConditionFalse, "Y", "a"), metav1.ConditionFalse, "X", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, status.Began(tt.prev, tt.next, operatorsv1.ConditionReady, tt.status, tt.reason, tt.reason != "") != nil, tt.name)
	}
}
