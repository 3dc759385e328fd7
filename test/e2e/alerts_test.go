package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/test/realnode"
	"github.com/quartet-operator/quartet/test/testenv"
)

// activeAlerts returns Prometheus's pending and firing alerts as "Name{label=value,...}: state".
func activeAlerts(hc *http.Client) (map[string]string, error) {
	var out struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := promGet(hc, "/api/v1/alerts", &out); err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, a := range out.Data.Alerts {
		got[alertKey(a.Labels)] = a.State
	}
	return got, nil
}

func alertKey(labels map[string]string) string {
	var kv []string
	for k, v := range labels {
		if k != "alertname" && k != "severity" {
			kv = append(kv, k+"="+v)
		}
	}
	sort.Strings(kv)
	return labels["alertname"] + "{" + strings.Join(kv, ",") + "}"
}

// setFakeRatesDate makes the HTTPS imitation upstream publish its table dated date (""
// for today) and waits until only pods with that flag serve.
func setFakeRatesDate(t *testing.T, date string) {
	t.Helper()
	ctx := context.Background()
	// The Deployment controller writes its status meanwhile: retry on a conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: upstreamNS, Name: "fakerates-tls"}, dep); err != nil {
			return err
		}
		var args []string
		for _, a := range dep.Spec.Template.Spec.Containers[0].Command {
			if !strings.HasPrefix(a, "-date=") {
				args = append(args, a)
			}
		}
		if date != "" {
			args = append(args, "-date="+date)
		}
		dep.Spec.Template.Spec.Containers[0].Command = args
		return env.Client.Update(ctx, dep)
	}))
	require.NoError(t, env.WaitDeploymentAvailable(ctx, upstreamNS, "fakerates-tls", 2*time.Minute))
}

// TestAlertsFireOnTheManagersMetrics loads config/prometheus's alerting rules into a real
// Prometheus that scrapes the in-cluster manager, makes each alert's condition true with
// real objects, and requires each alert to become active for exactly those objects.
// It runs first in this package (file order): the manager has fetched no rate yet, so the
// imitation upstream's old publication is the first table it sees (it never steps back to
// an older one).
func TestAlertsFireOnTheManagersMetrics(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	xrs := &operatorsv1.ExchangeRateList{}
	require.NoError(t, env.Client.List(ctx, xrs))
	require.Empty(t, xrs.Items, "this test needs a manager that has fetched no rate yet")

	_, ready, detail := managerReady(ctx)
	require.True(t, ready, detail)
	require.NotNil(t, prom, "the package's Prometheus (setUp starts it)")
	hc := prom.client
	before, err := activeAlerts(hc)
	require.NoError(t, err)
	require.Empty(t, before, "no alert is active before the conditions are made true")

	since := time.Now()
	// Stale: the upstream's newest publication is 10 days old (the limit is 5 days).
	setFakeRatesDate(t, time.Now().UTC().AddDate(0, 0, -10).Format("2006-01-02"))
	t.Cleanup(func() { setFakeRatesDate(t, "") })
	const ratesNS, quotaNS = "alerts-rates", "alerts-quota"
	for _, ns := range []string{ratesNS, quotaNS} {
		require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	// Reconcile errors: a ResourceQuota refuses every ConfigMap in quotaNS, so the
	// ExchangeRate there cannot write its ConfigMap and its reconciles fail.
	require.NoError(t, env.Client.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-configmaps", Namespace: quotaNS},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceConfigMaps: resource.MustParse("0")}}}))
	// Copy conflicts: a target namespace already holds a ConfigMap of the source's name
	// that the rule did not make. A second rule without conflicts must not alert. The
	// target's owner consents to both rules' copies (a RoleBinding): a refused namespace
	// would hold no conflict.
	const copyNS, targetNS, label = "alerts-copy", "alerts-copy-target", "e2e.quartet.dev/alerts-copy"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: copyNS}}))
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: targetNS, Labels: map[string]string{label: "yes"}}}))
	grantCopies(t, "copyrator-alerts", copyNS, targetNS)
	// Someone else's ConfigMap is there before the rule.
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: targetNS},
		Data: map[string]string{"k": "someone else's"}}))
	for _, name := range []string{"settings", "other"} {
		require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: copyNS,
			Labels: map[string]string{"alerts-copy": name}}, Data: map[string]string{"k": "v"}}))
		rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: copyNS},
			Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeConfigMap, Selector: map[string]flantv1.LabelValue{"alerts-copy": flantv1.LabelValue(name)},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}}}
		require.NoError(t, env.Client.Create(ctx, rule))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), rule) })
	}

	// Mirror not ready: its upstream is never reached (nothing leaves the node's network).
	const mirrorNS = "alerts-mirror"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mirrorNS}}))
	mirror := &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: "offline", Namespace: mirrorNS},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: "https://registry-1.docker.io", Storage: resource.MustParse("1Gi")}}
	require.NoError(t, env.Client.Create(ctx, mirror))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mirror) })
	// In-use images not cached: the admin grants that mirror node access, and a pod of the
	// mirror's host names an image by digest. The mirror pins it; its registry cannot fetch
	// it (the upstream is never reached) and reports it missing.
	testenv.GrantNodes(t, env.Client, "docker.io", mirrorNS, "offline")
	absent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "absent-image", Namespace: mirrorNS},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{Name: "main",
			Image: "docker.io/library/quartet-alerts-absent@sha256:" + strings.Repeat("ab", 32)}}}}
	require.NoError(t, env.Client.Create(ctx, absent))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), absent) })

	// Chaos actions failing: an admission policy allows at most one replica per Deployment
	// in the agent's namespace, so every doubling is refused.
	const chaosNS = "alerts-chaos"
	chaosNamespace(t, chaosNS)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-alerts-one-replica"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.replicas <= 1", Message: "at most one replica in this namespace"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{chaosLabel: chaosNS}}}}}
	for _, o := range []client.Object{policy, binding} {
		require.NoError(t, env.Client.Create(ctx, o))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	require.NoError(t, env.Client.Create(ctx, sleeper(chaosNS, "web", 1, nil, nil, "")))
	waitDeploymentReady(t, chaosNS, "web", 1)
	// The policy is in force once a doubling by hand is refused.
	require.NoError(t, realnode.WaitFor(ctx, "the admission policy refusing a second replica", time.Minute, func(ctx context.Context) (bool, string, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: chaosNS, Name: "web"}, d); err != nil {
			return false, "", err
		}
		d.Spec.Replicas = ptr.To[int32](2)
		err := env.Client.Update(ctx, d, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "at most one replica"), fmt.Sprint(err), nil
	}))
	newAgent(t, "alerts-chaos", chaosNS, blackadderv1beta1.ChaosAgentSpec{
		CancerMode: true, Eagerness: 100, PauseDuration: 5, MaxActionsPerRound: 1,
	})

	// The ExchangeRates last, seconds after the upstream's rollout above. Created right
	// after it, the manager's first fetch never reached the new pod (its log shows no
	// connection from the manager), most likely sent to the replaced pod's address before
	// kube-proxy dropped it, and hung until the 30 s fetch timeout; the retry came after
	// the 30 s backoff: a minute of this test (2026-12-07, the fetch metrics of the run).
	var rateName string
	for _, ns := range []string{ratesNS, quotaNS} {
		xr := &operatorsv1.ExchangeRate{}
		require.NoError(t, env.Sample("operators_v1_exchangerate.yaml", xr, ns))
		require.NoError(t, env.Client.Create(ctx, xr))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), xr) })
		rateName = xr.Name
	}

	want := map[string]bool{
		"QuartetExchangeRateStale{exchangerate=" + rateName + ",exchangerate_namespace=" + ratesNS + "}": true,
		"QuartetReconcileErrors{controller=exchangerate,namespace=" + installNS + "}":                    true,
		"QuartetCopyratorConflicts{rule=settings,rule_namespace=" + copyNS + "}":                         true,
		"QuartetRegistryMirrorNotReady{mirror=offline,mirror_namespace=" + mirrorNS + "}":                true,
		"QuartetRegistryMirrorImagesNotCached{mirror=offline,mirror_namespace=" + mirrorNS + "}":         true,
		"QuartetChaosAgentActionsFailing{action=ScaleDeployment,agent=alerts-chaos}":                     true,
	}
	seen := map[string]time.Duration{}
	var got map[string]string
	require.NoError(t, realnode.WaitFor(ctx, "each alert active for its object", 5*time.Minute, func(ctx context.Context) (bool, string, error) {
		var err error
		if got, err = activeAlerts(hc); err != nil {
			return false, err.Error(), nil
		}
		for k := range got {
			if _, ok := seen[k]; !ok && want[k] {
				seen[k] = time.Since(since)
			}
		}
		return len(seen) == len(want), fmt.Sprint(got), nil
	}))
	for k, d := range seen {
		t.Logf("%-100s active %4.1fs after the setup of the conditions began (%s)", k, d.Seconds(), got[k])
		record("alert active, from the start of setting up the conditions: "+strings.SplitN(k, "{", 2)[0], d)
	}
	// Nothing else: the conflict-free rule, the ExchangeRate whose ConfigMap is refused
	// (it holds no rate, so it is not stale) and the healthy controllers stay quiet. A
	// controller other than exchangerate may have had a transient error while the
	// objects were created; that alert is pending at most, and only reported.
	for k, state := range got {
		if want[k] {
			continue
		}
		if strings.HasPrefix(k, "QuartetReconcileErrors{") && state == "pending" {
			t.Logf("also pending: %s", k)
			continue
		}
		t.Errorf("unexpected alert %s (%s)", k, state)
	}
}
