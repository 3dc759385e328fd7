package copyratorrule

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// fixture is a source namespace, n labelled target namespaces, one unlabelled namespace
// and a running manager.
type fixture struct {
	id        string
	src       string
	targets   []string
	unrelated string
}

func newFixture(t *testing.T, n int) fixture {
	t.Helper()
	env.Require(t)
	f := fixture{id: suffix()}
	f.src = sourceNamespace(t, "src")
	for range n {
		f.targets = append(f.targets, testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id}))
	}
	f.unrelated = testenv.Namespace(t, env.Client, "other", nil)
	testenv.StartManager(t, env.Config, scope.Namespaces{}, new(Options).Setup)
	return f
}

func (f fixture) secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.src, Name: name, Labels: map[string]string{"copytest": f.id}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// requireCopies waits until every namespace in nss holds a copy of src equal to it.
func requireCopies(t *testing.T, src *corev1.Secret, nss ...string) {
	t.Helper()
	ctx := context.Background()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		live := &corev1.Secret{}
		if !assert.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(src), live)) {
			return
		}
		for _, ns := range nss {
			got := &corev1.Secret{}
			if !assert.NoError(c, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.Name}, got), ns) {
				continue
			}
			assert.Equal(c, live.Data, got.Data, ns)
			assert.Equal(c, live.Type, got.Type, ns)
			assert.Equal(c, ptrTrue(live.Immutable), ptrTrue(got.Immutable), ns)
		}
	}, waitFor, tick)
}

// requireNoCopy waits until namespace ns holds no Secret named name.
func requireNoCopy(t *testing.T, ns, name string) {
	t.Helper()
	assert.Eventually(t, func() bool { return getSecret(t, ns, name) == nil }, waitFor, tick, "%s/%s still exists", ns, name)
}

func TestCopiesIntoTargetsAndNewNamespaces(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	src := f.secret("app-config", map[string]string{"url": "https://example.test", "token": "s3cret"})
	require.NoError(t, env.Client.Create(ctx, src))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)

	requireCopies(t, src, f.targets...)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.SourcesMatched)
		assert.EqualValues(c, 2, st.TargetNamespaces)
		assert.EqualValues(c, 2, st.CopiesInSync)
		assert.Equal(c, metav1.ConditionTrue, testenv.Condition(st.Conditions, flantv1.ConditionReady).Status)
		assert.Equal(c, flantv1.ReasonCopiesInSync, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
		assert.Equal(c, metav1.ConditionFalse, testenv.Condition(st.Conditions, flantv1.ConditionDegraded).Status)
	})
	copy1 := getSecret(t, f.targets[0], src.Name)
	assert.Equal(t, map[string]string{LabelManagedBy: "copyrator", LabelRule: rule.Name, LabelRuleNamespace: f.src,
		LabelRuleUID: string(getRule(t, rule).UID)}, copy1.Labels,
		"a copy carries Copyrator's labels and its rule's UID, not the source's (so it never matches a selector)")
	assert.Equal(t, f.src+"/app-config", copy1.Annotations[AnnotationSource])
	assert.Equal(t, contentHash(src), copy1.Annotations[AnnotationContentHash])
	assert.Nil(t, getSecret(t, f.unrelated, src.Name), "a namespace the selector does not pick gets nothing")
	assert.True(t, controllerutil.ContainsFinalizer(getRule(t, rule), Finalizer))

	// A new namespace gets its copy without any change to the rule or the source.
	fresh := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id})
	requireCopies(t, src, fresh)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 3, st.TargetNamespaces)
		assert.EqualValues(c, 3, st.CopiesInSync)
	})
	// So does an existing namespace that gets the label.
	require.NoError(t, env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.unrelated}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"copytest":"`+f.id+`"}}}`))))
	requireCopies(t, src, f.unrelated)

	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, eventsOf(c, rule), "Normal CopiesCreated")
	}, waitFor, tick)
}

// settledSecretRule creates a Secret and a rule copying it into three namespaces, and
// waits until the status counts the three copies.
func settledSecretRule(t *testing.T) (fixture, *corev1.Secret, *flantv1.CopyratorRule) {
	t.Helper()
	f := newFixture(t, 3)
	src := f.secret("token", map[string]string{"t": "1"})
	require.NoError(t, env.Client.Create(context.Background(), src))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	requireCopies(t, src, f.targets...)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 3, st.CopiesInSync)
	})
	return f, src, rule
}

// A namespace that appears is written first and alone: the other copies are not written
// again, and the status and Events count the new copy.
func TestNewNamespaceLeavesOtherCopiesAlone(t *testing.T) {
	f, src, rule := settledSecretRule(t)
	ctx := context.Background()
	versions := func() map[string]string {
		out := map[string]string{}
		for _, ns := range f.targets {
			out[ns] = getSecret(t, ns, src.Name).ResourceVersion
		}
		return out
	}
	before := versions()

	fresh := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id})
	requireCopies(t, src, fresh)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 4, st.TargetNamespaces)
		assert.EqualValues(c, 4, st.CopiesInSync)
		assert.Equal(c, flantv1.ReasonCopiesInSync, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
	})
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		var notes []string
		for _, e := range testenv.Events(c, env.Client, rule.Namespace, "CopyratorRule", rule.Name) {
			if e.Reason == EventCopiesCreated {
				notes = append(notes, e.Note)
			}
		}
		assert.Contains(c, notes, "Created 1 copy: Secret "+fresh+"/"+src.Name)
	}, waitFor, tick)

	// Taken out of the selection, it loses its copy; the others are still untouched.
	require.NoError(t, env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fresh}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"copytest":null}}}`))))
	requireNoCopy(t, fresh, src.Name)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 3, st.TargetNamespaces)
		assert.EqualValues(c, 3, st.CopiesInSync)
	})
	assert.Equal(t, before, versions(), "the copies in the other namespaces were not written again")
}

// A pass woken only by new namespaces writes only their copies; changes that arrive with
// them (a source edit, a copy deleted by hand) still reach every namespace.
func TestNewNamespaceTogetherWithOtherChanges(t *testing.T) {
	f, src, rule := settledSecretRule(t)
	ctx := context.Background()

	fresh := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id})
	require.NoError(t, env.Client.Delete(ctx, getSecret(t, f.targets[0], src.Name)))
	src.Data = map[string][]byte{"t": []byte("2")}
	require.NoError(t, env.Client.Update(ctx, src))
	more := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id})

	requireCopies(t, src, append([]string{fresh, more}, f.targets...)...)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 5, st.TargetNamespaces)
		assert.EqualValues(c, 5, st.CopiesInSync)
	})
}

func TestSourceUpdateReachesEveryCopy(t *testing.T) {
	f := newFixture(t, 3)
	ctx := context.Background()
	src := f.secret("db", map[string]string{"user": "app", "password": "one", "legacy": "x"})
	require.NoError(t, env.Client.Create(ctx, src))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	requireCopies(t, src, f.targets...)

	// Change a value, add a key, remove a key: the copies follow exactly.
	src.Data = map[string][]byte{"user": []byte("app"), "password": []byte("two"), "host": []byte("db.internal")}
	require.NoError(t, env.Client.Update(ctx, src))
	requireCopies(t, src, f.targets...)
	for _, ns := range f.targets {
		assert.NotContains(t, getSecret(t, ns, src.Name).Data, "legacy", ns)
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, eventsOf(c, rule), "Normal CopiesUpdated")
	}, waitFor, tick)
}

func TestForeignObjectIsAConflictAndLeftAlone(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.targets[0], Name: "shared",
		Labels: map[string]string{"owner": "someone"}}, StringData: map[string]string{"mine": "keep"}}
	require.NoError(t, env.Client.Create(ctx, foreign))
	before := getSecret(t, f.targets[0], "shared")

	src := f.secret("shared", map[string]string{"k": "v"})
	require.NoError(t, env.Client.Create(ctx, src))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)

	requireCopies(t, src, f.targets[1])
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.ConflictCount)
		if assert.Len(c, st.Conflicts, 1) {
			assert.Equal(c, f.targets[0], st.Conflicts[0].Namespace)
			assert.Equal(c, "shared", st.Conflicts[0].Name)
			assert.Contains(c, st.Conflicts[0].Reason, flantv1.ConflictReasonExistsNotManaged)
		}
		assert.EqualValues(c, 1, st.CopiesInSync)
		assert.Equal(c, flantv1.ReasonConflicts, testenv.Condition(st.Conditions, flantv1.ConditionDegraded).Reason)
		assert.Equal(c, metav1.ConditionTrue, testenv.Condition(st.Conditions, flantv1.ConditionDegraded).Status)
	})
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, eventsOf(c, rule), "Warning CopyConflict")
	}, waitFor, tick)

	after := getSecret(t, f.targets[0], "shared")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the foreign object was not written")
	assert.Equal(t, map[string][]byte{"mine": []byte("keep")}, after.Data)
	assert.Equal(t, map[string]string{"owner": "someone"}, after.Labels)

	// A second rule (another namespace, same object name, same targets) conflicts with the
	// first rule's copies and leaves them alone.
	src2NS := sourceNamespace(t, "src2")
	src2 := src.DeepCopy()
	src2.ObjectMeta = metav1.ObjectMeta{Namespace: src2NS, Name: "shared", Labels: src.Labels}
	src2.Data = map[string][]byte{"k": []byte("from the second rule")}
	require.NoError(t, env.Client.Create(ctx, src2))
	rule2 := ruleFor(src2NS, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule2)
	eventuallyStatus(t, rule2, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.ConflictCount)
		reasons := ""
		for _, x := range st.Conflicts {
			reasons += x.Reason + ";"
		}
		assert.Contains(c, reasons, flantv1.ConflictReasonManagedByOtherRule)
		assert.Contains(c, reasons, flantv1.ConflictReasonExistsNotManaged)
	})
	requireCopies(t, src, f.targets[1])
	assert.Equal(t, rule.Name, getSecret(t, f.targets[1], "shared").Labels[LabelRule])
	assert.Equal(t, f.src, getSecret(t, f.targets[1], "shared").Labels[LabelRuleNamespace])
}

func TestCleanupSurvivesAManagerRestart(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	dst := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": id})
	stop := testenv.StartManager(t, env.Config, scope.Namespaces{}, new(Options).Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "survivor", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, env.Client.Create(ctx, s))
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	require.NoError(t, env.Client.Create(ctx, rule))
	requireCopies(t, s, dst)
	assert.Eventually(t, func() bool { return controllerutil.ContainsFinalizer(getRule(t, rule), Finalizer) }, waitFor, tick)

	// The rule is deleted while no manager runs: the finalizer keeps it until one does.
	stop()
	require.NoError(t, env.Client.Delete(ctx, rule))
	assert.NotNil(t, getSecret(t, dst, "survivor"))
	assert.False(t, getRule(t, rule).DeletionTimestamp.IsZero())

	testenv.StartManager(t, env.Config, scope.Namespaces{}, new(Options).Setup)
	requireNoCopy(t, dst, "survivor")
	assert.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(rule), &flantv1.CopyratorRule{}))
	}, waitFor, tick)
}

func TestForeignObjectIsRecheckedAndReplacedWhenGone(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	dst := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": id})
	opts := Options{ConflictRecheck: time.Second}
	testenv.StartManager(t, env.Config, scope.Namespaces{}, opts.Setup)
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "taken"}, Data: map[string][]byte{"x": []byte("y")}}
	require.NoError(t, env.Client.Create(ctx, foreign))
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "taken", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, env.Client.Create(ctx, s))
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.ConflictCount)
	})

	// Copyrator does not watch objects it did not create: the recheck finds the name free.
	require.NoError(t, env.Client.Delete(ctx, foreign))
	requireCopies(t, s, dst)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 0, st.ConflictCount)
		assert.Equal(c, metav1.ConditionFalse, testenv.Condition(st.Conditions, flantv1.ConditionDegraded).Status)
	})
	// The pass's metrics are set after its status write (report follows Finish): wait for them.
	key := client.ObjectKeyFromObject(rule)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, testutil.ToFloat64(copiesTotal.WithLabelValues(key.Namespace, key.Name, actionCreated)), 1.0)
		assert.Equal(c, 0.0, testutil.ToFloat64(conflictsGauge.WithLabelValues(key.Namespace, key.Name)))
	}, waitFor, tick)
}

func TestEditedOrDeletedCopiesArePutBack(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	src := f.secret("creds", map[string]string{"k": "v"})
	require.NoError(t, env.Client.Create(ctx, src))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	requireCopies(t, src, f.targets...)

	// A person edits a value and adds a key: both are reverted; their extra label stays.
	edited := getSecret(t, f.targets[0], src.Name)
	edited.Data["k"] = []byte("tampered")
	edited.Data["extra"] = []byte("added")
	edited.Labels["note"] = "mine"
	require.NoError(t, env.Client.Update(ctx, edited))
	requireCopies(t, src, f.targets[0])
	assert.Equal(t, "mine", getSecret(t, f.targets[0], src.Name).Labels["note"])

	// A person deletes a copy: it comes back.
	require.NoError(t, env.Client.Delete(ctx, getSecret(t, f.targets[1], src.Name)))
	requireCopies(t, src, f.targets[1])

	// A person removes the management annotations: they come back.
	stripped := getSecret(t, f.targets[1], src.Name)
	stripped.Annotations = nil
	require.NoError(t, env.Client.Update(ctx, stripped))
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getSecret(t, f.targets[1], src.Name)
		if assert.NotNil(c, got) {
			assert.Equal(c, f.src+"/"+src.Name, got.Annotations[AnnotationSource])
		}
	}, waitFor, tick)
}

func TestSourcesThatStopMatchingLoseTheirCopies(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	a := f.secret("a", map[string]string{"k": "a"})
	b := f.secret("b", map[string]string{"k": "b"})
	require.NoError(t, env.Client.Create(ctx, a))
	require.NoError(t, env.Client.Create(ctx, b))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	requireCopies(t, a, f.targets...)
	requireCopies(t, b, f.targets...)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.SourcesMatched)
		assert.EqualValues(c, 4, st.CopiesInSync)
	})

	// a loses the label; b is deleted.
	a.Labels = map[string]string{"copytest": "no"}
	require.NoError(t, env.Client.Update(ctx, a))
	require.NoError(t, env.Client.Delete(ctx, b))
	for _, ns := range f.targets {
		requireNoCopy(t, ns, "a")
		requireNoCopy(t, ns, "b")
	}
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 0, st.SourcesMatched)
		assert.EqualValues(c, 0, st.CopiesInSync)
		assert.Equal(c, flantv1.ReasonNoSourcesMatched, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
	})
	assert.NotNil(t, getSecret(t, f.src, "a"), "the source itself is never touched")
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, eventsOf(c, rule), "Normal CopiesDeleted")
	}, waitFor, tick)
}

func TestRuleDeletion(t *testing.T) {
	for _, policy := range []flantv1.DeletionPolicy{flantv1.DeletionPolicyDelete, flantv1.DeletionPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t, 2)
			ctx := context.Background()
			src := f.secret("cert", map[string]string{"tls.crt": "x"})
			require.NoError(t, env.Client.Create(ctx, src))
			rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
			rule.Spec.DeletionPolicy = policy
			require.NoError(t, env.Client.Create(ctx, rule))
			requireCopies(t, src, f.targets...)

			require.NoError(t, env.Client.Delete(ctx, rule))
			assert.Eventually(t, func() bool {
				return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(rule), &flantv1.CopyratorRule{}))
			}, waitFor, tick, "rule not deleted")
			for _, ns := range f.targets {
				got := getSecret(t, ns, src.Name)
				if policy == flantv1.DeletionPolicyDelete {
					assert.Nil(t, got, ns)
					continue
				}
				if assert.NotNil(t, got, ns) {
					assert.Equal(t, src.Data, got.Data)
					assert.NotContains(t, got.Labels, LabelManagedBy)
					assert.NotContains(t, got.Labels, LabelRule)
					assert.NotContains(t, got.Annotations, AnnotationContentHash)
					assert.Equal(t, f.src+"/"+src.Name, got.Annotations[AnnotationSource], "a released copy still says where it came from")
				}
			}
			assert.NotNil(t, getSecret(t, f.src, src.Name), "the source stays")
		})
	}
}

func TestSecretTypesAndImmutabilityArePreserved(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	docker := f.secret("registry", map[string]string{".dockerconfigjson": `{"auths":{"r.example":{"auth":"eDp5"}}}`})
	docker.Type = corev1.SecretTypeDockerConfigJson
	frozen := f.secret("frozen", map[string]string{"v": "1"})
	frozen.Immutable = ptr.To(true)
	tlsSecret := f.secret("tls", map[string]string{"tls.crt": "c", "tls.key": "k"})
	tlsSecret.Type = corev1.SecretTypeTLS
	for _, s := range []*corev1.Secret{docker, frozen, tlsSecret} {
		require.NoError(t, env.Client.Create(ctx, s))
	}
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	for _, s := range []*corev1.Secret{docker, frozen, tlsSecret} {
		requireCopies(t, s, f.targets...)
	}
	assert.Equal(t, corev1.SecretTypeDockerConfigJson, getSecret(t, f.targets[0], "registry").Type)
	assert.Equal(t, ptr.To(true), getSecret(t, f.targets[0], "frozen").Immutable)
	oldUID := getSecret(t, f.targets[0], "frozen").UID

	// An immutable source is replaced (delete, create with new data; a Secret's type and an
	// immutable Secret's data never change in place): its copies follow.
	require.NoError(t, env.Client.Delete(ctx, frozen))
	frozen = f.secret("frozen", map[string]string{"v": "2"})
	frozen.Immutable = ptr.To(true)
	require.NoError(t, env.Client.Create(ctx, frozen))
	require.NoError(t, env.Client.Delete(ctx, tlsSecret))
	tlsSecret = f.secret("tls", map[string]string{"tls.crt": "c", "tls.key": "k"})
	require.NoError(t, env.Client.Create(ctx, tlsSecret))
	requireCopies(t, frozen, f.targets...)
	requireCopies(t, tlsSecret, f.targets...)
	assert.NotEqual(t, oldUID, getSecret(t, f.targets[0], "frozen").UID)
	assert.Equal(t, corev1.SecretTypeOpaque, getSecret(t, f.targets[0], "tls").Type)

	// A person makes a copy of a mutable source immutable: it can no longer be patched, so
	// it is deleted and created again as the source is.
	edited := getSecret(t, f.targets[1], "tls")
	edited.Immutable = ptr.To(true)
	require.NoError(t, env.Client.Update(ctx, edited))
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getSecret(t, f.targets[1], "tls")
		if assert.NotNil(c, got) {
			assert.NotEqual(c, edited.UID, got.UID)
			assert.Nil(c, got.Immutable)
		}
		assert.Contains(c, eventsOf(c, rule), "Normal CopiesRecreated")
	}, waitFor, tick)
	requireCopies(t, tlsSecret, f.targets...)
}

func TestConfigMapsAndOptOut(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	optedOut := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": f.id, LabelIgnore: "true"})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.src, Name: "settings", Labels: map[string]string{"copytest": f.id}},
		Data: map[string]string{"mode": "fast"}, BinaryData: map[string][]byte{"blob": {0, 1, 2, 255}}}
	require.NoError(t, env.Client.Create(ctx, cm))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeConfigMapKind)
	createRule(t, rule)

	getCM := func(ns string) *corev1.ConfigMap {
		got := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, got); err != nil {
			return nil
		}
		return got
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, ns := range f.targets {
			got := getCM(ns)
			if assert.NotNil(c, got, ns) {
				assert.Equal(c, cm.Data, got.Data)
				assert.Equal(c, cm.BinaryData, got.BinaryData)
			}
		}
	}, waitFor, tick)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.TargetNamespaces)
		assert.EqualValues(c, 2, st.CopiesInSync)
	})
	assert.Nil(t, getCM(optedOut), "an opted-out namespace gets nothing")

	// A namespace that opts out later loses its copy.
	require.NoError(t, env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.targets[1]}},
		client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"`+LabelIgnore+`":"true"}}}`))))
	assert.Eventually(t, func() bool { return getCM(f.targets[1]) == nil }, waitFor, tick)
	assert.NotNil(t, getCM(f.targets[0]))
}

func TestNamespacesListAndInvalidSelector(t *testing.T) {
	f := newFixture(t, 0)
	ctx := context.Background()
	a := testenv.Namespace(t, env.Client, "listed", nil)
	b := testenv.Namespace(t, env.Client, "listed", nil)
	src := f.secret("token", map[string]string{"t": "1"})
	require.NoError(t, env.Client.Create(ctx, src))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	rule.Spec.NamespaceSelector = nil
	rule.Spec.Namespaces = []string{a, "does-not-exist-" + f.id}
	createRule(t, rule)
	requireCopies(t, src, a)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.TargetNamespaces)
	})
	assert.Nil(t, getSecret(t, b, "token"))

	// A listed namespace that is created later gets its copy.
	late := "does-not-exist-" + f.id
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: late}}))
	requireCopies(t, src, late)

	// Moving the rule to b deletes a's copy and writes b's.
	updateRule(t, rule, func(spec *flantv1.CopyratorRuleSpec) { spec.Namespaces = []string{b} })
	requireCopies(t, src, b)
	requireNoCopy(t, a, "token")

	// A selector the API server accepts but no Go selector parses is a spec error.
	updateRule(t, rule, func(spec *flantv1.CopyratorRuleSpec) {
		spec.Namespaces = nil
		spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
	})
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		ready := testenv.Condition(st.Conditions, flantv1.ConditionReady)
		assert.Equal(c, metav1.ConditionFalse, ready.Status)
		assert.Equal(c, flantv1.ReasonInvalidSpec, ready.Reason)
		assert.Contains(c, ready.Message, "spec.namespaceSelector")
	})
	assert.NotNil(t, getSecret(t, b, "token"), "an invalid spec deletes nothing")
}

func TestRuleNameFitsALabel(t *testing.T) {
	env.Require(t)
	rule := ruleFor("default", suffix(), flantv1.RuleTypeSecret)
	rule.Name = strings.Repeat("a", 64)
	err := env.Client.Create(context.Background(), rule)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.name must be at most 63 characters")
	rule.Name = strings.Repeat("a", 63)
	require.NoError(t, env.Client.Create(context.Background(), rule))
	require.NoError(t, env.Client.Delete(context.Background(), rule))
}

func TestWatchNamespaceScoping(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	watched := testenv.Namespace(t, env.Client, "watched", map[string]string{"copytest": id})
	outside := testenv.Namespace(t, env.Client, "outside", map[string]string{"copytest": id})
	outsideSrc := sourceNamespace(t, "src-outside")
	testenv.StartManager(t, env.Config, scope.Namespaces{Watched: []string{src, watched}}, new(Options).Setup)

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "scoped", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, env.Client.Create(ctx, s))
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	ignored := ruleFor(outsideSrc, id, flantv1.RuleTypeSecret)
	s2 := s.DeepCopy()
	s2.ObjectMeta = metav1.ObjectMeta{Namespace: outsideSrc, Name: "unwatched-rule", Labels: s.Labels}
	require.NoError(t, env.Client.Create(ctx, s2))
	require.NoError(t, env.Client.Create(ctx, ignored))

	requireCopies(t, s, watched)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.TargetNamespaces)
	})
	assert.Nil(t, getSecret(t, outside, "scoped"), "a namespace outside WATCH_NAMESPACE gets nothing")
	got := getRule(t, ignored)
	assert.Empty(t, got.Finalizers, "a rule outside WATCH_NAMESPACE is not handled")
	assert.Empty(t, got.Status.Conditions)
	assert.Nil(t, getSecret(t, watched, "unwatched-rule"))
	require.NoError(t, env.Client.Delete(ctx, ignored))
}

// queryRecorder records the query of every ConfigMap and Secret request a manager makes.
type queryRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (q *queryRecorder) wrap(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && (strings.HasSuffix(r.URL.Path, "/secrets") || strings.HasSuffix(r.URL.Path, "/configmaps")) {
				q.mu.Lock()
				q.seen = append(q.seen, r.URL.Path+"?"+r.URL.RawQuery+" accept="+r.Header.Get("Accept"))
				q.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNeverListsAllSecrets proves the lean watches: every list or watch of ConfigMaps or
// Secrets the manager sends carries a label selector, and is either the copies'
// (managed-by=copyrator, bodies dropped in the cache) or, metadata only, the rule's namespace.
func TestNeverListsAllSecrets(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	rec := &queryRecorder{}
	id := suffix()
	src := sourceNamespace(t, "src")
	dst := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": id})
	testenv.StartManager(t, rec.wrap(env.Config), scope.Namespaces{}, new(Options).Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "lean", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, env.Client.Create(ctx, s))
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	requireCopies(t, s, dst)
	// The rule's deletion lists its copies live (metadata only).
	require.NoError(t, env.Client.Delete(ctx, rule))
	requireNoCopy(t, dst, "lean")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.seen)
	for _, q := range rec.seen {
		assert.Contains(t, q, "labelSelector=", "unselected list or watch: %s", q)
		switch {
		case strings.Contains(q, "app.kubernetes.io%2Fmanaged-by%3Dcopyrator"), strings.Contains(q, "app.kubernetes.io%2Fmanaged-by%3D%3Dcopyrator"):
		case strings.Contains(q, "/namespaces/"+src+"/secrets?") && strings.Contains(q, "app.kubernetes.io%2Fmanaged-by%21%3Dcopyrator") &&
			strings.Contains(q, "accept=application/vnd.kubernetes.protobuf;as=PartialObjectMetadata"):
			// The rule's namespace, metadata only: the sources are picked from it by the
			// rule's selector; bodies are read by name.
		default:
			t.Errorf("unexpected ConfigMap or Secret request: %s", q)
		}
	}
}

// TestRulesOfOneNamespaceShareOneWatch: rules that copy from one namespace share one
// metadata-only informer, whatever their selectors, so the API server serves one list and
// one watch (or one streaming watch list) for all of them, not one per rule; every rule
// still writes its own copies.
func TestRulesOfOneNamespaceShareOneWatch(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	rec := &queryRecorder{}
	id := suffix()
	src := sourceNamespace(t, "src")
	var targets []string
	for range 3 {
		targets = append(targets, testenv.Namespace(t, env.Client, "dst", nil))
	}
	testenv.StartManager(t, rec.wrap(env.Config), scope.Namespaces{}, new(Options).Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "shared",
		Labels: map[string]string{"copytest": id, "a": "1", "b": "1", "c": "1"}},
		Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, env.Client.Create(ctx, s))
	for i, ns := range targets {
		rule := ruleFor(src, id, flantv1.RuleTypeSecret)
		rule.Name = fmt.Sprintf("rule-%d-%s", i, id)
		rule.Spec.Selector[string(rune('a'+i))] = "1" // a selector of its own
		rule.Spec.NamespaceSelector, rule.Spec.Namespaces = nil, []string{ns}
		createRule(t, rule)
	}
	requireCopies(t, s, targets...)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	requests := 0 // a list and a watch, or one streaming watch list
	for _, q := range rec.seen {
		if strings.Contains(q, "/namespaces/"+src+"/secrets?") {
			requests++
		}
	}
	assert.Positive(t, requests)
	assert.LessOrEqual(t, requests, 2, "one informer's list and watch of the namespace for three rules: %v", rec.seen)
}

func TestNamedSourcesKeyFilterAndCarriedMetadata(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	// A Secret another tool made: nobody labelled it for Copyrator.
	tlsSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.src, Name: "ingress-tls",
		Labels: map[string]string{"team": "web", "not-carried": "x"}, Annotations: map[string]string{"owner": "ops", "note": "n"}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY"), "ca.crt": []byte("CA")}}
	require.NoError(t, env.Client.Create(ctx, tlsSecret))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	rule.Spec.Selector = nil
	rule.Spec.SourceNames = []string{"ingress-tls", "later"}
	rule.Spec.Keys = []flantv1.CopiedKey{{Key: "tls.crt"}, {Key: "ca.crt", TargetKey: "ca.pem"}}
	rule.Spec.CarryLabels = []flantv1.MetadataKey{"team"}
	rule.Spec.CarryAnnotations = []flantv1.MetadataKey{"owner"}
	createRule(t, rule)

	requireFiltered := func(team string) {
		t.Helper()
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, ns := range f.targets {
				got := getSecret(t, ns, "ingress-tls")
				if !assert.NotNil(c, got, ns) {
					continue
				}
				assert.Equal(c, corev1.SecretTypeOpaque, got.Type, "the public half of a TLS Secret is an Opaque Secret")
				assert.Equal(c, map[string][]byte{"tls.crt": []byte("CERT"), "ca.pem": []byte("CA")}, got.Data, "no private key")
				assert.Equal(c, team, got.Labels["team"])
				assert.NotContains(c, got.Labels, "not-carried")
				assert.Equal(c, "ops", got.Annotations["owner"])
				assert.NotContains(c, got.Annotations, "note")
			}
		}, waitFor, tick)
	}
	requireFiltered("web")
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.SourcesMatched)
		assert.EqualValues(c, 2, st.CopiesInSync)
		ready := testenv.Condition(st.Conditions, flantv1.ConditionReady)
		assert.Equal(c, metav1.ConditionFalse, ready.Status)
		assert.Equal(c, flantv1.ReasonSourcesMissing, ready.Reason)
		assert.Contains(c, ready.Message, "later")
	})

	// A change to a key the rule does not copy writes nothing.
	before := getSecret(t, f.targets[0], "ingress-tls").ResourceVersion
	live := &corev1.Secret{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(tlsSecret), live))
	live.Data["tls.key"] = []byte("ROTATED")
	require.NoError(t, env.Client.Update(ctx, live))
	// The named source that was missing appears: it is copied, and the rule is Ready.
	later := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.src, Name: "later"}, Data: map[string][]byte{"ca.crt": []byte("CA2"), "x": []byte("y")}}
	require.NoError(t, env.Client.Create(ctx, later))
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.SourcesMatched)
		assert.EqualValues(c, 4, st.CopiesInSync)
		assert.Equal(c, flantv1.ReasonCopiesInSync, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
	})
	assert.Equal(t, map[string][]byte{"ca.pem": []byte("CA2")}, getSecret(t, f.targets[1], "later").Data)
	assert.Equal(t, before, getSecret(t, f.targets[0], "ingress-tls").ResourceVersion, "the rotated key is not copied: no write")

	// A carried label changes on the source: the copies follow.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(tlsSecret), live))
	live.Labels["team"] = "api"
	require.NoError(t, env.Client.Update(ctx, live))
	requireFiltered("api")

	// The rule drops its key filter and carried labels: the copies become whole TLS Secrets
	// again (re-created: a Secret's type never changes in place), without the carried keys.
	updateRule(t, rule, func(s *flantv1.CopyratorRuleSpec) { s.Keys, s.CarryLabels, s.CarryAnnotations = nil, nil, nil })
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		got := getSecret(t, f.targets[0], "ingress-tls")
		if assert.NotNil(c, got) {
			assert.Equal(c, corev1.SecretTypeTLS, got.Type)
			assert.Equal(c, []byte("ROTATED"), got.Data["tls.key"])
			assert.NotContains(c, got.Labels, "team")
			assert.NotContains(c, got.Annotations, "owner")
			assert.NotContains(c, got.Annotations, AnnotationCarriedLabels)
		}
	}, waitFor, tick)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 4, st.CopiesInSync)
		assert.Equal(c, flantv1.ReasonCopiesInSync, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
	})
}

// TestRestartWritesNothing: a manager that starts with rules whose copies are all in sync
// (a restart, a new leader) writes no copy.
func TestRestartWritesNothing(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	for range 3 {
		testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": id})
	}
	stop := testenv.StartManager(t, env.Config, scope.Namespaces{}, new(Options).Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "steady", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "steady", Labels: map[string]string{"copytest": id}},
		Data: map[string]string{"k": "v"}}
	require.NoError(t, env.Client.Create(ctx, s))
	require.NoError(t, env.Client.Create(ctx, cm))
	secrets := ruleFor(src, id, flantv1.RuleTypeSecret)
	configMaps := ruleFor(src, id, flantv1.RuleTypeConfigMap)
	configMaps.Name = "cm-" + id
	createRule(t, secrets)
	createRule(t, configMaps)
	for _, r := range []*flantv1.CopyratorRule{secrets, configMaps} {
		eventuallyStatus(t, r, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
			assert.EqualValues(c, 3, st.CopiesInSync)
			assert.Equal(c, flantv1.ReasonCopiesInSync, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
		})
	}
	stop()

	calls := &benchutil.CallCounter{}
	cfg := rest.CopyConfig(env.Config)
	calls.Wrap(cfg)
	before := reconciles(t)
	testenv.StartManager(t, cfg, scope.Namespaces{}, new(Options).Setup)
	// Each rule's first pass by the new manager is what would write.
	assert.Eventually(t, func() bool { return reconciles(t) >= before+2 }, waitFor, tick)
	var writes []string
	for k, n := range calls.Snapshot() {
		verb := strings.SplitN(k, " ", 2)[0]
		if (verb == "PATCH" || verb == "POST" || verb == "PUT" || verb == "DELETE") &&
			(strings.Contains(k, "/secrets") || strings.Contains(k, "/configmaps")) {
			writes = append(writes, fmt.Sprintf("%s ×%d", k, n))
		}
	}
	assert.Empty(t, writes, "copies written by a manager that found them in sync")
	// Delete the rules while this manager runs (the first one is stopped).
	for _, r := range []*flantv1.CopyratorRule{secrets, configMaps} {
		require.NoError(t, env.Client.Delete(ctx, r))
		assert.Eventually(t, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(r), &flantv1.CopyratorRule{}))
		}, waitFor, tick)
	}
}

// reconciles is the number of passes copyratorrule controllers in this process have made
// (controller-runtime's controller_runtime_reconcile_total).
func reconciles(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "copyratorrule" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestCopiesOfTheLegacyFieldOwnerAreOurs: copies written by a version whose field manager
// was legacyFieldOwner are still this rule's copies (they are told by their labels), kept
// in sync and written under FieldOwner from then on; Events name FieldOwner as reporter.
func TestCopiesOfTheLegacyFieldOwnerAreOurs(t *testing.T) {
	// legacyFieldOwner is the field manager copies were written under before FieldOwner;
	// nothing in the controller compares it.
	const legacyFieldOwner = "copyrator"
	env.Require(t)
	ctx := context.Background()
	id := suffix()
	src := sourceNamespace(t, "src")
	dst := testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": id})
	stop := testenv.StartManager(t, env.Config, scope.Namespaces{}, new(Options).Setup)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "older", Labels: map[string]string{"copytest": id}},
		Data: map[string][]byte{"k": []byte("v1")}}
	require.NoError(t, env.Client.Create(ctx, s))
	rule := ruleFor(src, id, flantv1.RuleTypeSecret)
	require.NoError(t, env.Client.Create(ctx, rule)) // not createRule: its cleanup would run after the manager stops
	requireCopies(t, s, dst)
	copyManagers := func(t testing.TB) []string {
		t.Helper()
		var out []string
		for _, e := range getSecret(t, dst, s.Name).ManagedFields {
			out = append(out, e.Manager)
		}
		return out
	}
	require.Equal(t, []string{FieldOwner}, copyManagers(t))
	stop()

	// The copy as the previous version left it, and a source change it has not seen.
	cp := getSecret(t, dst, s.Name)
	entries := cp.ManagedFields
	for i := range entries {
		entries[i].Manager = legacyFieldOwner
	}
	cp.SetManagedFields(entries)
	require.NoError(t, env.Client.Update(ctx, cp))
	require.Equal(t, []string{legacyFieldOwner}, copyManagers(t))
	s.Data = map[string][]byte{"k": []byte("v2")}
	require.NoError(t, env.Client.Update(ctx, s))

	testenv.StartManager(t, env.Config, scope.Namespaces{}, new(Options).Setup)
	requireCopies(t, s, dst)
	assert.Contains(t, copyManagers(t), FieldOwner, "the update is ours")
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 1, st.CopiesInSync)
		assert.Equal(c, metav1.ConditionFalse, testenv.Condition(st.Conditions, flantv1.ConditionDegraded).Status, "no conflict")
	})
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		events := testenv.Events(c, env.Client, rule.Namespace, "CopyratorRule", rule.Name)
		assert.NotEmpty(c, events)
		for _, e := range events {
			assert.Equal(c, FieldOwner, e.ReportingController, e.Reason)
		}
	}, waitFor, tick)

	require.NoError(t, env.Client.Delete(ctx, rule))
	requireNoCopy(t, dst, s.Name)
}

// TestObservedGenerationOnFailedWrites pins the observedGeneration rule (docs/STYLE.md,
// "Status writes and observedGeneration"): a pass whose writes failed returns an error (it
// is retried) and leaves observedGeneration at the last spec acted on fully, while Ready
// and Degraded, carrying the new generation, report the failure; the retried pass that
// succeeds observes the spec, and so does a pass that finds a spec mistake. A ResourceQuota
// of no Secrets refuses the copy until it is deleted.
func TestObservedGenerationOnFailedWrites(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	src := f.secret("token", map[string]string{"t": "1"})
	require.NoError(t, env.Client.Create(ctx, src))
	rule := ruleFor(f.src, f.id, flantv1.RuleTypeSecret)
	createRule(t, rule)
	requireCopies(t, src, f.targets[0])

	refusing := testenv.Namespace(t, env.Client, "quota", nil)
	none := corev1.ResourceList{corev1.ResourceSecrets: resource.MustParse("0")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: refusing, Name: "no-secrets"}, Spec: corev1.ResourceQuotaSpec{Hard: none}}
	require.NoError(t, env.Client.Create(ctx, quota))
	// No kube-controller-manager computes the usage on envtest: write it as it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: none, Used: none}
	require.NoError(t, env.Client.Status().Update(ctx, quota))
	// The API server's quota admission sees a new quota after a moment: wait until it refuses.
	require.Eventually(t, func() bool {
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: refusing, Name: "probe"}}
		err := env.Client.Create(ctx, probe)
		if err == nil {
			_ = env.Client.Delete(ctx, probe)
		}
		return apierrors.IsForbidden(err)
	}, waitFor, tick, "the quota refuses Secrets")
	updateRule(t, rule, func(spec *flantv1.CopyratorRuleSpec) {
		spec.NamespaceSelector = nil
		spec.Namespaces = []string{f.targets[0], refusing}
	})
	live := getRule(t, rule)
	require.EqualValues(t, 2, live.Generation)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		st := getRule(t, rule).Status
		ready := testenv.Condition(st.Conditions, flantv1.ConditionReady)
		assert.Equal(c, flantv1.ReasonWriteFailed, ready.Reason)
		assert.EqualValues(c, 2, ready.ObservedGeneration, "the failure is reported for the new spec")
		assert.Equal(c, metav1.ConditionTrue, testenv.Condition(st.Conditions, flantv1.ConditionDegraded).Status)
		assert.EqualValues(c, 1, st.ObservedGeneration, "a failed pass does not claim the spec")
	}, waitFor, tick)
	assert.Nil(t, getSecret(t, refusing, "token"))

	// The retried pass writes the copy once the quota is gone, and observes generation 2
	// (eventuallyStatus requires observedGeneration == generation).
	require.NoError(t, env.Client.Delete(ctx, quota))
	requireCopies(t, src, refusing)
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 2, st.ObservedGeneration)
		assert.Equal(c, flantv1.ReasonCopiesInSync, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
	})

	// A spec mistake is no error of the pass: observed, and reported.
	updateRule(t, rule, func(spec *flantv1.CopyratorRuleSpec) {
		spec.Namespaces = nil
		spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
	})
	eventuallyStatus(t, rule, func(c *assert.CollectT, st flantv1.CopyratorRuleStatus) {
		assert.EqualValues(c, 3, st.ObservedGeneration)
		assert.Equal(c, flantv1.ReasonInvalidSpec, testenv.Condition(st.Conditions, flantv1.ConditionReady).Reason)
	})
}
