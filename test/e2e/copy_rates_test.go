package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/realnode"
)

// waitSecretCopies waits until each namespace holds a copy of the Secret src made by the
// rule, with src's type and data.
func waitSecretCopies(t *testing.T, rule *flantv1.CopyratorRule, src *corev1.Secret, namespaces []string) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), fmt.Sprintf("Secret copies of %s in %v", src.Name, namespaces), 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		var missing []string
		for _, ns := range namespaces {
			c := &corev1.Secret{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.Name}, c); err != nil {
				missing = append(missing, ns+": "+err.Error())
				continue
			}
			if c.Labels[copyratorrule.LabelRule] != rule.Name || c.Type != src.Type || fmt.Sprint(c.Data) != fmt.Sprint(src.Data) {
				missing = append(missing, ns+": not (yet) the source's copy")
			}
		}
		return len(missing) == 0, strings.Join(missing, "; "), nil
	}))
}

// TestCopyratorCopiesSecretsToNewNamespaces: once a cluster admin let the rule's
// ServiceAccount copy everywhere (one ClusterRoleBinding), the in-cluster manager copies a
// Secret into namespaces created after its rule; the copies are Secrets of the source's
// type (never ConfigMaps), follow a change of the source, and no password appears in the
// rule's status, its Events or any ConfigMap.
func TestCopyratorCopiesSecretsToNewNamespaces(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const src, label = "copy-src", "e2e.quartet.dev/copy"
	pw1, pw2 := "copy-Passw0rd-one", "copy-Passw0rd-two"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: src}}))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-login", Namespace: src, Labels: map[string]string{"copyrator": "yes"}},
		Type:       corev1.SecretTypeBasicAuth,
		Data:       map[string][]byte{"username": []byte("app"), "password": []byte(pw1)},
	}
	require.NoError(t, env.Client.Create(ctx, secret))
	grantCopies(t, "copyrator-e2e-secrets", src)
	rule := &flantv1.CopyratorRule{
		ObjectMeta: metav1.ObjectMeta{Name: "db-login", Namespace: src},
		Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeSecret, Selector: map[string]flantv1.LabelValue{"copyrator": "yes"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}},
	}
	require.NoError(t, env.Client.Create(ctx, rule))

	var targets []string
	for i := range 3 {
		ns := fmt.Sprintf("copy-target-%d", i)
		targets = append(targets, ns)
		since := time.Now()
		require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{label: "yes"}}}))
		waitSecretCopies(t, rule, secret, []string{ns})
		timing(fmt.Sprintf("new namespace %d to its Secret copy (in-cluster manager)", i), since)
	}
	for _, ns := range targets {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret.Name}, &corev1.ConfigMap{})
		require.True(t, apierrors.IsNotFound(err), "a Secret is never copied as a ConfigMap (%s): %v", ns, err)
	}

	since := time.Now()
	secret.Data["password"] = []byte(pw2)
	require.NoError(t, env.Client.Update(ctx, secret))
	waitSecretCopies(t, rule, secret, targets)
	timing("source Secret change to 3 copies updated", since)

	// The status follows the copies: the pass writes it after them, and passes woken only by
	// new namespaces leave it to a full pass 1 s later (docs/copyratorrule.md).
	require.NoError(t, realnode.WaitFor(ctx, "the rule's status counts 3 copies in sync", time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rule), rule); err != nil {
			return false, "", err
		}
		authorized := meta.IsStatusConditionTrue(rule.Status.Conditions, flantv1.ConditionAuthorized)
		return rule.Status.CopiesInSync == 3 && rule.Status.TargetNamespaces == 3 && rule.Status.RefusedCount == 0 && authorized,
			fmt.Sprintf("status: %+v", rule.Status), nil
	}))
	var haystack []string
	for _, o := range []any{rule, listOf(t, &corev1.ConfigMapList{}), listOf(t, &corev1.EventList{})} {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		haystack = append(haystack, string(b))
	}
	for _, h := range haystack {
		require.NotContains(t, h, pw1)
		require.NotContains(t, h, pw2)
	}
}

func listOf(t *testing.T, l client.ObjectList) client.ObjectList {
	t.Helper()
	require.NoError(t, env.Client.List(context.Background(), l))
	return l
}

// TestExchangeRateOverHTTPSFromTheCluster: the in-cluster manager fetches the sample
// ExchangeRate over HTTPS from the imitation ECB upstream, whose certificate only the test
// CA given to the manager (SSL_CERT_DIR next to the image's own bundle) vouches for, and
// keeps it fresh: a new publication upstream reaches the status within the refresh
// interval (the manager's, rateRefresh).
func TestExchangeRateOverHTTPSFromTheCluster(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	require.True(t, strings.HasPrefix(ratesURL, "https://"), ratesURL)
	const ns = "rates"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	er := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Sample("operators_v1_exchangerate.yaml", er, ns))
	since := time.Now()
	require.NoError(t, env.Client.Create(ctx, er))
	rate, err := env.WaitExchangeRate(ctx, ns, er.Name, 2*time.Minute)
	require.NoError(t, err)
	timing("ExchangeRate over HTTPS (test CA): create to ConfigMap with rate", since)
	require.Equal(t, "1.1625", rate, "the imitation upstream's USD rate")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(er), er))
	require.Equal(t, "ecb", er.Status.Source)

	// A new publication upstream (the next day, a new USD rate): the next refresh brings it.
	// (The manager never steps back to an older publication than the one it has.)
	newDate := time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
	// The Deployment controller writes its status meanwhile: retry on a conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: upstreamNS, Name: "fakerates-tls"}, dep); err != nil {
			return err
		}
		dep.Spec.Template.Spec.Containers[0].Command = append(dep.Spec.Template.Spec.Containers[0].Command, "-date="+newDate, "-rates=USD=1.2345")
		return env.Client.Update(ctx, dep)
	}))
	since = time.Now()
	require.NoError(t, realnode.WaitFor(ctx, "the new publication in the status and the ConfigMap", 4*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(er), er); err != nil {
			return false, "", err
		}
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(er), cm); err != nil {
			return false, "", err
		}
		return er.Status.PublicationDate == newDate && cm.Data["rate"] == "1.2345", fmt.Sprintf("%s %s %v", er.Status.PublicationDate, cm.Data, er.Status.Conditions), nil
	}))
	timing("new upstream publication to the ExchangeRate's ConfigMap (refresh "+rateRefresh.String()+")", since)
}
