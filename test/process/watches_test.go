package process

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// quartetGroups are the API groups of Quartet's own custom resources.
var quartetGroups = map[string]bool{"blackadder.io": true, "flant.com": true, "mirrors.quartet.dev": true, "operators.brennerm.github.io": true}

// strippedKinds are the kinds a ChaosAgent's rounds list whole, across the namespaces they
// act in, and whose cache drops all but what a round decides on (chaosagent.StripDeployment,
// chaosagent.StripHPA): the manager keeps no bodies of them. They are read only once an agent
// asks for cancer mode.
var strippedKinds = map[string]bool{"deployments": true, "horizontalpodautoscalers": true}

// podsInUseSelector is the field selector of RegistryMirror's pod cache (newPodCache).
const podsInUseSelector = "status.phase!=Succeeded,status.phase!=Failed"

// requestInfo tells a list or watch of a collection, and of which group and resource, as
// the API server does.
var requestInfo = request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

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
	url := ratesURL(t)
	ns := namespace(t, "watch-all", map[string]string{"watch-e2e": "true"})
	dst := namespace(t, "watch-dst", nil)
	persistentVolume(t, "watch-pv")
	testenv.GrantCopies(t, env.Client, ns, copyratorrule.DefaultServiceAccountName, dst)
	testenv.GrantNodesSpec(t, env.Client, mirrorsv1alpha1.RegistryHostGrantSpec{Host: "registry.example",
		Mirror: mirrorsv1alpha1.MirrorReference{Namespace: ns, Name: "private"}, AllowCredentials: true})
	m := startManager(t, "watches", "--kubeconfig="+proxy.Kubeconfig(t), "--exchangerate-url="+url)

	require.NoError(t, env.Client.Create(ctx, testenv.Deployment(ns, "web", 1)))
	require.NoError(t, env.Client.Create(ctx, configMap(ns, "settings", map[string]string{"copy": "watch"}, map[string]string{"k": "v"})))
	agent := chaosAgent("watches", "watch-e2e", func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.TantrumMode, s.CancerMode, s.IpsumMode, s.DryRun = true, true, true, true
	})
	rule := copyRule(ns, "watch", flantv1.RuleTypeConfigMap, "copy=watch", "")
	rule.Spec.Namespaces = []string{dst}
	private := mirror(ns, "private", "https://registry.example", true)
	private.Spec.CredentialsSecretRef = &mirrorsv1alpha1.SecretReference{Name: "pull"}
	create(t, agent, rule, rate(ns, "usd", "USD"), private)
	eventually(t, time.Minute, "the copy", func() bool { return configMapData(t, dst, "settings")["k"] == "v" })
	eventually(t, time.Minute, "the rate", func() bool { return configMapData(t, ns, "usd")["rate"] != "" })
	eventually(t, 2*time.Minute, "the mirror's node agents and NetworkPolicy", func() bool {
		return exists(t, &corev1.Service{}, ns, "private-registry") && exists(t, &appsv1.DaemonSet{}, ns, "private-node")
	})
	eventually(t, time.Minute, "a chaos round in every mode", func() bool {
		return fetch(agent) && agent.Status.Rounds > 1
	})
	m.stop()

	reads := proxy.Reads()
	require.NotEmpty(t, reads)
	seen := map[string]bool{}
	for _, r := range reads {
		info, err := requestInfo.NewRequestInfo(&http.Request{Method: http.MethodGet, URL: &r.URL})
		require.NoError(t, err)
		if !info.IsResourceRequest || (info.Verb != "list" && info.Verb != "watch") {
			continue
		}
		res := info.Resource
		seen[res] = true
		switch {
		case quartetGroups[info.APIGroup]:
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
