package copyratorrule

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The attacks of a tenant with edit in its own namespace on what every tenant shares
// (docs/SECURITY.md, "Exhaustion"), each beside a platform rule that must keep working.

// lookalike is a ConfigMap in ns that carries a copy's labels naming rule (with uid when
// not empty), and an annotation of size bytes: a tenant's fake.
func lookalike(t *testing.T, ns, name string, rule types.NamespacedName, uid string, size int) *corev1.ConfigMap {
	t.Helper()
	l := map[string]string{LabelManagedBy: ManagedByValue, LabelRule: rule.Name, LabelRuleNamespace: rule.Namespace}
	if uid != "" {
		l[LabelRuleUID] = uid
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l,
		Annotations: map[string]string{"padding": fmt.Sprintf("%0*d", size, 0)}}, Data: map[string]string{"k": "v"}}
	require.NoError(t, env.Client.Create(context.Background(), cm))
	return cm
}

func configMapExists(t *testing.T, ns, name string) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// TestLookAlikesCountNowhere: a tenant's objects that carry a copy's labels (for a rule
// that does not exist, or a platform rule's name with a forged UID) count toward no limit:
// the platform rule still writes its copies under --copyratorrule-max-copies, the fakes of
// rules gone are swept, those without a UID are left alone, and all are counted as
// look-alikes. On main before rule UIDs, the fakes filled the limit (LimitReached).
func TestLookAlikesCountNowhere(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	tenant := testenv.Namespace(t, env.Client, "tenant", nil)
	targets := targetNamespaces(t, id, 2)
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	ghost := types.NamespacedName{Namespace: tenant, Name: "ghost"}
	// More fakes of no UID than the limit (never swept: no UID to tell whose), and some of a UID.
	const limit, noUID, withUID = 10, 12, 4
	for i := range noUID + withUID {
		uid := ""
		if i >= noUID {
			uid = fmt.Sprintf("uid-ghost-%d", i)
		}
		lookalike(t, tenant, fmt.Sprintf("ghost-%d", i), ghost, uid, 64)
	}
	forged := lookalike(t, tenant, "forged", client.ObjectKeyFromObject(rule), "uid-forged", 64)
	before := testutil.ToFloat64(lookalikesTotal.WithLabelValues(tenant))

	testenv.StartManager(t, env.Config, scope.Namespaces{}, (&Options{MaxCopies: limit}).Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "platform-ca", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"ca.crt": []byte("CA")}}
	require.NoError(t, env.Client.Create(ctx, s))
	createRule(t, rule)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.CopiesInSync, "both copies written: the fakes fill no limit")
		assert.Equal(c, flantv1.ReasonCopiesInSync, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
	})
	for _, ns := range targets {
		assert.NotNil(t, getSecret(t, ns, s.Name))
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		for i := range noUID + withUID {
			assert.Equal(c, i < noUID, configMapExists(t, tenant, fmt.Sprintf("ghost-%d", i)),
				"ghost-%d: swept when it carries a UID of a rule that does not exist, else left alone", i)
		}
		assert.False(c, configMapExists(t, tenant, forged.Name), "a forged UID of the rule's name: not the rule's, swept")
	}, waitFor+sweepDelay, tick)
	assert.Greater(t, testutil.ToFloat64(lookalikesTotal.WithLabelValues(tenant)), before, "counted as look-alikes")
}

// TestSweepsCopiesOfARuleDeletedWithoutItsFinalizer: a tenant may remove a rule's finalizer
// (edit allows it) and delete it; its copies do not stay behind.
func TestSweepsCopiesOfARuleDeletedWithoutItsFinalizer(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	targets := targetNamespaces(t, id, 2)
	testenv.StartManager(t, env.Config, scope.Namespaces{}, (&Options{}).Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "token", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, env.Client.Create(ctx, s))
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.CopiesInSync)
	})
	live := getRule(t, rule)
	patch := client.MergeFrom(live.DeepCopy())
	live.Finalizers = nil
	require.NoError(t, env.Client.Patch(ctx, live, patch))
	require.NoError(t, env.Client.Delete(ctx, live))
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, ns := range targets {
			assert.Nil(c, getSecret(t, ns, s.Name), "the copy in %s is swept", ns)
		}
	}, waitFor, tick)
}

// TestConsentReviewsBudgetedPerNamespace: one namespace's rules asking for consent in many
// namespaces spend their own budget of SubjectAccessReviews (the rest wait for a later
// pass, their copies left as they are) while another namespace's rules are asked at once;
// answers not yet due are not asked again. Against the real authorizer.
func TestConsentReviewsBudgetedPerNamespace(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	var reviews atomic.Int64
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	require.NoError(t, err)
	reviewer := newAccessReviewer(interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				reviews.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
	}), clock.RealClock{}, time.Minute, 10*time.Minute, 4, 3)
	burst := 3 * reviewBurst // six: the other namespace's five and "every namespace" fit

	var candidates []string
	for i := range 3 * burst {
		candidates = append(candidates, fmt.Sprintf("ns-%02d", i))
	}
	attacker := types.NamespacedName{Namespace: "t1-" + suffix(), Name: "sa-0"}
	yes, refused, err := reviewer.consenting(ctx, attacker, "secrets", candidates)
	require.NoError(t, err)
	assert.Empty(t, yes, "nothing granted")
	deferred := 0
	for _, r := range refused {
		if r.Deferred {
			deferred++
		}
	}
	assert.Equal(t, int64(burst), reviews.Load(), "a burst of reviews, no more")
	assert.Equal(t, len(candidates)-(burst-1), deferred, "the rest not asked (one of the burst asked about every namespace)")

	platform := types.NamespacedName{Namespace: "platform-" + suffix(), Name: "copyrator"}
	reviews.Store(0)
	yes, refused, err = reviewer.consenting(ctx, platform, "secrets", candidates[:5])
	require.NoError(t, err)
	assert.Empty(t, yes)
	assert.Len(t, refused, 5)
	for _, r := range refused {
		assert.False(t, r.Deferred, "another namespace's budget is its own: %s asked", r.Namespace)
	}
	assert.Equal(t, int64(6), reviews.Load(), "every namespace and each of five asked")

	reviews.Store(0)
	_, _, err = reviewer.consenting(ctx, platform, "secrets", candidates[:5])
	require.NoError(t, err)
	assert.Zero(t, reviews.Load(), "refusals not yet due are not asked again")
}

// TestNoConsentReviewsWithoutSources: a rule whose selector matches nothing asks nobody's
// consent (200 such rules once cost a review per namespace each, every minute): it lists
// no refusal for namespaces that do not consent.
func TestNoConsentReviewsWithoutSources(t *testing.T) {
	f := newConsentFixture(t)
	for range 3 {
		testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id})
	}
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.Equal(c, flantv1.ReasonNoSourcesMatched, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
		assert.Zero(c, st.RefusedCount, "no namespace asked, none refused")
	})
}

// TestServiceAccountsCappedPerNamespace: a namespace's rules act as at most
// --copyratorrule-max-service-accounts-per-namespace ServiceAccounts; a rule naming one
// more is refused in its status, naming the flag, and the others work.
func TestServiceAccountsCappedPerNamespace(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	testenv.GrantCopies(t, env.Client, src, "second")
	target := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": id})
	testenv.StartManager(t, env.Config, scope.Namespaces{}, (&Options{MaxServiceAccountsPerNamespace: 2}).Setup)
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "s",
		Labels: map[string]string{"copytest": id}}, Data: map[string][]byte{"k": []byte("v")}}))
	var rules []*flantv1.CopyratorRule
	for i, sa := range []string{DefaultServiceAccountName, "second", "third"} {
		r := ruleFor(src, fmt.Sprintf("%s-%d", id, i), flantv1.RuleTypeSecret)
		r.Spec.Selector = map[string]flantv1.LabelValue{"copytest": flantv1.LabelValue(id)}
		r.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"copytest": id}}
		r.Spec.ServiceAccountName = sa
		createRule(t, r)
		rules = append(rules, r)
		time.Sleep(1100 * time.Millisecond) // creation timestamps are in seconds: the order is theirs
	}
	for _, r := range rules[:2] {
		eventuallyStatus(t, r, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
			assert.Equal(c, metav1.ConditionTrue, testenv.Condition(st.Conditions, flantv1.ConditionReady).Status)
		})
	}
	eventuallyStatus(t, rules[2], func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		ready := testenv.Condition(st.Conditions, flantv1.ConditionReady)
		assert.Equal(c, flantv1.ReasonInvalidSpec, ready.Reason)
		assert.Contains(c, ready.Message, "--copyratorrule-max-service-accounts-per-namespace")
	})
	assert.NotNil(t, getSecret(t, target, "s"))
}

// TestSourceAnnotationsNotHeld: of a source Secret applied with kubectl, the manager holds
// no annotation it does not carry (its last-applied-configuration holds the data): not in
// the source informer's objects, not in the body it keeps. Against the real API server.
func TestSourceAnnotationsNotHeld(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "src", nil)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applied", Labels: map[string]string{"pick": "me"},
		Annotations: map[string]string{lastAppliedAnnotation: `{"data":{"password":"c2VjcmV0"}}`, "team": "a", "note": "n"}},
		Data: map[string][]byte{"password": []byte("secret")}}
	require.NoError(t, env.Client.Create(ctx, s))
	md, err := metadata.NewForConfig(env.Config)
	require.NoError(t, err)
	w := newSourceWatcher(env.Client, md)
	t.Cleanup(w.cancel)
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"}, Spec: flantv1.CopyratorRuleSpec{
		RuleType: flantv1.RuleTypeSecret, Selector: map[string]flantv1.LabelValue{"pick": "me"},
		CarryAnnotations: []flantv1.MetadataKey{"team"}}}
	set, err := w.picked(ctx, rule, 1)
	require.NoError(t, err)
	require.Len(t, set.copyable, 1)
	assert.Equal(t, map[string]string{"team": "a"}, set.copyable[0].Carried.Annotations)

	inf := w.informers[sourceKey{namespace: ns, kind: kindSecret}]
	require.NotNil(t, inf)
	for _, item := range inf.informer.GetStore().List() {
		assert.Empty(t, item.(metav1.Object).GetAnnotations(), "the informer keeps no annotation")
	}
	require.Len(t, inf.versions, 1)
	for _, ver := range inf.versions {
		assert.Equal(t, map[string]string{"team": "a"}, ver.body.GetAnnotations(), "the body keeps only what a copy carries")
	}

	t.Log("a rule that carries one more annotation reads the source again")
	rule.Spec.CarryAnnotations = append(rule.Spec.CarryAnnotations, "note")
	set, err = w.picked(ctx, rule, 1)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "a", "note": "n"}, set.copyable[0].Carried.Annotations)
}

// TestAdoptsCopiesWrittenBeforeRuleUIDs: after an upgrade, a rule's first full pass treats
// the copies of its name without a UID as its own, as the version before did (updating
// them with its UID, deleting those it no longer wants), then notes that its copies carry
// its UID; from then on an object of its name without its UID is not its copy.
func TestAdoptsCopiesWrittenBeforeRuleUIDs(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	targets := targetNamespaces(t, id, 2)
	unselected := testenv.Namespace(t, env.Client, "other", nil)
	testenv.StartManager(t, env.Config, scope.Namespaces{}, (&Options{}).Setup)
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "settings",
		Labels: map[string]string{"copytest": id}}, Data: map[string]string{"k": "v"}}))
	rule := ruleFor(src, id, flantv1.RuleTypeConfigMap)
	createRule(t, rule)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.CopiesInSync)
	})
	live := getRule(t, rule)
	require.Equal(t, "true", live.Annotations[AnnotationCopiesCarryUID], "a new rule's copies carry its UID from the start")

	t.Log("as the version before left them: no UID on the copies or the rule, and one copy no longer wanted")
	removeUID := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/labels/copyrator.flant.com~1rule-uid"}]`))
	for _, ns := range targets {
		require.NoError(t, env.Client.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}, removeUID))
	}
	old := lookalike(t, unselected, "settings", client.ObjectKeyFromObject(rule), "", 8)
	require.NoError(t, env.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/annotations/copyrator.flant.com~1copies-carry-uid"}]`))))
	updateRule(t, rule, func(s *flantv1.CopyratorRuleSpec) { s.DeletionPolicy = flantv1.DeletionPolicyDelete })

	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &flantv1.CopyratorRule{}
		if !assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(rule), got)) {
			return
		}
		assert.Equal(c, "true", got.Annotations[AnnotationCopiesCarryUID], "adopted")
		for _, ns := range targets {
			cm := &corev1.ConfigMap{}
			if assert.NoError(c, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "settings"}, cm)) {
				assert.Equal(c, string(got.UID), cm.Labels[LabelRuleUID], "the copy in %s carries the rule's UID", ns)
			}
		}
		assert.False(c, configMapExists(t, unselected, old.Name), "a copy it no longer wants is deleted, as before")
	}, waitFor, tick)

	t.Log("adopted: an object of its name without its UID is left alone")
	fake := lookalike(t, unselected, "settings", client.ObjectKeyFromObject(rule), "", 8)
	updateRule(t, rule, func(s *flantv1.CopyratorRuleSpec) { s.DeletionPolicy = flantv1.DeletionPolicyRetain })
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.CopiesInSync)
	})
	assert.True(t, configMapExists(t, unselected, fake.Name), "not the rule's copy: not deleted")
}
