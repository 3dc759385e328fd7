package process

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/controllers/exchangerate/fakeupstream"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// quartetGroups are the API groups of Quartet's own custom resources.
var quartetGroups = map[string]bool{"blackadder.io": true, "flant.com": true, "mirrors.quartet.dev": true, "operators.brennerm.github.io": true}

// strippedKinds are the kinds a ChaosAgent's rounds list whole, across the namespaces they
// act in, and whose cache drops all but what a round decides on (operator.StripDeployment,
// operator.StripHPA): the manager keeps no bodies of them. They are read only once an agent
// asks for cancer mode.
var strippedKinds = map[string]bool{"deployments": true, "horizontalpodautoscalers": true}

// podsInUseSelector is the field selector of RegistryMirror's pod cache (newPodCache).
const podsInUseSelector = "status.phase!=Succeeded,status.phase!=Failed"

// collectionRead says whether a GET of path is a list or watch of a collection, and of
// which group and resource.
func collectionRead(path string) (group, res string, collection bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, rest = parts[1], parts[3:]
	default:
		return "", "", false
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) != 2 {
		rest = rest[2:] // namespaced: namespaces/<ns>/<resource>[/<name>]
	}
	switch len(rest) {
	case 1:
		return group, rest[0], true
	default:
		return group, "", false
	}
}

// TestManagerWatchesOnlyWhatItOwns runs the manager binary as shipped, all four
// controllers, behind a proxy that records every read, gives each controller work (a mirror
// with node access and upstream credentials, a copying rule, a rate, a ChaosAgent in every
// mode) and fails on any list or watch of a kind that is not Quartet's own unless it is
// label-selected, metadata-only or of a kind whose bodies the cache drops: the manager's
// memory follows Quartet's objects, not the cluster's.
func TestManagerWatchesOnlyWhatItOwns(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	proxy := benchutil.StartCountingProxy(t, env.Config)
	rates, err := fakeupstream.Start("127.0.0.1:0", "2026-11-20", fakeupstream.DefaultRates())
	require.NoError(t, err)
	defer rates.Close()
	ns := namespace(t, "watch-all", map[string]string{"watch-e2e": "true"})
	dst := namespace(t, "watch-dst", nil)
	persistentVolume(t, "watch-pv")
	testenv.GrantCopies(t, env.Client, ns, copyratorrule.DefaultServiceAccountName, dst)
	testenv.GrantNodesSpec(t, env.Client, mirrorsv1alpha1.RegistryHostGrantSpec{Host: "registry.example",
		Mirror: mirrorsv1alpha1.MirrorReference{Namespace: ns, Name: "private"}, AllowCredentials: true})
	m := startManager(t, "watches", "--kubeconfig="+proxy.Kubeconfig(t), "--exchangerate-url="+rates.URL())

	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns,
		Labels: map[string]string{"copy": "watch"}}, Data: map[string]string{"k": "v"}}))
	agent := chaosAgent("watches", "watch-e2e", func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.TantrumMode, s.CancerMode, s.IpsumMode, s.DryRun = true, true, true, true
	})
	objs := []client.Object{agent,
		&flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: "watch", Namespace: ns}, Spec: flantv1.CopyratorRuleSpec{
			RuleType: flantv1.RuleTypeConfigMap, Selector: map[string]flantv1.LabelValue{"copy": "watch"}, Namespaces: []string{dst}}},
		&operatorsv1.ExchangeRate{ObjectMeta: metav1.ObjectMeta{Name: "usd", Namespace: ns}, Spec: operatorsv1.ExchangeRateSpec{Currency: "USD", Base: "EUR"}},
		&mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: "private", Namespace: ns}, Spec: mirrorsv1alpha1.RegistryMirrorSpec{
			Upstream: "https://registry.example", Storage: resource.MustParse("1Gi"), ConfigureNodes: true,
			CredentialsSecretRef: &mirrorsv1alpha1.SecretReference{Name: "pull"}}},
	}
	for _, o := range objs {
		require.NoError(t, env.Client.Create(ctx, o))
		t.Cleanup(func() { forceDelete(o) })
	}
	eventually(t, time.Minute, "the copy", func() bool { return configMapData(t, dst, "settings")["k"] == "v" })
	eventually(t, time.Minute, "the rate", func() bool { return configMapData(t, ns, "usd")["rate"] != "" })
	eventually(t, 2*time.Minute, "the mirror's node agents and NetworkPolicy", func() bool {
		return exists(t, &corev1.Service{}, ns, "private-registry") && exists(t, &appsv1.DaemonSet{}, ns, "private-node")
	})
	eventually(t, time.Minute, "a chaos round in every mode", func() bool {
		a := &blackadderv1beta1.ChaosAgent{}
		return env.Client.Get(ctx, client.ObjectKeyFromObject(agent), a) == nil && a.Status.Rounds > 1
	})
	m.stop()

	reads := proxy.Reads()
	require.NotEmpty(t, reads)
	seen := map[string]bool{}
	for _, r := range reads {
		group, res, collection := collectionRead(r.URL.Path)
		if !collection {
			continue
		}
		seen[res] = true
		switch {
		case quartetGroups[group]:
		case r.URL.Query().Get("labelSelector") != "":
		case strings.Contains(r.Accept, "as=PartialObjectMetadata"):
		case strippedKinds[res]:
		case res == "pods" && r.URL.Query().Get("fieldSelector") == podsInUseSelector:
			// RegistryMirror's pod cache, started by the first mirror with node access:
			// pods that have not ended, stripped to their images (registrymirror.StripPodImages).
		default:
			t.Errorf("a list or watch of every %s of the cluster, with bodies: %s (Accept %s)", res, r.URL.String(), r.Accept)
		}
	}
	for _, res := range []string{"configmaps", "secrets", "services", "statefulsets", "daemonsets", "pods", "deployments", "namespaces"} {
		assert.True(t, seen[res], "the test saw no read of %s: it would prove nothing about them", res)
	}
}
