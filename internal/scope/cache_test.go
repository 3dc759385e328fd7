package scope

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestDeletionStarted(t *testing.T) {
	now := metav1.Now()
	live := &corev1.ConfigMap{}
	deleting := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	p := DeletionStarted()
	assert.True(t, p.Update(event.UpdateEvent{ObjectOld: live, ObjectNew: deleting}), "deletion begins")
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: deleting, ObjectNew: deleting}), "already deleting")
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: live, ObjectNew: live}), "plain update")
}
