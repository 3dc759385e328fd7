package localcluster

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestFullClusterRunsPods starts the full local cluster, checks the fake node is Ready, a
// 3-replica Deployment becomes available, a deleted pod is replaced, and Stop leaves no
// component running.
func TestFullClusterRunsPods(t *testing.T) {
	if os.Getenv("QUARTET_SKIP_INTEGRATION") != "" {
		t.Skip("QUARTET_SKIP_INTEGRATION set")
	}
	binDir, kwokDir, err := DefaultBinDirs()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: t.TempDir(), BinDir: binDir, KwokDir: kwokDir, Full: true, Log: t.Logf})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	require.Len(t, c.Processes, 5)

	cs, err := kubernetes.NewForConfig(c.RestConfig())
	require.NoError(t, err)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	assert.True(t, nodeReady(nodes.Items[0]), "fake node Ready")

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	_, err = cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 3
	}, time.Minute, 100*time.Millisecond, "3 replicas available")

	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 3)
	for _, p := range pods.Items {
		assert.Equal(t, corev1.PodRunning, p.Status.Phase)
	}
	victim := pods.Items[0].Name
	require.NoError(t, cs.CoreV1().Pods("default").Delete(ctx, victim, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false
		}
		running := 0
		for _, p := range pods.Items {
			if p.Name == victim {
				return false
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3
	}, time.Minute, 100*time.Millisecond, "deleted pod replaced")

	pids := []int{}
	for _, p := range c.Processes {
		pids = append(pids, p.PID)
	}
	require.NoError(t, c.Stop())
	stopped = true
	for _, pid := range pids {
		assert.Error(t, syscall.Kill(pid, 0), "process %d still running after Stop", pid)
	}
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
