package testenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCondition(t *testing.T) {
	conds := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Done"}}
	assert.Equal(t, conds[0], Condition(conds, "Ready"))
	assert.Equal(t, metav1.Condition{Type: "Degraded"}, Condition(conds, "Degraded"), "absent: only the type")
}
