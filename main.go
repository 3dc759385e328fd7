// Command manager runs Quartet: four day-2 controllers (ChaosAgent, CopyratorRule,
// ExchangeRate, RegistryMirror) in one controller-runtime manager. The same binary, in
// the same image, is the RegistryMirror's node agent (`manager node-agent`) and its
// registry's credential helper (run as docker-credential-quartet, installed into the
// registry pod by `manager install-credential-helper <dir>`).
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	quartetapi "github.com/quartet-operator/quartet/api"
	"github.com/quartet-operator/quartet/controllers/chaosagent"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/controllers/exchangerate"
	"github.com/quartet-operator/quartet/controllers/registrymirror"
	"github.com/quartet-operator/quartet/controllers/registrymirror/nodeagent"
	"github.com/quartet-operator/quartet/internal/operator"
	"github.com/quartet-operator/quartet/internal/registrycreds"
)

// Every controller records Events; each controller package declares the rest of its own
// permissions next to its code.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// The metrics endpoint authenticates callers with TokenReviews and authorizes them with
// SubjectAccessReviews (filters.WithAuthenticationAndAuthorization).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(quartetapi.AddToScheme(scheme))
}

// allControllers are the controllers --controllers may name, in start order.
var allControllers = []string{"chaosagent", "copyratorrule", "exchangerate", "registrymirror"}

func main() {
	// The same binary is the RegistryMirror's credential helper (run by the registry under
	// that name) and installs itself as one (the registry pod's init container).
	if registrycreds.IsHelper(os.Args[0]) {
		registrycreds.Main()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == nodeagent.Subcommand {
		os.Exit(nodeagent.Main(ctrl.SetupSignalHandler(), os.Args[2:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "install-credential-helper" {
		dest, err := registrycreds.Install(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "install-credential-helper:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stdout, "Installed the registry credential helper at", dest)
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr, probeAddr string
		metricsSecure          bool
		metricsCertDir         string
		enableHTTP2            bool
		leaderElect            bool
		leaderElectionNS       string
		qps                    float64
		burst                  int
		controllers            string
		leaseDuration          time.Duration
		renewDeadline          time.Duration
		retryPeriod            time.Duration
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Address the Prometheus metrics endpoint binds to (:8443 for HTTPS, :8080 for HTTP); 0 disables it.")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, only to callers whose token may get /metrics (TokenReview + SubjectAccessReview); false serves plain HTTP to anyone.")
	flag.StringVar(&metricsCertDir, "metrics-cert-dir", "", "Folder with tls.crt and tls.key for the metrics endpoint; empty: a self-signed certificate generated at start.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the metrics endpoint (off: HTTP/2 Rapid Reset and Stream Cancellation, CVE-2023-44487 and CVE-2023-39325).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so only one of several replicas acts.")
	flag.StringVar(&leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the manager's own).")
	flag.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits after the last renewal before taking over.")
	flag.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew before giving up leadership.")
	flag.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often leader election is attempted.")
	flag.Float64Var(&qps, "kube-api-qps", operator.DefaultKubeAPIQPS, "Client-side rate limit of requests to the API server, per second; negative: no client-side limit (the API server's Priority and Fairness governs).")
	flag.IntVar(&burst, "kube-api-burst", operator.DefaultKubeAPIBurst, "Client-side burst of requests to the API server (with a positive --kube-api-qps).")
	flag.StringVar(&controllers, "controllers", strings.Join(allControllers, ","), "Comma-separated controllers to run.")

	var (
		chaosOpts  chaosagent.Options
		copyOpts   copyratorrule.Options
		rateOpts   exchangerate.Options
		mirrorOpts registrymirror.Options
	)
	chaosOpts.BindFlags(flag.CommandLine)
	copyOpts.BindFlags(flag.CommandLine)
	rateOpts.BindFlags(flag.CommandLine)
	mirrorOpts.BindFlags(flag.CommandLine)

	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	// Flags the command line leaves unset come from QUARTET_<FLAG> (a Subscription's
	// spec.config.env under OLM).
	if err := operator.SetFlagsFromEnv(flag.CommandLine, nil); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	enabled := operator.ParseNamespaces(controllers)
	for _, c := range enabled {
		if !slices.Contains(allControllers, c) {
			return fmt.Errorf("--controllers: unknown controller %q (known: %s)", c, strings.Join(allControllers, ", "))
		}
	}
	shared := operator.Shared{
		WatchNamespaces:   operator.ParseNamespaces(os.Getenv("WATCH_NAMESPACE")),
		OperatorNamespace: operator.OwnNamespace(),
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	operator.SetClientLimits(cfg, qps, burst)
	cfg.UserAgent = "quartet"

	opts := operator.ManagerOptions(scheme, shared)
	opts.Metrics = metricsserver.Options{BindAddress: metricsAddr, SecureServing: metricsSecure, CertDir: metricsCertDir}
	if metricsSecure {
		opts.Metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if !enableHTTP2 {
		opts.Metrics.TLSOpts = append(opts.Metrics.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	opts.HealthProbeBindAddress = probeAddr
	opts.LeaderElection = leaderElect
	opts.LeaderElectionID = "quartet.quartet.dev"
	opts.LeaderElectionNamespace = leaderElectionNS
	// The manager exits right after losing its lease, so a new leader can start sooner.
	opts.LeaderElectionReleaseOnCancel = true
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &leaseDuration, &renewDeadline, &retryPeriod
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	setups := map[string]func() error{
		"chaosagent":     func() error { return chaosOpts.Setup(mgr, shared) },
		"copyratorrule":  func() error { return copyOpts.Setup(mgr, shared) },
		"exchangerate":   func() error { return rateOpts.Setup(mgr, shared) },
		"registrymirror": func() error { return mirrorOpts.Setup(mgr, shared) },
	}
	for _, name := range allControllers {
		if !slices.Contains(enabled, name) {
			continue
		}
		if err := setups[name](); err != nil {
			return fmt.Errorf("setting up controller %s: %w", name, err)
		}
		log.Info("Registered controller", "controller", name)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("Starting manager", "watchNamespaces", shared.WatchNamespaces, "operatorNamespace", shared.OperatorNamespace)
	return mgr.Start(ctrl.SetupSignalHandler())
}
