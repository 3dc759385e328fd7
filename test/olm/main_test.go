// Package olm installs Quartet with OLM on the local cluster's real node, with nothing
// emulated: OLM deployed from its release manifests, the catalog served from the catalog
// image by OLM's own registry pod, both bundles unpacked by OLM's unpack Jobs, the manager
// running as a real pod under the ServiceAccount and permissions OLM derives from the CSV.
// docs/OLM.md says what each test proves. Run with `make olm-e2e` (root; builds everything
// it needs); without QUARTET_REAL_NODE=1 every test skips.
package olm

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/quartet-operator/quartet/test/realnode"
)

var (
	env *realnode.Env
	// ratesURL is the imitation exchange-rate upstream, a pod reached over the pod network.
	ratesURL string
	timings  timingLog
)

const upstreamNamespace = "quartet-e2e-upstream"

// timingLog collects the phase durations the docs quote; TestMain prints them.
type timingLog struct{ lines []string }

func (l *timingLog) add(what string, since time.Time) {
	d := time.Since(since).Round(100 * time.Millisecond)
	l.lines = append(l.lines, fmt.Sprintf("%-66s %7s", what, d))
	fmt.Printf("TIMING %s: %s\n", what, d)
}

func TestMain(m *testing.M) {
	flag.Parse()
	if !realnode.Enabled() {
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	logf := func(f string, a ...any) { fmt.Printf(f+"\n", a...) }

	start := time.Now()
	e, err := realnode.Start(ctx, logf)
	if err != nil {
		fmt.Println("olm e2e: starting the real node:", err)
		return 1
	}
	timings.add("real node start (control plane, kubelet, containerd, DNS)", start)
	env = e
	defer func() {
		if code != 0 {
			e.PauseIfAsked()
		}
		since := time.Now()
		keep := code != 0 || os.Getenv("QUARTET_E2E_KEEP") != ""
		if err := e.Stop(keep); err != nil {
			fmt.Println("olm e2e: stopping the real node:", err)
			code = 1
		}
		timings.add("real node stop and host restore", since)
		fmt.Printf("timings:\n%s\n", strings.Join(timings.lines, "\n"))
	}()

	since := time.Now()
	if err := e.DeployOLM(ctx); err != nil {
		fmt.Printf("olm e2e: deploying OLM: %v\n%s\n", err, e.PodProblems(ctx, realnode.OLMNamespace))
		return 1
	}
	timings.add("OLM "+realnode.OLMVersion+" deployed (olm, catalog, packageserver pods)", since)
	since = time.Now()
	if err := e.CreateCatalogSource(ctx, realnode.CatalogName, realnode.CatalogImage); err != nil {
		fmt.Println("olm e2e: catalog:", err)
		return 1
	}
	timings.add("CatalogSource READY (registry pod from the catalog image)", since)
	if ratesURL, err = e.StartFakeRates(ctx, upstreamNamespace); err != nil {
		fmt.Println("olm e2e: imitation exchange-rate upstream:", err)
		return 1
	}
	return m.Run()
}

func requireEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("set QUARTET_REAL_NODE=1 to run the OLM end-to-end tests on the real node (make olm-e2e; needs root)")
	}
}

// managerConfig points the manager's ExchangeRate controller at the imitation upstream:
// a Subscription's spec.config.env is how an admin sets a manager flag under OLM.
func managerConfig() *operatorsv1alpha1.SubscriptionConfig {
	return &operatorsv1alpha1.SubscriptionConfig{Env: []corev1.EnvVar{{Name: "QUARTET_EXCHANGERATE_URL", Value: ratesURL}}}
}
