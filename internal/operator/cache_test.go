package operator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestCacheNamespaces(t *testing.T) {
	assert.Nil(t, CacheNamespaces(nil), "no watch list: all namespaces")
	assert.Equal(t, map[string]cache.Config{"a": {}, "b": {}}, CacheNamespaces([]string{"a", "b"}))
}

func TestDeletionStarted(t *testing.T) {
	now := metav1.Now()
	live := &corev1.ConfigMap{}
	deleting := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	p := DeletionStarted()
	assert.True(t, p.Update(event.UpdateEvent{ObjectOld: live, ObjectNew: deleting}), "deletion begins")
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: deleting, ObjectNew: deleting}), "already deleting")
	assert.False(t, p.Update(event.UpdateEvent{ObjectOld: live, ObjectNew: live}), "plain update")
}

func TestStripDeploymentAndHPA(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 3}}
	out, err := StripDeployment(d)
	require.NoError(t, err)
	got := out.(*appsv1.Deployment)
	assert.Equal(t, int32(3), *got.Spec.Replicas)
	assert.Equal(t, map[string]string{"a": "b"}, got.Spec.Selector.MatchLabels)
	assert.Equal(t, map[string]string{"a": "b"}, got.Labels)
	assert.Empty(t, got.Spec.Template.Spec.Containers, "the pod template goes")
	assert.Zero(t, got.Status.ReadyReplicas)
	assert.Nil(t, got.ManagedFields)

	h := &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}, MaxReplicas: 9}}
	out, err = StripHPA(h)
	require.NoError(t, err)
	assert.Equal(t, "web", out.(*autoscalingv2.HorizontalPodAutoscaler).Spec.ScaleTargetRef.Name)
	assert.Zero(t, out.(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas)

	tomb := "not an object"
	out, err = StripDeployment(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, out)
}
