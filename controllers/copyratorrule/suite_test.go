package copyratorrule

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/test/testenv"
)

// env is an envtest API server: copying needs no pods, garbage collection or namespace
// deletion (a namespace deleted at a test's end stays Terminating, which no test minds).
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunSuite(m, testenv.Envtest, &env))
}

const (
	waitFor = 15 * time.Second
	tick    = 50 * time.Millisecond
)

// sourceNamespace creates a namespace for rules and their sources, whose rules (acting as
// the default ServiceAccount) may copy into every namespace: the cluster admin's one step.
func sourceNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := testenv.Namespace(t, env.Client, prefix, nil)
	testenv.GrantCopies(t, env.Client, ns, DefaultServiceAccountName)
	return ns
}

// targetNamespaces creates n namespaces labelled copytest=<id>, the targets of ruleFor(…, id, …).
func targetNamespaces(t testing.TB, id string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = testenv.Namespace(t, env.Client, "dst", map[string]string{"copytest": id})
	}
	return out
}

// suffix returns a short random DNS-label suffix.
func suffix() string { return strings.ToLower(rand.String(5)) }

// createRule creates a rule and, when the test ends, deletes it and waits until it is gone.
func createRule(t testing.TB, rule *flantv1.CopyratorRule) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, rule))
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, rule)
		assert.Eventually(t, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(rule), &flantv1.CopyratorRule{}))
		}, waitFor, tick, "rule %s not released", rule.Name)
	})
}

// ruleFor returns a rule copying objects labelled copytest=<id> into namespaces labelled copytest=<id>.
func ruleFor(ns, id string, ruleType flantv1.RuleType) *flantv1.CopyratorRule {
	return &flantv1.CopyratorRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rule-" + id},
		Spec: flantv1.CopyratorRuleSpec{
			RuleType:          ruleType,
			Selector:          map[string]flantv1.LabelValue{"copytest": flantv1.LabelValue(id)},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"copytest": id}},
		},
	}
}

func getRule(t testing.TB, rule *flantv1.CopyratorRule) *flantv1.CopyratorRule {
	t.Helper()
	got := &flantv1.CopyratorRule{}
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(rule), got))
	return got
}

// updateRule changes the rule's spec, retrying when the controller wrote the rule meanwhile.
func updateRule(t testing.TB, rule *flantv1.CopyratorRule, mutate func(*flantv1.CopyratorRuleSpec)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live := getRule(t, rule)
		mutate(&live.Spec)
		return env.Client.Update(context.Background(), live)
	}))
}

// eventuallyStatus waits until the rule's status, at its current generation, satisfies check.
func eventuallyStatus(t testing.TB, rule *flantv1.CopyratorRule, check func(c *assert.CollectT, st flantv1.CopyratorRuleStatus)) {
	t.Helper()
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &flantv1.CopyratorRule{}
		if !assert.NoError(c, env.Client.Get(context.Background(), client.ObjectKeyFromObject(rule), got)) {
			return
		}
		assert.Equal(c, got.Generation, got.Status.ObservedGeneration, "observedGeneration")
		check(c, got.Status)
	}, waitFor, tick)
}

// getSecret reads a Secret straight from the API server; nil when missing.
func getSecret(t testing.TB, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return s
}

// eventsOf returns "<type> <reason>" of every Event regarding the rule.
func eventsOf(t require.TestingT, rule *flantv1.CopyratorRule) []string {
	var out []string
	for _, e := range testenv.Events(t, env.Client, rule.Namespace, "CopyratorRule", rule.Name) {
		out = append(out, e.Type+" "+e.Reason)
	}
	return out
}
