// Package olm installs Quartet with OLM on the local cluster's real node, with nothing
// emulated: OLM deployed from its release manifests, the catalog served from the catalog
// image by OLM's own registry pod, both bundles unpacked by OLM's unpack Jobs, the manager
// running as a real pod under the ServiceAccount and permissions OLM derives from the CSV.
// docs/OLM.md says what each test proves. Run with `make olm-e2e` (root; builds everything
// it needs); without QUARTET_REAL_NODE=1 every test skips.
package olm

import (
	"context"
	"fmt"
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
	timings  realnode.Timings
)

const upstreamNamespace = "quartet-e2e-upstream"

func TestMain(m *testing.M) {
	realnode.Main(m, "olm e2e", 60*time.Minute, &env, &timings, setUp)
}

// setUp deploys OLM, serves the catalog and starts the imitation exchange-rate upstream.
func setUp(ctx context.Context) error {
	// The upstream starts beside OLM: neither waits for the other.
	rates := make(chan error, 1)
	go func() {
		var err error
		if ratesURL, err = env.StartFakeRates(ctx, upstreamNamespace); err != nil {
			err = fmt.Errorf("imitation exchange-rate upstream: %w", err)
		}
		rates <- err
	}()
	since := time.Now()
	if err := env.DeployOLM(ctx); err != nil {
		return fmt.Errorf("deploying OLM: %w\n%s", err, env.PodProblems(ctx, realnode.OLMNamespace))
	}
	timings.Add("OLM "+realnode.OLMVersion+" deployed (olm, catalog, packageserver pods)", since)
	since = time.Now()
	if err := env.CreateCatalogSource(ctx, realnode.CatalogName, realnode.CatalogImage); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	timings.Add("CatalogSource READY (registry pod from the catalog image)", since)
	return <-rates
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
