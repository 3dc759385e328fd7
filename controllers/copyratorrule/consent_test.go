package copyratorrule

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

// consentFixture is a source namespace whose rules have no consent anywhere yet, a manager
// that asks again quickly, and an extra protected namespace.
type consentFixture struct {
	id, src, protected string
}

func newConsentFixture(t *testing.T) consentFixture {
	t.Helper()
	env.Require(t)
	f := consentFixture{id: suffix()}
	f.src = testenv.Namespace(t, env.Client, "csrc", nil)
	f.protected = testenv.Namespace(t, env.Client, "prot", nil)
	opts := &Options{ConsentRecheck: 300 * time.Millisecond, ConsentRefresh: time.Second, ProtectedNamespaces: f.protected}
	testenv.StartManager(t, env.Config, scope.Namespaces{Operator: "quartet-test-operator"}, opts.Setup)
	return f
}

func (f consentFixture) secret(t *testing.T, name string, typ corev1.SecretType, data map[string]string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.src, Name: name, Labels: map[string]string{"copytest": f.id}},
		Type: typ, StringData: data}
	require.NoError(t, env.Client.Create(context.Background(), s))
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(s), s))
	return s
}

// A copy lands only where the rule's ServiceAccount may create Secrets; refusals are in
// the status and the Events; consent given later takes effect without touching the rule;
// consent withdrawn leaves the copies there as they are; Retain releases only copies in
// namespaces that still consent.
func TestCopiesOnlyWhereConsented(t *testing.T) {
	f := newConsentFixture(t)
	ctx := context.Background()
	granted := testenv.Namespace(t, env.Client, "granted", nil)
	later := testenv.Namespace(t, env.Client, "later", nil)
	revokeGranted := testenv.GrantCopies(t, env.Client, f.src, DefaultServiceAccountName, granted)
	src := f.secret(t, "regcred", corev1.SecretTypeOpaque, map[string]string{"k": "v1"})
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	rule.Spec.NamespaceSelector = nil
	rule.Spec.Namespaces = []string{granted, later, "kube-system", f.protected}
	rule.Spec.DeletionPolicy = flantv1.DeletionPolicyRetain
	createRule(t, rule)

	requireCopies(t, src, granted)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.TargetNamespaces)
		assert.EqualValues(c, 3, st.RefusedCount)
		assert.ElementsMatch(c, []flantv1.RefusedNamespace{
			{Namespace: "kube-system", Reason: protectedRefusal("kube-system").Reason},
			{Namespace: f.protected, Reason: protectedRefusal(f.protected).Reason},
			{Namespace: later, Reason: "ServiceAccount " + f.src + "/copyrator may not create secrets in namespace " + later},
		}, st.Refused)
		auth := testenv.Condition(st.Conditions, flantv1.ConditionAuthorized)
		assert.Equal(c, metav1.ConditionFalse, auth.Status)
		assert.Equal(c, flantv1.ReasonTargetsRefused, auth.Reason)
		assert.Contains(c, auth.Message, TargetClusterRole)
		assert.Equal(c, metav1.ConditionTrue, testenv.Condition(st.Conditions, flantv1.ConditionReady).Status, "the consenting namespace is served")
	})
	for _, ns := range []string{later, "kube-system", f.protected} {
		assert.Nil(t, getSecret(t, ns, src.Name), "nothing written into %s", ns)
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		refused := 0
		for _, e := range testenv.Events(c, env.Client, f.src, "CopyratorRule", rule.Name) {
			if e.Reason == EventCopyRefused {
				refused++
				assert.Equal(c, corev1.EventTypeWarning, e.Type)
			}
		}
		assert.Equal(c, 3, refused, "one Warning per refusing namespace")
	}, waitFor, tick)

	// The owner of "later" consents: the copy follows within the recheck, the rule untouched.
	testenv.GrantCopies(t, env.Client, f.src, DefaultServiceAccountName, later)
	requireCopies(t, src, later)
	// A cluster admin opts the protected namespace in: RBAC still decides, and grants it here.
	require.NoError(t, env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.protected}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"`+LabelAcceptCopies+`":"true"}}}`))))
	testenv.GrantCopies(t, env.Client, f.src, DefaultServiceAccountName, f.protected)
	requireCopies(t, src, f.protected)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 3, st.TargetNamespaces)
		assert.Equal(c, []flantv1.RefusedNamespace{{Namespace: "kube-system", Reason: protectedRefusal("kube-system").Reason}}, st.Refused)
	})

	// Consent withdrawn in "granted": its copy stays as it was while the others follow the source.
	revokeGranted()
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.RefusedCount)
		assert.Contains(c, testenv.Condition(st.Conditions, flantv1.ConditionAuthorized).Message, "1 copy already in refusing namespaces is left as it is")
	})
	src.StringData = map[string]string{"k": "v2"}
	require.NoError(t, env.Client.Update(ctx, src))
	requireCopies(t, src, later, f.protected)
	frozen := getSecret(t, granted, src.Name)
	require.NotNil(t, frozen, "a copy in a namespace that withdrew consent is not deleted")
	assert.Equal(t, "v1", string(frozen.Data["k"]), "nor updated")

	// Deleted with Retain: released where consent holds, deleted where it does not.
	require.NoError(t, env.Client.Delete(ctx, rule))
	assert.Eventually(t, func() bool { return getSecret(t, granted, src.Name) == nil }, waitFor, tick,
		"Retain does not leave a copy in a namespace that does not consent")
	// Removals are paced (one at a time): the rule is gone once all of them are done.
	assert.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(rule), &flantv1.CopyratorRule{}))
	}, waitFor, tick, "rule not deleted")
	for _, ns := range []string{later, f.protected} {
		released := getSecret(t, ns, src.Name)
		require.NotNil(t, released, ns)
		assert.Empty(t, released.Labels[LabelRule], "released")
		assert.Equal(t, f.src+"/"+src.Name, released.Annotations[AnnotationSource], "a released copy still says where it came from")
	}
}

// Secrets that grant access to the cluster are never copied, and the rule says so.
func TestNeverCopiesClusterAccessSecrets(t *testing.T) {
	f := newConsentFixture(t)
	target := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id})
	testenv.GrantCopies(t, env.Client, f.src, DefaultServiceAccountName)
	token := f.secret(t, "bootstrap-token-abcdef", corev1.SecretTypeBootstrapToken, map[string]string{
		"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true"})
	plain := f.secret(t, "plain", corev1.SecretTypeOpaque, map[string]string{"k": "v"})
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)

	requireCopies(t, plain, target)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.SourcesMatched)
		ready := testenv.Condition(st.Conditions, flantv1.ConditionReady)
		assert.Contains(c, ready.Message, token.Name)
		assert.Contains(c, ready.Message, string(corev1.SecretTypeBootstrapToken))
	})
	assert.Nil(t, getSecret(t, target, token.Name))
}
