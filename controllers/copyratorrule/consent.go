package copyratorrule

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// A rule writes copies only where someone who may write there agreed (docs/SECURITY.md,
// "Who may copy where"):
//   - the rule acts as a ServiceAccount of its own namespace (spec.serviceAccountName), and a
//     namespace receives copies only when that ServiceAccount may create the copied kind
//     there, as RBAC decides (a SubjectAccessReview): the target's owner consents with a
//     RoleBinding, a cluster admin for every namespace with a ClusterRoleBinding. A user who
//     may create the rule may run pods as any ServiceAccount of its namespace, so the rule
//     can do nothing its author could not do directly;
//   - protected namespaces (kube-system, kube-public, kube-node-lease, the operator's own and
//     --copyratorrule-protected-namespaces) also need the label LabelAcceptCopies=true, which
//     only a cluster admin can set: a grant for "every namespace" does not reach them.

// DefaultServiceAccountName is spec.serviceAccountName's default (the CRD sets it too).
const DefaultServiceAccountName = "copyrator"

// TargetClusterRole is the ClusterRole the installs ship for consenting to copies: create
// ConfigMaps and Secrets (config/rbac/copyrator_target_role.yaml).
const TargetClusterRole = "quartet-copyrator-target"

// serviceAccountOf returns the ServiceAccount rule acts as.
func serviceAccountOf(rule *flantv1.CopyratorRule) serviceAccountRef {
	name := rule.Spec.ServiceAccountName
	if name == "" {
		name = DefaultServiceAccountName
	}
	return serviceAccountRef{Namespace: rule.Namespace, Name: name}
}

// serviceAccountRef names a ServiceAccount.
type serviceAccountRef struct{ Namespace, Name string }

func (s serviceAccountRef) String() string { return s.Namespace + "/" + s.Name }

// resourceOf is the API resource of a copied kind.
func resourceOf(kind string) string {
	if kind == kindSecret {
		return "secrets"
	}
	return "configmaps"
}

// refusal is a namespace the rule selects that receives no copies, and why.
type refusal struct {
	Namespace string
	Reason    string
	// Protected: refused because the namespace is protected (its copies are removed);
	// otherwise RBAC refused (existing copies are left as they are, no longer updated).
	Protected bool
}

// protectedRefusal says why protected namespace ns gets no copies.
func protectedRefusal(ns string) refusal {
	return refusal{Namespace: ns, Protected: true,
		Reason: fmt.Sprintf("namespace %s is protected: it receives copies only when a cluster admin labels it %s=true", ns, LabelAcceptCopies)}
}

// rbacRefusal says why namespace ns gets no copies when sa may not create resource there.
func rbacRefusal(ns string, sa serviceAccountRef, resource string) refusal {
	return refusal{Namespace: ns,
		Reason: fmt.Sprintf("ServiceAccount %s may not create %s in namespace %s", sa, resource, ns)}
}

// accessKey is one question asked of the authorizer; Namespace "" asks about every namespace.
type accessKey struct {
	SA        serviceAccountRef
	Resource  string
	Namespace string
}

// accessReviewer asks the API server's authorizer whether a ServiceAccount may create an
// object of a kind in a namespace, and remembers the answers for a while: granted answers
// for refresh (revoking consent takes effect within it), refused ones for recheck (a new
// RoleBinding takes effect within it). Rules of one ServiceAccount share the answers.
type accessReviewer struct {
	client      client.Client
	answers     *cache.LRUExpireCache
	recheck     time.Duration
	refresh     time.Duration
	parallelism int
}

// maxAccessAnswers bounds the remembered answers (about 200 bytes each).
const maxAccessAnswers = 100_000

func newAccessReviewer(c client.Client, clk cache.Clock, recheck, refresh time.Duration, parallelism int) *accessReviewer {
	return &accessReviewer{client: c, answers: cache.NewLRUExpireCacheWithClock(maxAccessAnswers, clk),
		recheck: recheck, refresh: refresh, parallelism: max(parallelism, 1)}
}

// mayCreate reports whether sa may create resource objects in namespace ns ("" for every
// namespace), from a remembered answer or a SubjectAccessReview.
func (a *accessReviewer) mayCreate(ctx context.Context, sa serviceAccountRef, resource, ns string) (bool, error) {
	key := accessKey{SA: sa, Resource: resource, Namespace: ns}
	if v, ok := a.answers.Get(key); ok {
		return v.(bool), nil
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   serviceaccount.MakeUsername(sa.Namespace, sa.Name),
		Groups: append(serviceaccount.MakeGroupNames(sa.Namespace), user.AllAuthenticated),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: resource, Version: "v1",
		},
	}}
	if err := a.client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking whether ServiceAccount %s may create %s in namespace %q: %w", sa, resource, ns, err)
	}
	ttl := a.recheck
	if review.Status.Allowed {
		ttl = a.refresh
	}
	a.answers.Add(key, review.Status.Allowed, ttl)
	return review.Status.Allowed, nil
}

// consenting splits candidates (namespaces the rule selects that are not protected, or
// protected and opted in) into those where sa may create resource objects and the refusals.
// One question about every namespace answers for all of them when a cluster admin granted
// it; otherwise each namespace is asked, in parallel.
func (a *accessReviewer) consenting(ctx context.Context, sa serviceAccountRef, resource string, candidates []string) ([]string, []refusal, error) {
	if len(candidates) == 0 {
		return nil, nil, nil
	}
	everywhere, err := a.mayCreate(ctx, sa, resource, metav1.NamespaceAll)
	if err != nil {
		return nil, nil, err
	}
	if everywhere {
		return candidates, nil, nil
	}
	allowed := make([]bool, len(candidates))
	var g errgroup.Group
	g.SetLimit(a.parallelism)
	for i, ns := range candidates {
		g.Go(func() error {
			ok, err := a.mayCreate(ctx, sa, resource, ns)
			allowed[i] = ok
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	var yes []string
	var no []refusal
	for i, ns := range candidates {
		if allowed[i] {
			yes = append(yes, ns)
		} else {
			no = append(no, rbacRefusal(ns, sa, resource))
		}
	}
	return yes, no, nil
}

// protectedNamespaces is the set of protected namespaces: the cluster's own
// (operator.SystemNamespaces), the operator's and the flag's.
func protectedNamespaces(operatorNamespace string, extra []string) sets.Set[string] {
	return operator.Shared{OperatorNamespace: operatorNamespace}.Protected(extra...)
}

// accepts reports whether namespace ns (its metadata) may receive copies although it is
// protected: a cluster admin labelled it.
func accepts(ns metav1.Object) bool { return ns.GetLabels()[LabelAcceptCopies] == "true" }

// forbiddenSecretTypes are never copied: they grant access to the cluster itself (a
// service account's token; a bootstrap token, which on kubeadm clusters is a node login).
var forbiddenSecretTypes = []corev1.SecretType{corev1.SecretTypeServiceAccountToken, corev1.SecretTypeBootstrapToken}

// forbiddenType reports whether Secrets of type t are never copied.
func forbiddenType(t corev1.SecretType) bool { return slices.Contains(forbiddenSecretTypes, t) }
