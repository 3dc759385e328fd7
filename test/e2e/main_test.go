// Package e2e proves each controller's purpose on the local cluster's real node, with the
// manager installed by OLM and running as a pod, as users run it: a RegistryMirror serves
// real pulls (and keeps serving when its upstream is gone), a ChaosAgent really kills and
// really restores, copies and exchange rates come from the in-cluster manager, and all of
// it survives containerd, kubelet and manager restarts. Run with `make e2e` (root); without
// QUARTET_REAL_NODE=1 every test skips. docs/registrymirror.md and docs/chaosagent.md say
// what was proven where.
package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/realnode"
)

const (
	installNS  = "quartet-system"
	upstreamNS = "quartet-e2e-upstream"
	// extraCAMount is where the manager finds the test CA (SSL_CERT_DIR): the image's own
	// CA bundle plus this one.
	extraCAMount = "/etc/quartet/extra-ca"
	// rateRefresh is the manager's --exchangerate-refresh-interval here (set through the
	// Subscription, as an admin sets any flag under OLM): ExchangeRates without
	// spec.refreshInterval, whose API minimum is a minute, are refreshed this often, so a
	// new publication upstream reaches them within seconds (the default is 6 h).
	rateRefresh = 10 * time.Second
)

var (
	env *realnode.Env
	// ratesURL is the imitation ECB upstream over HTTPS, with a certificate of a test CA.
	ratesURL string
	timings  realnode.Timings
)

// Which tests run in parallel. The tests that call t.Parallel are isolated
// by namespace (their own objects, agents that select only their own namespaces, upstream
// registries on ports of their own, hosts.toml of their own hosts); go test runs them, four
// at a time (`make e2e` passes -parallel $(E2E_PARALLEL); they mostly wait for the node),
// only after every other test of the package has ended. The others stay serial, because they are about the whole node or about time:
//   - TestAlertsFireOnTheManagersMetrics needs a manager that has fetched no rate yet;
//   - TestFaultsOnTheRealNode restarts containerd, the kubelet and the manager;
//   - TestChaosGuardStopsAndRestores counts on a pause being shorter than pods' readiness;
//   - TestMirrorDownFallsBackToTheUpstreamFast measures pull times against a direct pull;
//   - TestMirrorServesWithAReplicaKilledMidPull counts the pulls the kubelet's node-wide
//     pull rate limit refuses;
//   - TestMirrorServesPullsAndOutlivesItsUpstream and TestMirrorNodeAccessOnlyWithTheAdminsGrant
//     require every hosts.toml on the node to be as it was before them, which another
//     mirror's test running beside them changes (the first failed so, 2026-12-06).

func timing(what string, since time.Time) { timings.Add(what, since) }

func record(what string, d time.Duration) { timings.Record(what, d) }

func TestMain(m *testing.M) {
	realnode.Main(m, "e2e", 90*time.Minute, &env, &timings, func(ctx context.Context) error {
		since := time.Now()
		if err := setUp(ctx); err != nil {
			return err
		}
		timing("OLM, catalog, upstreams, Quartet installed by OLM", since)
		since = time.Now()
		var err error
		prom, err = startPrometheus(ctx)
		timing("Prometheus scraping the manager", since)
		return err
	}, func(ctx context.Context) error {
		// After the last test: every dashboard query has series from the run.
		defer prom.stop()
		return checkDashboards(ctx)
	})
}

// setUp installs Quartet with OLM (AllNamespaces) the way an admin would, with the
// Subscription's config pointing the manager at the imitation HTTPS upstream, giving it
// the test CA, and telling it where the node's containerd reads hosts.toml.
func setUp(ctx context.Context) error {
	// The imitation upstream starts beside OLM and the catalog: neither waits for the other.
	upstream := make(chan error, 1)
	go func() { upstream <- startUpstream(ctx) }()
	if err := env.DeployOLM(ctx); err != nil {
		return errors.Join(err, <-upstream)
	}
	if err := env.CreateCatalogSource(ctx, realnode.CatalogName, realnode.CatalogImage); err != nil {
		return errors.Join(err, <-upstream)
	}
	if err := <-upstream; err != nil {
		return err
	}
	config := &operatorsv1alpha1.SubscriptionConfig{
		Env: []corev1.EnvVar{
			{Name: "QUARTET_EXCHANGERATE_URL", Value: ratesURL},
			{Name: "QUARTET_EXCHANGERATE_REFRESH_INTERVAL", Value: rateRefresh.String()},
			{Name: "QUARTET_REGISTRYMIRROR_CONTAINERD_HOSTS_DIR", Value: env.Cluster.Node.CertsDir},
			{Name: "SSL_CERT_DIR", Value: extraCAMount},
		},
		Volumes: []corev1.Volume{{Name: "e2e-ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "e2e-ca"}}}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "e2e-ca", MountPath: extraCAMount, ReadOnly: true}},
	}
	if err := env.Subscribe(ctx, realnode.Install{Namespace: installNS, Config: config}); err != nil {
		return err
	}
	return env.WaitCSVSucceeded(ctx, installNS, realnode.NewCSV, 5*time.Minute)
}

// startUpstream starts the imitation ECB upstream over HTTPS with a test CA's certificate,
// and puts the CA where the manager's Subscription mounts it from.
func startUpstream(ctx context.Context) error {
	for _, ns := range []string{installNS, upstreamNS} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	caPEM, certPEM, keyPEM, err := testCA("fakerates-tls." + upstreamNS + ".svc.cluster.local")
	if err != nil {
		return err
	}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fakerates-tls", Namespace: upstreamNS},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}); err != nil {
		return err
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e2e-ca", Namespace: installNS},
		Data: map[string]string{"e2e-ca.crt": string(caPEM)}}); err != nil {
		return err
	}
	ratesURL, err = env.StartFakeRatesTLS(ctx, upstreamNS, "fakerates-tls")
	return err
}

// testCA makes a CA and a serving certificate for host signed by it (PEM).
func testCA(host string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quartet-e2e-test-ca"},
		NotBefore: now, NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: host}, DNSNames: []string{host}, NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func requireEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("set QUARTET_REAL_NODE=1 to run the end-to-end tests on the real node (make e2e; needs root)")
	}
}

// grantCopies is the consent a CopyratorRule of saNamespace (acting as its default
// ServiceAccount, copyrator) needs before it copies: with no namespace given, the cluster
// admin's one step for "copy everywhere" (`kubectl create clusterrolebinding <name>
// --clusterrole=quartet-copyrator-target --serviceaccount=<saNamespace>:copyrator`), else a
// RoleBinding to the same ClusterRole in each namespace (its owner's consent). The
// ClusterRole is the one the OLM install shipped; the bindings go when the test ends.
func grantCopies(t *testing.T, name, saNamespace string, namespaces ...string) {
	t.Helper()
	objs, err := env.ConsentToCopies(context.Background(), name, saNamespace, copyratorrule.DefaultServiceAccountName, namespaces...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.DeleteAll(context.Background(), objs...) })
}
