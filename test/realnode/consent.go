package realnode

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
)

// The consent steps an admin takes on a real install (docs/SECURITY.md): unlike
// testenv.GrantCopies, nothing here creates the ClusterRole the bindings name; the install
// under test must have shipped it.

// ConsentToCopies lets the CopyratorRules that act as ServiceAccount saNamespace/saName
// copy into the namespaces given, each with a RoleBinding to the ClusterRole
// quartet-copyrator-target (a namespace owner's consent), or into every namespace with
// one ClusterRoleBinding named name when none is given (the cluster admin's step for
// "copy everywhere"; protected namespaces still need the accept-copies label). It fails
// when the install shipped no such ClusterRole, and returns the bindings it created.
func (e *Env) ConsentToCopies(ctx context.Context, name, saNamespace, saName string, namespaces ...string) ([]client.Object, error) {
	if err := e.Client.Get(ctx, client.ObjectKey{Name: copyratorrule.TargetClusterRole}, &rbacv1.ClusterRole{}); err != nil {
		return nil, fmt.Errorf("the install should ship the ClusterRole %s that consents to copies: %w", copyratorrule.TargetClusterRole, err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: saName}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: copyratorrule.TargetClusterRole}
	var objs []client.Object
	if len(namespaces) == 0 {
		objs = append(objs, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects})
	}
	for _, ns := range namespaces {
		objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RoleRef: ref, Subjects: subjects})
	}
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
	}
	return objs, nil
}

// AcceptCopies labels a protected namespace (kube-system, the operator's own, …)
// copyrator.flant.com/accept-copies=true, as only a cluster admin can: RBAC consent alone
// does not reach it.
func (e *Env) AcceptCopies(ctx context.Context, namespace string) error {
	ns := &corev1.Namespace{}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return err
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[copyratorrule.LabelAcceptCopies] = "true"
	return e.Client.Patch(ctx, ns, patch)
}

// GrantNodes creates a cluster admin's RegistryHostGrant: spec names the host and the
// mirror. It fails when the install has no RegistryHostGrant CRD.
func (e *Env) GrantNodes(ctx context.Context, name string, spec mirrorsv1alpha1.RegistryHostGrantSpec) (*mirrorsv1alpha1.RegistryHostGrant, error) {
	g := &mirrorsv1alpha1.RegistryHostGrant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := e.Client.Create(ctx, g); err != nil {
		return nil, fmt.Errorf("creating RegistryHostGrant %s: %w", name, err)
	}
	return g, nil
}

// DeleteAll deletes objects, ignoring those already gone.
func (e *Env) DeleteAll(ctx context.Context, objs ...client.Object) error {
	var errs []error
	for _, o := range objs {
		if err := e.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
