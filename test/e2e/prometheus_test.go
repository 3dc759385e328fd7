package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/test/alerts"
	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/realnode"
)

// promAddr is where the package's Prometheus listens, on the node's address inside the
// cluster's network namespace (nothing outside can reach it).
var promAddr = localcluster.RealNodeIP + ":19090"

// prom is the package's Prometheus: it scrapes the in-cluster manager from setUp to the
// end of the run, evaluates Quartet's alerting rules (TestAlertsFireOnTheManagersMetrics)
// and answers the dashboards' queries after the last test (checkDashboards).
var prom *prometheus

type prometheus struct {
	client *http.Client
	// since is when it started scraping: the dashboards' queries cover since..end.
	since time.Time
	stop  func()
}

// startPrometheus runs Prometheus inside the node's network namespace, scraping the
// manager's metrics Service (HTTPS, a token bound to quartet-metrics-reader, as an admin's
// Prometheus would; the Service outlives the manager pod that TestFaultsOnTheRealNode
// restarts) every 2 s and evaluating Quartet's alerting rules every 2 s, and waits until the
// scrape succeeds.
func startPrometheus(ctx context.Context) (p *prometheus, err error) {
	bin := os.Getenv("PROMETHEUS")
	if bin == "" {
		return nil, errors.New("PROMETHEUS names the Prometheus server binary (make e2e builds it)")
	}
	var cleanups []func()
	stop := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	// A scraper's identity, allowed /metrics and nothing else.
	const sa = "e2e-prometheus"
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: upstreamNS}}); err != nil {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-prometheus-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quartet-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: upstreamNS}}}
	if err := env.Client.Create(ctx, binding); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { _ = env.Client.Delete(context.Background(), binding) })
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](4 * 3600)}}
	if err := env.Client.SubResource("token").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: upstreamNS}}, tr); err != nil {
		return nil, err
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "quartet-controller-manager-metrics-service"}, svc); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp(env.Dir, "prometheus-")
	if err != nil {
		return nil, err
	}
	rules, err := alerts.ReadRules(env.Root)
	if err == nil {
		err = alerts.WriteRuleFile(rules, filepath.Join(dir, "rules.yaml"))
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "token"), []byte(tr.Status.Token), 0o600)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(fmt.Sprintf(`global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [%q]
scrape_configs:
- job_name: quartet
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: %q}
  static_configs:
  - targets: [%q]
    labels: {namespace: %q}
`, filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "token"), svc.Spec.ClusterIP+":8443", installNS)), 0o600)
	}
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(env.Dir, "logs", "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { _ = logf.Close() })
	cmd := env.Cluster.NodeCommand(context.Background(), bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	cleanups = append(cleanups, func() { _ = cmd.Process.Kill(); <-exited })

	transport, err := env.Cluster.RegistryTransport()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	since := time.Now()
	err = realnode.WaitFor(ctx, "Prometheus scraping the manager", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			return false, "", realnode.Failed{Reason: "prometheus exited: " + string(b)}
		default:
		}
		var targets struct {
			Data struct {
				ActiveTargets []struct {
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := promGet(hc, "/api/v1/targets", &targets); err != nil {
			return false, err.Error(), nil
		}
		if len(targets.Data.ActiveTargets) != 1 {
			return false, fmt.Sprintf("%+v", targets.Data), nil
		}
		tg := targets.Data.ActiveTargets[0]
		return tg.Health == "up", tg.Health + " " + tg.LastError, nil
	})
	if err != nil {
		return nil, err
	}
	return &prometheus{client: hc, since: since, stop: stop}, nil
}

func promGet(hc *http.Client, path string, into any) error {
	resp, err := hc.Get("http://" + promAddr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	return json.Unmarshal(b, into)
}
