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
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	quartetapi "github.com/quartet-operator/quartet/api"
	"github.com/quartet-operator/quartet/cmd/nodeagent"
	"github.com/quartet-operator/quartet/controllers/chaosagent"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/controllers/exchangerate"
	"github.com/quartet-operator/quartet/controllers/registrymirror"
	"github.com/quartet-operator/quartet/internal/manager"
	"github.com/quartet-operator/quartet/internal/registrycreds"
	"github.com/quartet-operator/quartet/internal/scope"
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

// managerFlags are the manager's own flags; each controller binds its own (Options.BindFlags).
type managerFlags struct {
	metricsAddr, metricsCertDir, probeAddr, leaderElectionNS, controllers string
	metricsSecure, enableHTTP2, leaderElect                               bool
	qps                                                                   float64
	burst                                                                 int
	leaseDuration, renewDeadline, retryPeriod                             time.Duration
}

func (f *managerFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "Address the Prometheus metrics endpoint binds to (:8443 for HTTPS, :8080 for HTTP); 0 disables it.")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, only to callers whose token may get /metrics (TokenReview + SubjectAccessReview); false serves plain HTTP to anyone.")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "Folder with tls.crt and tls.key for the metrics endpoint; empty: a self-signed certificate generated at start.")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false, "Allow HTTP/2 on the metrics endpoint (off: HTTP/2 Rapid Reset and Stream Cancellation, CVE-2023-44487 and CVE-2023-39325).")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader so only one of several replicas acts.")
	fs.StringVar(&f.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the manager's own).")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a non-leader waits after the last renewal before taking over.")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew before giving up leadership.")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often leader election is attempted.")
	fs.Float64Var(&f.qps, "kube-api-qps", manager.DefaultKubeAPIQPS, "Client-side rate limit of requests to the API server, per second; negative: no client-side limit (the API server's Priority and Fairness governs).")
	fs.IntVar(&f.burst, "kube-api-burst", manager.DefaultKubeAPIBurst, "Client-side burst of requests to the API server (with a positive --kube-api-qps).")
	fs.StringVar(&f.controllers, "controllers", strings.Join(allControllers, ","), "Comma-separated controllers to run.")
}

func run() error {
	var (
		f          managerFlags
		chaosOpts  chaosagent.Options
		copyOpts   copyratorrule.Options
		rateOpts   exchangerate.Options
		mirrorOpts registrymirror.Options
		zapOpts    zap.Options
	)
	f.bind(flag.CommandLine)
	chaosOpts.BindFlags(flag.CommandLine)
	copyOpts.BindFlags(flag.CommandLine)
	rateOpts.BindFlags(flag.CommandLine)
	mirrorOpts.BindFlags(flag.CommandLine)
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	// Flags the command line leaves unset come from QUARTET_<FLAG> (a Subscription's
	// spec.config.env under OLM).
	if err := manager.SetFlagsFromEnv(flag.CommandLine, nil); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	enabled := scope.ParseList(f.controllers)
	for _, c := range enabled {
		if !slices.Contains(allControllers, c) {
			return fmt.Errorf("--controllers: unknown controller %q (known: %s)", c, strings.Join(allControllers, ", "))
		}
	}
	ns := scope.Namespaces{Watched: scope.ParseList(os.Getenv("WATCH_NAMESPACE")), Operator: scope.OperatorNamespace()}
	mgr, err := newManager(f, ns, slices.Contains(enabled, "chaosagent"))
	if err != nil {
		return err
	}
	setups := map[string]func() error{
		"chaosagent":     func() error { return chaosOpts.Setup(mgr, ns) },
		"copyratorrule":  func() error { return copyOpts.Setup(mgr, ns) },
		"exchangerate":   func() error { return rateOpts.Setup(mgr, ns) },
		"registrymirror": func() error { return mirrorOpts.Setup(mgr, ns) },
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
	log.Info("Starting manager", "watchNamespaces", ns.Watched, "operatorNamespace", ns.Operator)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newManager makes the manager the flags ask for: manager.Options (with ChaosAgent's cache
// options, transforms and a pod field selector, when it runs), metrics, probes and leader election.
func newManager(f managerFlags, ns scope.Namespaces, chaos bool) (ctrl.Manager, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	manager.SetClientLimits(cfg, f.qps, f.burst)
	cfg.UserAgent = "quartet"

	var byObject []map[client.Object]cache.ByObject
	if chaos {
		byObject = append(byObject, chaosagent.CacheOptions())
	}
	opts := manager.Options(scheme, ns, byObject...)
	opts.Metrics = metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.metricsSecure, CertDir: f.metricsCertDir}
	if f.metricsSecure {
		opts.Metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if !f.enableHTTP2 {
		opts.Metrics.TLSOpts = append(opts.Metrics.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	opts.HealthProbeBindAddress = f.probeAddr
	opts.LeaderElection = f.leaderElect
	opts.LeaderElectionID = "quartet.quartet.dev"
	opts.LeaderElectionNamespace = f.leaderElectionNS
	// The manager exits right after losing its lease, so a new leader can start sooner.
	opts.LeaderElectionReleaseOnCancel = true
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &f.leaseDuration, &f.renewDeadline, &f.retryPeriod
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}
