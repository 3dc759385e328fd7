package copyratorrule

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/internal/operator"
	"github.com/quartet-operator/quartet/internal/testenv"
)

// env is an envtest API server: copying needs no pods, garbage collection or namespace
// deletion (envtest namespaces stay Terminating forever, which the tests use on purpose).
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunSuite(m, testenv.Envtest, &env))
}

const (
	waitFor = 15 * time.Second
	tick    = 50 * time.Millisecond
)

// startManager starts a manager configured like main.go that runs only this controller,
// and stops it when the test ends, or earlier through the returned function.
func startManager(t testing.TB, cfg *rest.Config, shared operator.Shared, opts Options) (stop func()) {
	t.Helper()
	return testenv.StartManager(t, cfg, shared, opts.Setup)
}

// suffix returns a short random DNS-label suffix.
func suffix() string { return strings.ToLower(rand.String(5)) }

// newNamespace creates a namespace with the given labels. Envtest never finishes deleting
// namespaces, so they are left behind; every test uses names and labels of its own.
func newNamespace(t testing.TB, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + suffix(), Labels: labels}}
	require.NoError(t, env.Client.Create(context.Background(), ns))
	return ns.Name
}

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

func condition(st flantv1.CopyratorRuleStatus, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
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

// eventsFor returns the events.k8s.io Events regarding the rule.
func eventsFor(t testing.TB, rule *flantv1.CopyratorRule) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, env.Client.List(context.Background(), &list, client.InNamespace(rule.Namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "CopyratorRule" && e.Regarding.Name == rule.Name {
			out = append(out, e)
		}
	}
	return out
}

func hasEvent(events []eventsv1.Event, typ, reason string) bool {
	for _, e := range events {
		if e.Type == typ && e.Reason == reason {
			return true
		}
	}
	return false
}

func describeEvents(events []eventsv1.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "%s %s: %s\n", e.Type, e.Reason, e.Note)
	}
	return b.String()
}
