package exchangerate

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// Options are the manager flags of the exchangerate controller. Tests set the fields
// directly, including the unexported-by-flag ones (Clock, Random, HTTPClient).
type Options struct {
	// MaxConcurrentReconciles is the number of parallel workers.
	MaxConcurrentReconciles int
	// Source is the upstream: ecb (default) or frankfurter.
	Source string
	// URL replaces the source's public base URL (an internal mirror serving the same paths).
	URL string
	// RefreshInterval is the refresh period of ExchangeRates without spec.refreshInterval.
	RefreshInterval time.Duration
	// StaleAfterDays is how old (in days) a publication may be before Stale=True.
	StaleAfterDays int
	// FetchTimeout bounds one upstream request.
	FetchTimeout time.Duration
	// BackoffBase and BackoffMax shape the retry wait after failed fetches.
	BackoffBase, BackoffMax time.Duration

	// Clock, Random and HTTPClient default to the real ones; tests inject their own.
	Clock      clock.PassiveClock
	Random     func() float64
	HTTPClient *http.Client
}

// BindFlags registers the controller's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.MaxConcurrentReconciles, "exchangerate-workers", 2, "Parallel workers of the exchangerate controller.")
	fs.StringVar(&o.Source, "exchangerate-source", SourceECB, "Exchange rate source: ecb (ECB euro reference rates, XML) or frankfurter (Frankfurter JSON API).")
	fs.StringVar(&o.URL, "exchangerate-url", "", "Base URL of the exchange rate source, for an internal mirror serving the same paths "+
		"(default "+DefaultECBURL+" for ecb, "+DefaultFrankfurterURL+" for frankfurter).")
	fs.DurationVar(&o.RefreshInterval, "exchangerate-refresh-interval", time.Hour, "Refresh period of ExchangeRates that set no spec.refreshInterval.")
	fs.IntVar(&o.StaleAfterDays, "exchangerate-stale-after-days", 5, "Days a publication may be old before ExchangeRates turn Stale "+
		"(the ECB publishes on TARGET working days; 5 covers the Easter weekend).")
	fs.DurationVar(&o.FetchTimeout, "exchangerate-fetch-timeout", 30*time.Second, "Time limit of one upstream request.")
	fs.DurationVar(&o.BackoffBase, "exchangerate-backoff-base", 30*time.Second, "Wait before the first retry after a failed fetch; doubles per failure.")
	fs.DurationVar(&o.BackoffMax, "exchangerate-backoff-max", 30*time.Minute, "Longest wait between retries after failed fetches.")
}

// defaults fills what neither flags nor the caller set, so a zero Options works too.
func (o *Options) defaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 2
	}
	if o.Source == "" {
		o.Source = SourceECB
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = time.Hour
	}
	if o.StaleAfterDays == 0 {
		o.StaleAfterDays = 5
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = 30 * time.Second
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = 30 * time.Second
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = 30 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Random == nil {
		o.Random = rand.Float64
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
}

func (o *Options) validate() error {
	var errs []error
	if o.RefreshInterval < 0 {
		errs = append(errs, fmt.Errorf("--exchangerate-refresh-interval must be positive, got %s", o.RefreshInterval))
	}
	if o.StaleAfterDays < 0 {
		errs = append(errs, fmt.Errorf("--exchangerate-stale-after-days must be positive, got %d", o.StaleAfterDays))
	}
	if o.FetchTimeout < 0 {
		errs = append(errs, fmt.Errorf("--exchangerate-fetch-timeout must be positive, got %s", o.FetchTimeout))
	}
	if o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase {
		errs = append(errs, fmt.Errorf("--exchangerate-backoff-base (%s) must be positive and at most --exchangerate-backoff-max (%s)", o.BackoffBase, o.BackoffMax))
	}
	return errors.Join(errs...)
}

// Setup registers the controller with the manager.
func (o *Options) Setup(mgr ctrl.Manager, shared operator.Shared) error {
	o.defaults()
	if err := o.validate(); err != nil {
		return err
	}
	src, err := NewSource(o.Source, o.URL, o.HTTPClient)
	if err != nil {
		return err
	}

	// A cache of our own for ConfigMaps, selected by our label: the manager's cache would
	// hold every ConfigMap of the cluster. It keeps managedFields (small for five keys):
	// they tell our own writes from other people's edits.
	cmCacheOpts := cache.Options{
		Scheme:     mgr.GetScheme(),
		Mapper:     mgr.GetRESTMapper(),
		HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue})},
		},
	}
	if len(shared.WatchNamespaces) > 0 {
		cmCacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range shared.WatchNamespaces {
			cmCacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	cmCache, err := cache.New(mgr.GetConfig(), cmCacheOpts)
	if err != nil {
		return fmt.Errorf("creating ConfigMap cache: %w", err)
	}
	if err := mgr.Add(cmCache); err != nil {
		return err
	}

	r := &Reconciler{
		Client:          mgr.GetClient(),
		ConfigMaps:      cmCache,
		APIReader:       mgr.GetAPIReader(),
		Rates:           NewRateCache(src, o.Clock, Backoff{Base: o.BackoffBase, Max: o.BackoffMax}, o.FetchTimeout),
		Recorder:        mgr.GetEventRecorder("exchangerate-controller"),
		Clock:           o.Clock,
		Random:          o.Random,
		DefaultInterval: o.RefreshInterval,
		StaleAfterDays:  o.StaleAfterDays,
		Shared:          shared,
	}
	watched := predicate.NewPredicateFuncs(func(obj client.Object) bool { return shared.Watches(obj.GetNamespace()) })
	ctrl.Log.WithName("exchangerate").Info("Using exchange rate source", "source", src.Name(), "url", sourceURL(src))
	return ctrl.NewControllerManagedBy(mgr).
		Named("exchangerate").
		// Status writes do not change the generation, so our own writes do not wake us.
		For(&operatorsv1.ExchangeRate{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, watched)).
		// ConfigMap events wake the owner when someone else edits or deletes its ConfigMap;
		// the echo of our own writes does not.
		WatchesRawSource(source.Kind(cmCache, &corev1.ConfigMap{},
			handler.TypedEnqueueRequestForOwner[*corev1.ConfigMap](mgr.GetScheme(), mgr.GetRESTMapper(), &operatorsv1.ExchangeRate{}, handler.OnlyControllerOwner()),
			notOurWrite)).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.MaxConcurrentReconciles}).
		Complete(r)
}

func sourceURL(s Source) string {
	if h, ok := s.(*httpSource); ok {
		return h.URL()
	}
	return ""
}
