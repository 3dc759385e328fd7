package testenv

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace creates a namespace named prefix-<5 random characters> with the given labels
// and deletes it when the test ends. It returns the name.
func Namespace(t testing.TB, c client.Client, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("%s-%s", prefix, rand.String(5)), Labels: labels}}
	require.NoError(t, c.Create(context.Background(), ns))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// Events returns the events.k8s.io Events in namespace ns regarding the object of the
// given kind and name.
func Events(t require.TestingT, c client.Client, ns, kind, name string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	require.NoError(t, c.List(context.Background(), list, client.InNamespace(ns)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// EventReasons returns the reasons of Events(t, c, ns, kind, name), one per Event.
func EventReasons(t require.TestingT, c client.Client, ns, kind, name string) []string {
	var out []string
	for _, e := range Events(t, c, ns, kind, name) {
		out = append(out, e.Reason)
	}
	return out
}

// Condition returns the condition of type typ, or a Condition with only Type set (Status
// empty) when there is none, so an assertion on its Status or Reason fails with a clear diff.
func Condition(conds []metav1.Condition, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ}
}

// Deployment returns a Deployment of replicas pods labelled app=name whose image is never
// pulled (kwok runs the pods of the local cluster) and that stop at once when deleted.
func Deployment(ns, name string, replicas int32) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/fake:1"}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
				},
			},
		},
	}
}
