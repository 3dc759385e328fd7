// Command demoreal is `make demo NODE=real`: the four stories of `make demo` on the local
// cluster's real node (kubelet, containerd), with Quartet installed by OLM from its catalog
// and running as a pod, as an admin runs it. It shows, without opening a log: the exchange
// rate fetched by the in-cluster manager, copies landing in new namespaces, a chaos agent
// evicting real pods within a PodDisruptionBudget, and an image pull served through a
// RegistryMirror. Ctrl-C (or the end of -keep) stops everything and restores the host.
// Needs root and `make node-deps node-tools olm-tools images` (the make target does them).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/realnode"
)

const (
	installNS = "quartet-system"
	demoNS    = "demo"
	chaosNS   = "chaos-demo"
	// mirrorNS holds the mirror a cluster admin lets onto the nodes: a namespace only
	// admins edit, as the RegistryHostGrant sample asks.
	mirrorNS = "registry-mirrors"
)

func main() {
	keep := flag.Duration("keep", 0, "stop by itself after this long once every story ran (0: wait for Ctrl-C)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *keep); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("\n\033[1m== %s\033[0m\n", fmt.Sprintf(format, args...))
}

func run(ctx context.Context, keep time.Duration) (err error) {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the real node needs root (network namespace, mounts, cgroups); `make demo` runs on kwok without it")
	}
	say("starting a private cluster with a real node (kubelet, containerd, runc) in its own network namespace")
	logf := func(f string, a ...any) { fmt.Printf("  "+f+"\n", a...) }
	if err := localcluster.CleanupStaleRealNodes(logf); err != nil {
		return err
	}
	env, err := realnode.Start(ctx, logf)
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the demo: every container, the node's daemons and the control plane; restoring the host")
		if stopErr := env.Stop(false); stopErr != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping:", stopErr)
			if err == nil {
				err = stopErr
			}
			return
		}
		fmt.Println("  stopped; the kernel settings, mounts, cgroups and network namespace the node changed are restored (make test-node proves it)")
	}()
	d := &demo{env: env, kubectl: env.Cluster.Kubectl()}
	d.kubectlRun(ctx, "get", "nodes", "-o", "wide")

	say("installing OLM, the Quartet catalog and a Subscription, as an admin would")
	if err := env.DeployOLM(ctx); err != nil {
		return err
	}
	if err := env.CreateCatalogSource(ctx, realnode.CatalogName, realnode.CatalogImage); err != nil {
		return err
	}
	ratesURL, err := env.StartFakeRates(ctx, "quartet-demo-upstream")
	if err != nil {
		return err
	}
	fmt.Printf("  the cluster has no internet: ExchangeRates come from a LOCAL IMITATION of the ECB feed at %s\n", ratesURL)
	fmt.Println("  (fixed demo rates, NOT real market data), given to the manager through the Subscription's config")
	since := time.Now()
	if err := env.Subscribe(ctx, realnode.Install{Namespace: installNS, Config: &operatorsv1alpha1.SubscriptionConfig{
		Env: []corev1.EnvVar{
			{Name: "QUARTET_EXCHANGERATE_URL", Value: ratesURL},
			{Name: "QUARTET_REGISTRYMIRROR_CONTAINERD_HOSTS_DIR", Value: env.Cluster.Node.CertsDir},
		},
	}}); err != nil {
		return err
	}
	if err := env.WaitCSVSucceeded(ctx, installNS, realnode.NewCSV, 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("  ClusterServiceVersion %s Succeeded after %s; the manager runs as a pod:\n", realnode.NewCSV, time.Since(since).Round(time.Second))
	d.kubectlRun(ctx, "get", "pods", "-n", installNS, "-o", "wide")
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNS}}); err != nil {
		return err
	}

	for _, story := range []func(context.Context) error{d.exchangeRate, d.copyrator, d.chaos, d.mirror} {
		if err := story(ctx); err != nil {
			return err
		}
	}
	say("every story ran; the cluster keeps running (KUBECONFIG=%s)", env.Cluster.Kubeconfig)
	if keep > 0 {
		fmt.Printf("  stopping by itself in %s, or press Ctrl-C\n", keep)
		select {
		case <-ctx.Done():
		case <-time.After(keep):
		}
		return nil
	}
	fmt.Println("  press Ctrl-C to stop everything")
	<-ctx.Done()
	return nil
}

type demo struct {
	env     *realnode.Env
	kubectl string
}

// kubectlRun shows what an admin's kubectl would show.
func (d *demo) kubectlRun(ctx context.Context, args ...string) {
	_ = d.kubectl1(ctx, "", args...)
}

// kubectl1 runs kubectl as an admin would, stdin (when set) shown as the file it reads,
// prints its output and returns its failure.
func (d *demo) kubectl1(ctx context.Context, stdin string, args ...string) error {
	fmt.Printf("  $ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.env.Cluster.Kubeconfig)
	if stdin != "" {
		fmt.Printf("    %s\n", strings.ReplaceAll(strings.TrimSpace(stdin), "\n", "\n    "))
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		fmt.Println("    " + l)
	}
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func (d *demo) exchangeRate(ctx context.Context) error {
	say("ExchangeRate: the sample exchange-rate-usd, fetched by the in-cluster manager")
	er := &operatorsv1.ExchangeRate{}
	if err := d.env.Sample("operators_v1_exchangerate.yaml", er, demoNS); err != nil {
		return err
	}
	if err := d.env.Client.Create(ctx, er); err != nil {
		return err
	}
	rate, err := d.env.WaitExchangeRate(ctx, demoNS, er.Name, 2*time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("  ConfigMap %s/%s holds rate=%s (USD per 1 EUR, IMITATION upstream)\n", demoNS, er.Name, rate)
	d.kubectlRun(ctx, "get", "exchangerates", "-n", demoNS)
	return nil
}

func (d *demo) copyrator(ctx context.Context) error {
	sa := demoNS + ":" + copyratorrule.DefaultServiceAccountName
	say("the cluster admin's consent: CopyratorRules of namespace %s, acting as ServiceAccount %s, may copy into every namespace", demoNS, sa)
	fmt.Printf("  a rule writes only where its ServiceAccount may create the copies; the install shipped the ClusterRole %s for this\n", copyratorrule.TargetClusterRole)
	if err := d.kubectl1(ctx, "", "create", "clusterrolebinding", "copyrator-platform",
		"--clusterrole="+copyratorrule.TargetClusterRole, "--serviceaccount="+sa); err != nil {
		return err
	}

	say("CopyratorRule: the sample main-rule copies ConfigMaps labelled copyrator=true into every namespace")
	if err := d.env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared-settings", Namespace: demoNS,
		Labels: map[string]string{"copyrator": "true"}}, Data: map[string]string{"log-level": "info"}}); err != nil {
		return err
	}
	rule := &flantv1.CopyratorRule{}
	if err := d.env.Sample("flant_v1_copyratorrule.yaml", rule, demoNS); err != nil {
		return err
	}
	if err := d.env.Client.Create(ctx, rule); err != nil {
		return err
	}
	fmt.Println("  creating namespaces team-a and team-b after the rule:")
	for _, ns := range []string{"team-a", "team-b"} {
		since := time.Now()
		if err := d.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
		if err := d.env.WaitCopies(ctx, rule, "shared-settings", []string{ns}, time.Minute); err != nil {
			return err
		}
		fmt.Printf("  %s: copy in place %s after the namespace was created\n", ns, time.Since(since).Round(time.Millisecond))
	}
	d.kubectlRun(ctx, "get", "configmaps", "-A", "-l", "copyrator.flant.com/rule=main-rule")
	// The status follows the copies (a full pass a second after the new namespaces').
	if err := realnode.WaitFor(ctx, "the rule's status", time.Minute, func(ctx context.Context) (bool, string, error) {
		err := d.env.Client.Get(ctx, client.ObjectKeyFromObject(rule), rule)
		return err == nil && rule.Status.CopiesInSync >= 2 && rule.Status.RefusedCount > 0, fmt.Sprintf("%+v", rule.Status), err
	}); err != nil {
		return err
	}
	d.kubectlRun(ctx, "get", "copyrators", "-n", demoNS)
	fmt.Printf("  refused: %d namespaces; the protected ones take copies only once an admin labels them %s=true:\n",
		rule.Status.RefusedCount, copyratorrule.LabelAcceptCopies)
	for _, r := range rule.Status.Refused {
		fmt.Printf("    %-16s %s\n", r.Namespace, r.Reason)
	}
	return nil
}

func (d *demo) chaos(ctx context.Context) error {
	say("ChaosAgent: tantrums evict real pods, never below the PodDisruptionBudget")
	c := d.env.Client
	labels := map[string]string{"app": "web"}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chaosNS, Labels: map[string]string{"quartet-demo/chaos": "true"}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: chaosNS}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers:                    []corev1.Container{{Name: "web", Image: realnode.E2EImage, Command: []string{"sleep", "3600"}}}}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: chaosNS}, Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	if err := realnode.WaitFor(ctx, "4 pods of web Ready", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		dep := &appsv1.Deployment{}
		err := c.Get(ctx, client.ObjectKey{Namespace: chaosNS, Name: "web"}, dep)
		return err == nil && dep.Status.ReadyReplicas == 4, "", err
	}); err != nil {
		return err
	}
	d.kubectlRun(ctx, "get", "pods", "-n", chaosNS)
	agent := &blackadderv1beta1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: "princeedmund"}, Spec: blackadderv1beta1.ChaosAgentSpec{
		TantrumMode: true, PodTolerance: 1, Eagerness: 100, PauseDuration: 10, MaxActionsPerRound: 4,
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"quartet-demo/chaos": "true"}},
	}}
	fmt.Println("  ChaosAgent princeedmund: tantrum mode, eagerness 100, a round every 10 s, only in namespaces labelled quartet-demo/chaos=true")
	if err := c.Create(ctx, agent); err != nil {
		return err
	}
	if _, err := d.env.WaitChaosRounds(ctx, agent.Name, 2, 2*time.Minute); err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
		return err
	}
	fmt.Printf("  after %d rounds: %d pods evicted; the budget refused the rest of each round:\n", agent.Status.Rounds, agent.Status.Counts.PodsKilled)
	for _, a := range agent.Status.LastActions {
		fmt.Printf("    %s %-8s %-28s %s\n", a.Time.Format("15:04:05"), a.Kind, a.Target, a.Result)
	}
	agent.Spec.Paused = true
	if err := c.Update(ctx, agent); err != nil {
		return err
	}
	if err := realnode.WaitFor(ctx, "the evicted pods replaced", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		err := c.List(ctx, pods, client.InNamespace(chaosNS))
		ready := 0
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready++
				}
			}
		}
		return err == nil && ready == 4 && len(pods.Items) == 4, "", err
	}); err != nil {
		return err
	}
	fmt.Println("  agent paused; the Deployment replaced every evicted pod with a real, running one:")
	d.kubectlRun(ctx, "get", "pods", "-n", chaosNS)
	return nil
}

type tempDirs struct{ root string }

func (t tempDirs) TempDir() string {
	dir, err := os.MkdirTemp(t.root, "image-")
	if err != nil {
		panic(err)
	}
	return dir
}

func (d *demo) mirror(ctx context.Context) error {
	say("RegistryMirror: a node pulls through the mirror, and keeps pulling when the upstream is gone")
	up, err := d.env.StartUpstreamRegistry(5002, "", "", "")
	if err != nil {
		return err
	}
	defer up.Stop()
	img, _, err := d.env.TestImage(tempDirs{root: d.env.Dir}, 1<<20)
	if err != nil {
		return err
	}
	ref, err := up.Push("library/app", "1", img)
	if err != nil {
		return err
	}
	fmt.Printf("  an upstream registry at http://%s (standing in for docker.io) holds %s\n", up.Host, ref)
	m := &mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Name: "upstream", Namespace: mirrorNS},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: "http://" + up.Host, Storage: resource.MustParse("1Gi"), ConfigureNodes: true}}

	say("the cluster admin's consent: RegistryMirror %s/%s may serve every node's pulls of %s", mirrorNS, m.Name, up.Host)
	fmt.Println("  a mirror touches the nodes (a host port, containerd's hosts.toml) only with a RegistryHostGrant, which only a")
	fmt.Println("  cluster admin can create; resolve lets pods start by tag while the upstream is down, allowPlainHTTP because")
	fmt.Println("  this stand-in upstream speaks plain HTTP")
	if err := d.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mirrorNS}}); err != nil {
		return err
	}
	grant := fmt.Sprintf(`apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryHostGrant
metadata:
  name: %s
spec:
  host: "%s"
  mirror: {namespace: %s, name: %s}
  capabilities: [pull, resolve]
  allowPlainHTTP: true
`, m.Name, up.Host, mirrorNS, m.Name)
	if err := d.kubectl1(ctx, grant, "apply", "-f", "-"); err != nil {
		return err
	}

	say("RegistryMirror %s/%s: a pull-through cache of http://%s, configuring the nodes", mirrorNS, m.Name, up.Host)
	if err := d.env.Client.Create(ctx, m); err != nil {
		return err
	}
	if err := d.env.WaitMirrorReady(ctx, mirrorNS, m.Name, 4*time.Minute); err != nil {
		return err
	}
	d.kubectlRun(ctx, "get", "registrymirrors", "-n", mirrorNS, "-o", "wide")
	hosts, err := os.ReadFile(filepath.Join(d.env.Cluster.Node.CertsDir, up.Host, "hosts.toml"))
	if err != nil {
		return err
	}
	fmt.Printf("  the node agent wrote containerd's hosts.toml:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(string(hosts)), "\n", "\n    "))
	for i, phase := range []string{"with the upstream up", "with the upstream STOPPED (the data centre lost its outside connection)"} {
		if i == 1 {
			up.Stop()
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: mirrorNS},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{{
				Name: "app", Image: ref, ImagePullPolicy: corev1.PullAlways, Command: []string{"sleep", "3600"}}}}}
		if err := d.env.Client.Create(ctx, pod); err != nil {
			return err
		}
		if err := realnode.WaitFor(ctx, "pod "+pod.Name+" running", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
			err := d.env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)
			return err == nil && pod.Status.Phase == corev1.PodRunning, string(pod.Status.Phase), err
		}); err != nil {
			return err
		}
		fmt.Printf("  pod %s (image %s, pulled at start) runs %s; the mirror's registry log says:\n", pod.Name, ref, phase)
		logs, err := d.env.Clientset.CoreV1().Pods(mirrorNS).GetLogs(m.Name+"-registry-0", &corev1.PodLogOptions{Container: "registry"}).DoRaw(ctx)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(logs), "\n") {
			if strings.Contains(l, "/v2/library/app/manifests/1") && strings.Contains(l, "\" 200 ") {
				fmt.Println("    " + l)
			}
		}
	}
	if err := realnode.WaitFor(ctx, "the mirror's status to notice the upstream is gone", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := d.env.Client.Get(ctx, client.ObjectKeyFromObject(m), m)
		for _, c := range m.Status.Conditions {
			if c.Type == "UpstreamReachable" && c.Status == metav1.ConditionFalse {
				return true, "", err
			}
		}
		return false, "", err
	}); err != nil {
		return err
	}
	for _, c := range m.Status.Conditions {
		fmt.Printf("  %s=%s (%s): %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return nil
}
