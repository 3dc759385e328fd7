package process

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

const (
	// hostileBenchTargets are the namespaces the platform rule copies into before the attacks.
	hostileBenchTargets = 500
	// hostileBenchNew are the new namespaces whose copies are timed in each window.
	hostileBenchNew = 20
	// hostileBenchFakes look-alikes of hostileBenchFakeKiB each: 1.07 × --copyratorrule-max-bytes.
	hostileBenchFakes, hostileBenchFakeKiB = 1100, 64
	// hostileBenchRules rules of the consent flood, each acting as a ServiceAccount of its own.
	hostileBenchRules  = 200
	hostileBenchSettle = 15 * time.Second
	hostileBenchWindow = 30 * time.Second
)

// BenchmarkHostileTenant measures what a tenant's attacks on what every tenant shares cost
// the others and the manager (issue 37), each beside the same workload without the attacker,
// in one run on one API server.
//
// The manager binary runs the copyratorrule controller only, behind the counting proxy (as in
// BenchmarkManagerIdle), with --copyratorrule-max-bytes=64Mi: the look-alike attack of the
// security review (1,100 objects of 1 MiB against the shipped 1Gi) scaled by 1/16, so that
// etcd on this machine holds it. The others' work is a platform rule, granted everywhere,
// that copies a 1 KiB ConfigMap into 500 namespaces. Then, for each of three cases: none (no
// attacker), lookalikes (1,100 ConfigMaps of 64 KiB in the attacker's namespace carrying the
// copy labels of a rule that does not exist, without a UID) and consent-flood (200 rules of
// the attacker, each with its own serviceAccountName and a selector matching a ConfigMap of
// hers, copying into every namespace, which none consents to): the attack is made, the
// platform's source changes (a full pass, which counts the copies again), the manager rests
// 15 s, and a 30 s window begins in which 20 new namespaces labelled for the
// platform rule are created. s-victim-<case> is the time from their creation to the last of
// their 20 copies; cpu-ms/min-<case> the manager's CPU (from /proc), api-requests/min-<case>
// and api-reviews/min-<case> the requests it sent (SubjectAccessReviews among them) and
// MB-rss-<case> its VmRSS at the window's end. x-<figure>-<case> divides by the same figure
// of none. The attack is removed (and its objects gone) before the next case.
func BenchmarkHostileTenant(b *testing.B) {
	env.Require(b)
	ctx := context.Background()
	proxy := benchutil.StartCountingProxy(b, env.Config)
	m := startManager(b, "hostile-bench", "--kubeconfig="+proxy.Kubeconfig(b), "--controllers=copyratorrule",
		"--copyratorrule-max-bytes=64Mi")
	pid := m.cmd.Process.Pid
	waitFor(b, 2*time.Minute, "the controller's workers", func() bool { return strings.Contains(m.logs(), `"Starting workers"`) })

	// Names of this round's own: an earlier round's namespaces may still be terminating.
	round := strings.ToLower(rand.String(4))
	platform := namespaceList(b, "hb-platform-"+round, 1, nil)[0]
	attacker := namespaceList(b, "hb-attacker-"+round, 1, nil)[0]
	namespaceList(b, "hb-dst-"+round, hostileBenchTargets, map[string]string{"hb-dst": "true"})
	testenv.GrantCopies(b, env.Client, platform, copyratorrule.DefaultServiceAccountName)
	must(b, env.Client.Create(ctx, configMap(platform, "company-ca", map[string]string{"hb": "ca"}, benchutil.Payload(1<<10))))
	rule := copyRule(platform, "company-ca-"+round, flantv1.RuleTypeConfigMap, "hb=ca", "hb-dst")
	must(b, env.Client.Create(ctx, rule))
	b.Cleanup(func() { forceDelete(rule) })
	waitFor(b, 3*time.Minute, "the platform's copies in every target", func() bool {
		return platformCopies(b, rule.Name) >= hostileBenchTargets
	})

	type figures struct{ victim, cpu, requests, reviews, rss float64 }
	cases := []struct {
		name   string
		attack func(b *testing.B, attacker string) (undo func())
	}{{"none", nil}, {"lookalikes", lookalikeAttack}, {"consent-flood", consentFloodAttack}}
	measured := map[string]figures{}
	for i, c := range cases {
		undo := func() {}
		if c.attack != nil {
			undo = c.attack(b, attacker)
		}
		// The platform's source changes meanwhile: a full pass, which counts the copies again.
		src := &corev1.ConfigMap{}
		must(b, env.Client.Get(ctx, client.ObjectKey{Namespace: platform, Name: "company-ca"}, src))
		src.Data["rev"] = c.name
		must(b, env.Client.Update(ctx, src))
		time.Sleep(hostileBenchSettle)
		before, cpuBefore, t0 := proxy.Calls.Snapshot(), procCPU(b, pid), time.Now()
		fresh := namespaceList(b, fmt.Sprintf("hb-new-%s-%d", round, i), hostileBenchNew, map[string]string{"hb-dst": "true"})
		waitFor(b, 2*time.Minute, "the platform's copies in the new namespaces", func() bool {
			for _, ns := range fresh {
				if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "company-ca"}, &corev1.ConfigMap{}) != nil {
					return false
				}
			}
			return true
		})
		victim := time.Since(t0)
		time.Sleep(time.Until(t0.Add(hostileBenchWindow)))
		after, cpuAfter, t1 := proxy.Calls.Snapshot(), procCPU(b, pid), time.Now()
		rss, err := benchutil.ProcRSS(pid)
		must(b, err)
		perMin := time.Minute.Seconds() / t1.Sub(t0).Seconds()
		var requests, reviews int
		for k, v := range after {
			d := v - before[k]
			verb, path, _ := strings.Cut(k, " ")
			requests += d
			if verb == "POST" && benchutil.IsReview(benchutil.ResourceOf(path)) {
				reviews += d
			}
		}
		f := figures{victim: victim.Seconds(), cpu: float64(cpuAfter-cpuBefore) / float64(time.Millisecond) * perMin,
			requests: float64(requests) * perMin, reviews: float64(reviews) * perMin, rss: float64(rss) / (1 << 20)}
		measured[c.name] = f
		b.Logf("%s: the 20 copies in %s; %.0f CPU ms/min, %.0f requests/min (%.0f reviews), RSS %.1f MB",
			c.name, victim.Round(time.Millisecond), f.cpu, f.requests, f.reviews, f.rss)
		b.ReportMetric(f.victim, "s-victim-"+c.name)
		b.ReportMetric(f.cpu, "cpu-ms/min-"+c.name)
		b.ReportMetric(f.requests, "api-requests/min-"+c.name)
		b.ReportMetric(f.reviews, "api-reviews/min-"+c.name)
		b.ReportMetric(f.rss, "MB-rss-"+c.name)
		if c.name != "none" {
			base := measured["none"]
			b.ReportMetric(f.victim/base.victim, "x-victim-"+c.name)
			b.ReportMetric(f.cpu/base.cpu, "x-cpu-"+c.name)
			b.ReportMetric(f.requests/base.requests, "x-requests-"+c.name)
			b.ReportMetric(f.rss/base.rss, "x-rss-"+c.name)
		}
		undo()
	}
	if m.exited() {
		b.Fatalf("the manager exited:\n%s", m.logs())
	}
}

// lookalikeAttack creates hostileBenchFakes ConfigMaps of hostileBenchFakeKiB in ns with the
// copy labels of a rule that does not exist, and no UID.
func lookalikeAttack(b *testing.B, ns string) func() {
	b.Helper()
	ctx := context.Background()
	labels := map[string]string{copyratorrule.LabelManagedBy: copyratorrule.ManagedByValue,
		copyratorrule.LabelRule: "ghost", copyratorrule.LabelRuleNamespace: ns}
	payload := benchutil.Payload(hostileBenchFakeKiB << 10)
	must(b, benchutil.Parallel(ctx, hostileBenchFakes, func(i int) error {
		return env.Client.Create(ctx, configMap(ns, fmt.Sprintf("fake-%04d", i), labels, payload))
	}))
	return func() {
		must(b, env.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), client.MatchingLabels(labels)))
		waitFor(b, 2*time.Minute, "the look-alikes gone", func() bool {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
			return env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(labels)) == nil && len(list.Items) == 0
		})
	}
}

// consentFloodAttack creates hostileBenchRules rules in ns, each acting as a ServiceAccount of
// its own, picking a ConfigMap of ns and copying into every namespace.
func consentFloodAttack(b *testing.B, ns string) func() {
	b.Helper()
	ctx := context.Background()
	must(b, env.Client.Create(ctx, configMap(ns, "bait", map[string]string{"bait": "yes"}, map[string]string{"k": "v"})))
	rules := make([]*flantv1.CopyratorRule, hostileBenchRules)
	for i := range rules {
		rules[i] = copyRule(ns, fmt.Sprintf("flood-%03d", i), flantv1.RuleTypeConfigMap, "bait=yes", "")
		rules[i].Spec.ServiceAccountName = fmt.Sprintf("sa-%03d", i)
	}
	must(b, benchutil.Parallel(ctx, len(rules), func(i int) error { return env.Client.Create(ctx, rules[i]) }))
	return func() {
		must(b, benchutil.Parallel(ctx, len(rules), func(i int) error { return client.IgnoreNotFound(env.Client.Delete(ctx, rules[i])) }))
		waitFor(b, 2*time.Minute, "the flood's rules gone", func() bool {
			for _, r := range rules {
				if !apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(r), &flantv1.CopyratorRule{})) {
					return false
				}
			}
			return true
		})
	}
}

// platformCopies counts the copies of the rules named rule.
func platformCopies(b *testing.B, rule string) int {
	b.Helper()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	must(b, env.Client.List(context.Background(), list, client.MatchingLabels{copyratorrule.LabelRule: rule}))
	return len(list.Items)
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
