package testenv

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
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

// CopyTargetRole is the ClusterRole of config/rbac/copyrator_target_role.yaml as the
// installs name it: consent to CopyratorRule copies.
const CopyTargetRole = "quartet-copyrator-target"

// GrantCopies lets the CopyratorRules of namespace saNamespace that act as ServiceAccount
// saName copy into the namespaces given, or into every namespace when none is given (a
// ClusterRoleBinding), as an admin consents: bindings to CopyTargetRole, created here
// (with the ClusterRole when missing) and deleted by revoke or when the test ends.
func GrantCopies(t testing.TB, c client.Client, saNamespace, saName string, namespaces ...string) (revoke func()) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: CopyTargetRole},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"create"}}}}
	if err := c.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CopyTargetRole}
	name := fmt.Sprintf("copies-%s-%s-%s", saNamespace, saName, rand.String(4))
	var objs []client.Object
	if len(namespaces) == 0 {
		objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects})
	}
	for _, ns := range namespaces {
		objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RoleRef: ref, Subjects: subjects})
	}
	for _, o := range objs {
		require.NoError(t, c.Create(ctx, o))
	}
	revoke = func() {
		for _, o := range objs {
			_ = c.Delete(context.Background(), o)
		}
	}
	t.Cleanup(revoke)
	return revoke
}

// GrantNodes lets RegistryMirror namespace/name onto the nodes for registry host, as a
// cluster admin consents: a RegistryHostGrant with capabilities pull and the ones given
// (GrantNodesSpec for the other fields), deleted by revoke or when the test ends.
func GrantNodes(t testing.TB, c client.Client, host, namespace, name string, capabilities ...mirrorsv1alpha1.Capability) (revoke func()) {
	t.Helper()
	return GrantNodesSpec(t, c, mirrorsv1alpha1.RegistryHostGrantSpec{Host: host,
		Mirror:       mirrorsv1alpha1.MirrorReference{Namespace: namespace, Name: name},
		Capabilities: append([]mirrorsv1alpha1.Capability{mirrorsv1alpha1.CapabilityPull}, capabilities...)})
}

// GrantNodesSpec creates a RegistryHostGrant of the given spec, named after its mirror,
// deleted by revoke or when the test ends.
func GrantNodesSpec(t testing.TB, c client.Client, spec mirrorsv1alpha1.RegistryHostGrantSpec) (revoke func()) {
	t.Helper()
	g := &mirrorsv1alpha1.RegistryHostGrant{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%s", spec.Mirror.Namespace, spec.Mirror.Name, rand.String(4))},
		Spec:       spec,
	}
	require.NoError(t, c.Create(context.Background(), g))
	revoke = func() { _ = c.Delete(context.Background(), g) }
	t.Cleanup(revoke)
	return revoke
}
