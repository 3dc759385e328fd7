// Command manager runs Quartet: four day-2 controllers (ChaosAgent, CopyratorRule,
// ExchangeRate, RegistryMirror) in one controller-runtime manager. The same binary, in
// the same image, is the RegistryMirror's node agent (`manager node-agent`) and its
// registry's credential helper (run as docker-credential-quartet, installed into the
// registry pod by `manager install-credential-helper <dir>`).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	blackadderv1alpha1 "github.com/quartet-operator/quartet/api/blackadder/v1alpha1"
	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
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
// SubjectAccessReviews (metricsAuthFilter).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(blackadderv1alpha1.AddToScheme(scheme))
	utilruntime.Must(blackadderv1beta1.AddToScheme(scheme))
	utilruntime.Must(flantv1.AddToScheme(scheme))
	utilruntime.Must(operatorsv1.AddToScheme(scheme))
	utilruntime.Must(mirrorsv1alpha1.AddToScheme(scheme))
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
		fmt.Println("Installed the registry credential helper at", dest)
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
		opts.Metrics.FilterProvider = metricsAuthFilter
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

// metricsAuthFilter guards the metrics endpoint under --metrics-secure: a caller sends a
// bearer token the API server accepts (a TokenReview) and must be allowed to use the HTTP
// method on the path (a SubjectAccessReview of a non-resource URL, like `get /metrics`).
//
// It does what controller-runtime's filters.WithAuthenticationAndAuthorization does, with the
// same status codes and cache lifetimes (token reviews 1 minute, allowed 5 minutes, denied
// 30 seconds), but without that package's dependency on k8s.io/apiserver: it linked CEL,
// OpenTelemetry, gRPC and the API server's authentication stack into the manager, 28 MB of
// the 64 MB binary, and the package initialisation of all that code kept about 19 MB of it
// resident even with metrics off (BenchmarkManagerIdle, docs/PERFORMANCE.md).
func metricsAuthFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	a := &metricsAuth{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), now: time.Now}
	return a.filter, nil
}

const (
	metricsTokenTTL = time.Minute
	metricsAllowTTL = 5 * time.Minute
	metricsDenyTTL  = 30 * time.Second
	// metricsReviewTimeout bounds one TokenReview or SubjectAccessReview.
	metricsReviewTimeout = 10 * time.Second
	// metricsCacheSize bounds each cache; scrapers are few, so a full cache is rare and is
	// simply emptied.
	metricsCacheSize = 1024
)

// metricsAuth is the state of metricsAuthFilter: the review clients and the caches of
// their answers.
type metricsAuth struct {
	tokens   authenticationv1client.TokenReviewInterface
	access   authorizationv1client.SubjectAccessReviewInterface
	now      func() time.Time
	users    ttlCache[[sha256.Size]byte, authenticationv1.TokenReviewStatus]
	verdicts ttlCache[string, authorizationv1.SubjectAccessReviewStatus]
}

func (a *metricsAuth) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, ok, err := a.authenticate(req)
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !ok {
			log.V(4).Info("Authentication failed")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verdict, err := a.authorize(req.Context(), user, strings.ToLower(req.Method), req.URL.Path)
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", user.Username)
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !verdict.Allowed || verdict.Denied {
			msg := fmt.Sprintf("Authorization denied for user %s", user.Username)
			log.V(4).Info(msg, "reason", verdict.Reason)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// authenticate reviews the request's bearer token (`Authorization: Bearer <token>`).
func (a *metricsAuth) authenticate(req *http.Request) (authenticationv1.UserInfo, bool, error) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token, _, _ = strings.Cut(token, " ")
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return authenticationv1.UserInfo{}, false, nil
	}
	// The cache keeps a hash of the token, never the token.
	key := sha256.Sum256([]byte(token))
	status, ok := a.users.get(key, a.now())
	if !ok {
		ctx, cancel := context.WithTimeout(req.Context(), metricsReviewTimeout)
		defer cancel()
		review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, false, err
		}
		status = review.Status
		a.users.put(key, status, a.now(), metricsTokenTTL)
	}
	if !status.Authenticated {
		return authenticationv1.UserInfo{}, false, nil
	}
	user := status.User
	if !slices.Contains(user.Groups, "system:authenticated") {
		user.Groups = append(slices.Clip(user.Groups), "system:authenticated")
	}
	return user, true, nil
}

// authorize asks whether user may use verb on the non-resource URL path.
func (a *metricsAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (authorizationv1.SubjectAccessReviewStatus, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	key, err := json.Marshal(spec)
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	if status, ok := a.verdicts.get(string(key), a.now()); ok {
		return status, nil
	}
	ctx, cancel := context.WithTimeout(ctx, metricsReviewTimeout)
	defer cancel()
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	ttl := metricsDenyTTL
	if review.Status.Allowed && !review.Status.Denied {
		ttl = metricsAllowTTL
	}
	a.verdicts.put(string(key), review.Status, a.now(), ttl)
	return review.Status, nil
}

// ttlCache is a small map whose entries expire.
type ttlCache[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func (c *ttlCache[K, V]) get(key K, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put adds an entry that expires ttl after now, first dropping the expired entries when
// the cache is full, and all of them when it is still full.
func (c *ttlCache[K, V]) put(key K, value V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[K]ttlEntry[V]{}
	}
	if len(c.entries) >= metricsCacheSize {
		maps.DeleteFunc(c.entries, func(_ K, e ttlEntry[V]) bool { return !now.Before(e.expires) })
		if len(c.entries) >= metricsCacheSize {
			clear(c.entries)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(ttl)}
}
