package chaosagent

import (
	"bytes"
	"cmp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quartet-operator/quartet/internal/manager"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestSetupLogsUnknownOperatorNamespace registers the controller with a manager that is never
// started (the API server is asked only for its resources) and reads what Setup logged.
func TestSetupLogsUnknownOperatorNamespace(t *testing.T) {
	env.Require(t)
	for _, tc := range []struct {
		name      string
		namespace string
		logged    bool
	}{
		{"run outside a cluster", "", true},
		{"own namespace known", "quartet-system", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			opts := manager.Options(testenv.Scheme(), scope.Namespaces{Operator: tc.namespace})
			opts.Metrics = metricsserver.Options{BindAddress: "0"}
			opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
			opts.Logger = crzap.New(crzap.WriteTo(&out))
			mgr, err := ctrl.NewManager(env.Config, opts)
			require.NoError(t, err)
			o := &Options{}
			require.NoError(t, o.Setup(mgr, scope.Namespaces{Operator: tc.namespace}))
			if !tc.logged {
				assert.NotContains(t, out.String(), "Operator namespace unknown")
				return
			}
			assert.Contains(t, out.String(), "Operator namespace unknown: it is not protected from ChaosAgents")
			assert.Equal(t, 1, strings.Count(out.String(), "Operator namespace unknown"), "logged once")
			assert.Contains(t, out.String(), `"protectedNamespaces":["kube-node-lease","kube-public","kube-system"]`)
		})
	}
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

// TestCacheOptionsHoldOnlyRunningPods pins the pod cache's field selector: a pod of any other
// phase never reaches a round, so it neither counts toward podTolerance nor is killed
// (OnlyRunningPodsCountTowardTolerance shows it on the API server).
func TestCacheOptionsHoldOnlyRunningPods(t *testing.T) {
	var pods cache.ByObject
	found := false
	for obj, by := range CacheOptions() { // keyed by pointer: found by type
		if _, isPod := obj.(*corev1.Pod); isPod {
			pods, found = by, true
		}
	}
	require.True(t, found, "CacheOptions selects pods")
	require.NotNil(t, pods.Field)
	assert.Equal(t, "status.phase=Running", pods.Field.String(), "what the API server is asked for")
	for _, tc := range []struct {
		phase  corev1.PodPhase
		cached bool
	}{
		{corev1.PodRunning, true},
		{corev1.PodPending, false},
		{corev1.PodSucceeded, false},
		{corev1.PodFailed, false},
		{corev1.PodUnknown, false},
		{"", false},
	} {
		t.Run(cmp.Or(string(tc.phase), "NoPhase"), func(t *testing.T) {
			assert.Equal(t, tc.cached, pods.Field.Matches(fields.Set{"status.phase": string(tc.phase)}))
		})
	}
}
