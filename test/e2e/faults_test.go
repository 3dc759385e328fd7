package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/realnode"
)

// faultNamespaces is how many namespaces receive copies while the faults happen.
const faultNamespaces = 500

// nodeReady reports whether the real node is Ready.
func nodeReady(ctx context.Context) (bool, string, error) {
	n, err := env.Clientset.CoreV1().Nodes().Get(ctx, localcluster.RealNodeName, metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, c.Reason + ": " + c.Message, nil
		}
	}
	return false, "no Ready condition", nil
}

// managerReady returns the manager pod once it is Ready.
func managerReady(ctx context.Context) (*corev1.Pod, bool, string) {
	p, err := env.ManagerPod(ctx, installNS)
	if err != nil {
		return nil, false, err.Error()
	}
	return p, podReady(p), fmt.Sprintf("%s restarts %d", p.Name, restarts(p))
}

func restarts(p *corev1.Pod) int32 {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "manager" {
			return s.RestartCount
		}
	}
	return -1
}

// pullThroughMirror starts a pod of ref (pulled at start) and requires that the mirror's
// registry served its manifest again.
func pullThroughMirror(t *testing.T, m *mirrorsv1alpha1.RegistryMirror, ns, pod, ref, manifest string) {
	t.Helper()
	before := len(fetchers(registryLog(t, m), manifest))
	p := runImage(t, ns, pod, ref)
	require.Greater(t, len(fetchers(registryLog(t, m), manifest)), before, "the pull of %s went through the mirror", pod)
	require.NoError(t, env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)))
}

// TestFaultsOnTheRealNode: while the in-cluster manager copies a ConfigMap into 500
// namespaces as they appear, a ChaosAgent overwrites ConfigMaps and a mirror serves
// pulls, the node's containerd restarts, then its kubelet, then the manager's container is
// killed from the runtime (as the OOM killer would). After each: the node and the manager
// come back, the mirror's hosts.toml is intact and a pull goes through the mirror. At the
// end every namespace holds exactly one copy, and deleting the agent puts every
// ConfigMap it overwrote back (no change left unrecorded).
func TestFaultsOnTheRealNode(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const ns, label = "faults", "e2e.quartet.dev/fault"

	// A mirror serving pulls.
	up, ref, _ := upstreamWithImage(t, 5005, "", "", "", "library/steady", 64<<10)
	m := newMirror(t, ns, "faults", "http://"+up.Host, "", pullResolve)
	const manifest = "/v2/library/steady/manifests/1"
	pullThroughMirror(t, m, ns, "pull-0", ref, manifest)
	hostsPath := filepath.Join(env.Cluster.Node.CertsDir, up.Host, "hosts.toml")
	hosts, err := os.ReadFile(hostsPath)
	require.NoError(t, err)

	// A chaos agent overwriting the ConfigMaps of its own namespace.
	chaosNamespace(t, "faults-chaos")
	originals := map[string]map[string]string{}
	for i := range 5 {
		name := fmt.Sprintf("settings-%d", i)
		originals[name] = map[string]string{"key": fmt.Sprintf("original value %d", i)}
		require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "faults-chaos"}, Data: originals[name]}))
	}
	agent := newAgent(t, "e2e-faults", "faults-chaos", blackadderv1beta1.ChaosAgentSpec{
		IpsumMode: true, Eagerness: 50, PauseDuration: 2, MaxActionsPerRound: 10,
	})

	// The rule copies into every labelled namespace (the cluster admin consented for every
	// namespace); the namespaces appear over two minutes.
	grantCopies(t, "copyrator-e2e-faults", ns)
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns, Labels: map[string]string{"copy": "yes"}},
		Data:       map[string]string{"greeting": "hello"}}))
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeConfigMap, Selector: map[string]flantv1.LabelValue{"copy": "yes"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}}}
	require.NoError(t, env.Client.Create(ctx, rule))
	var wg sync.WaitGroup
	created := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := range faultNamespaces {
			<-tick.C
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("fault-%03d", i), Labels: map[string]string{label: "yes"}}}); err != nil {
				created <- err
				return
			}
		}
		created <- nil
	}()
	t.Cleanup(wg.Wait)

	manager, ok, detail := managerReady(ctx)
	require.True(t, ok, detail)
	faults := []struct {
		name   string
		inject func() error
	}{
		{"containerd restarted", func() error { return env.Cluster.RestartNodeComponent("containerd") }},
		{"kubelet restarted", func() error { return env.Cluster.RestartNodeComponent("kubelet") }},
		{"manager container killed (SIGKILL from the runtime)", func() error {
			id := ""
			for _, s := range manager.Status.ContainerStatuses {
				if s.Name == "manager" {
					id = strings.TrimPrefix(s.ContainerID, "containerd://")
				}
			}
			_, err := env.Cluster.NodeCommand(ctx, "ctr", "--address", env.Cluster.Node.ContainerdSocket, "--namespace", "k8s.io",
				"tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
			return err
		}},
	}
	for i, f := range faults {
		time.Sleep(10 * time.Second) // copies are under way
		before := restarts(manager)
		since := time.Now()
		require.NoError(t, f.inject(), f.name)
		require.NoError(t, realnode.WaitFor(ctx, "node Ready after "+f.name, 3*time.Minute, nodeReady))
		nodeBack := time.Since(since)
		killed := strings.HasPrefix(f.name, "manager")
		require.NoError(t, realnode.WaitFor(ctx, "manager Ready after "+f.name, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			p, ok, detail := managerReady(ctx)
			if ok && killed && restarts(p) == before {
				ok = false // the kubelet has not noticed the kill yet
			}
			if ok {
				manager = p
			}
			return ok, detail, nil
		}))
		managerBack := time.Since(since)
		// A namespace created now gets its copy: the manager works again, not only runs.
		probe := fmt.Sprintf("fault-probe-%d", i)
		require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probe, Labels: map[string]string{label: "yes"}}}))
		require.NoError(t, env.WaitCopies(ctx, rule, "shared", []string{probe}, 3*time.Minute))
		copying := time.Since(since)
		t.Logf("%s: node Ready after %s, manager Ready after %s (restarts %d -> %d), a new namespace's copy after %s",
			f.name, nodeBack.Round(100*time.Millisecond), managerBack.Round(100*time.Millisecond), before, restarts(manager), copying.Round(100*time.Millisecond))
		if killed {
			record("fault: "+f.name+": to the restarted manager Ready", managerBack)
		}
		record("fault: "+f.name+": to a new namespace's copy", copying)
		if killed {
			require.Equal(t, before+1, restarts(manager), "the kubelet restarted the killed container")
		}
		got, err := os.ReadFile(hostsPath)
		require.NoError(t, err)
		require.Equal(t, string(hosts), string(got), "the mirror's hosts.toml is intact")
		pullThroughMirror(t, m, ns, fmt.Sprintf("pull-%d", i+1), ref, manifest)
		record("fault: "+f.name+": to a new pod running, pulled through the mirror", time.Since(since))
	}
	require.NoError(t, <-created)

	// Every namespace holds exactly one copy, and the rule counts them all.
	want := faultNamespaces + len(faults)
	require.NoError(t, realnode.WaitFor(ctx, fmt.Sprintf("%d copies", want), 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		cms := &corev1.ConfigMapList{}
		if err := env.Client.List(ctx, cms, client.MatchingLabels{copyratorrule.LabelRule: rule.Name}); err != nil {
			return false, "", err
		}
		per := map[string]int{}
		for _, c := range cms.Items {
			per[c.Namespace]++
			if per[c.Namespace] > 1 {
				return false, "", realnode.Failed{Reason: "two copies in " + c.Namespace}
			}
		}
		r := &flantv1.CopyratorRule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rule), r); err != nil {
			return false, "", err
		}
		return len(per) == want && r.Status.CopiesInSync == int32(want), fmt.Sprintf("%d copies, status %d in sync", len(per), r.Status.CopiesInSync), nil
	}))

	// The agent kept hitting ConfigMaps through all of it; its deletion puts each back.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(agent), agent))
	t.Logf("chaos agent: %d rounds, %d ConfigMaps overwritten, during the faults", agent.Status.Rounds, agent.Status.Counts.ConfigMapsIpsumed)
	require.Positive(t, agent.Status.Counts.ConfigMapsIpsumed)
	deleteAgent(t, agent)
	for name, data := range originals {
		cm := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: "faults-chaos", Name: name}, cm))
		require.Equal(t, data, cm.Data, "%s is back", name)
		require.NotContains(t, cm.Labels, "blackadder.io/agent")
	}
	require.NoError(t, env.WaitMirrorReady(ctx, ns, m.Name, time.Minute))
}
