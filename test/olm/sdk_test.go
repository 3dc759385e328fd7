package olm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	scorecardv1alpha3 "github.com/operator-framework/api/pkg/apis/scorecard/v1alpha3"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/realnode"
)

// Images the operator-sdk commands get, by the names the node resolves (the registry in
// its namespace, trusted through the cluster CA).
const (
	sdkBundleOld  = localcluster.ImageRegistry + "/quartet-operator/quartet-bundle:v0.1.0"
	sdkBundleNew  = localcluster.ImageRegistry + "/quartet-operator/quartet-bundle:v0.3.0"
	sdkIndexImage = localcluster.ImageRegistry + "/quartet-operator/empty-index:v1.74.0"
	untarImage    = "quay.io/operator-framework/scorecard-untar:quartet"
)

func operatorSDK(t *testing.T) string {
	t.Helper()
	sdk := os.Getenv("OPERATOR_SDK")
	if sdk == "" {
		sdk = filepath.Join(env.Root, "bin", "tools", "operator-sdk-v1.42.2")
	}
	_, err := os.Stat(sdk)
	require.NoError(t, err, "operator-sdk missing: make olm-tools")
	return sdk
}

// sdk runs operator-sdk inside the node's network namespace (where it reaches the API
// server and the registry) and returns its output.
func sdk(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := env.Cluster.NodeCommand(ctx, operatorSDK(t), args...).CombinedOutput()
	require.NoError(t, err, "operator-sdk %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestOperatorSDKRunBundleAndScorecard takes the paths a developer takes: `operator-sdk
// run bundle` of the 0.1.0 bundle image, `run bundle-upgrade` to 0.3.0, `cleanup`, and
// `scorecard` with the basic and OLM suites on bundle/, all against the real node.
func TestOperatorSDKRunBundleAndScorecard(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const ns = "qsdk"
	require.NoError(t, env.DeleteQuartetCRDs(context.Background()), "0.1.0 installs only where newer CRDs are gone")
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	since := time.Now()
	out := sdk(t, "run", "bundle", sdkBundleOld, "--namespace", ns, "--install-mode", "OwnNamespace",
		"--index-image", sdkIndexImage, "--security-context-config", "restricted", "--timeout", "5m")
	timings.Add("operator-sdk run bundle 0.1.0 to Succeeded", since)
	t.Logf("run bundle:\n%s", lastLines(out, 4))
	require.Regexp(t, `OLM has successfully installed \\?"`+realnode.OldCSV, out)
	requireManagerReady(t, ns, realnode.OldOperatorImage)

	since = time.Now()
	out = sdk(t, "run", "bundle-upgrade", sdkBundleNew, "--namespace", ns, "--security-context-config", "restricted", "--timeout", "5m")
	timings.Add("operator-sdk run bundle-upgrade 0.3.0 to Succeeded", since)
	t.Logf("run bundle-upgrade:\n%s", lastLines(out, 4))
	require.Regexp(t, `Successfully upgraded to \\?"`+realnode.NewCSV, out)
	requireManagerReady(t, ns, realnode.OperatorImage)

	out = sdk(t, "cleanup", realnode.Package, "--namespace", ns, "--timeout", "3m")
	t.Logf("cleanup:\n%s", lastLines(out, 6))
	require.NoError(t, realnode.WaitFor(ctx, "operator-sdk cleanup removed the install", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
		if err := env.Client.List(ctx, csvs, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		cats := &operatorsv1alpha1.CatalogSourceList{}
		if err := env.Client.List(ctx, cats, client.InNamespace(ns)); err != nil {
			return false, "", err
		}
		_, err := env.ManagerPod(ctx, ns)
		return len(csvs.Items) == 0 && len(cats.Items) == 0 && err != nil, "", nil
	}))

	// Scorecard: each test runs in a pod (scorecard-test image), the bundle untarred into it.
	since = time.Now()
	out = sdk(t, "scorecard", filepath.Join(env.Root, "bundle"), "--namespace", ns, "--untar-image", untarImage,
		"--wait-time", "180s", "--output", "json")
	timings.Add("operator-sdk scorecard bundle/ (basic and olm suites)", since)
	var list scorecardv1alpha3.TestList
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &list), out)
	require.NotEmpty(t, list.Items)
	suites := map[string]bool{}
	for _, test := range list.Items {
		suites[test.Spec.Labels["suite"]] = true
		for _, r := range test.Status.Results {
			t.Logf("scorecard %s/%s: %s %v", test.Spec.Labels["suite"], r.Name, r.State, r.Suggestions)
			require.Equal(t, scorecardv1alpha3.PassState, r.State, "%s: %v %v", r.Name, r.Errors, r.Log)
		}
	}
	require.True(t, suites["basic"] && suites["olm"], "both suites ran: %v", suites)
	require.NoError(t, env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
