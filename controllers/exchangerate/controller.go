// Package exchangerate keeps currency exchange rates in ConfigMaps. Each ExchangeRate
// gets a ConfigMap of its own name holding rate, base, currency, date and source (or one
// key per currency of spec.currencies); all ExchangeRates read one shared, conditionally
// refreshed table per source, so each upstream sees one request per refresh however many
// ExchangeRates exist. With several sources the rate is the first fresh source's and the
// others cross-check it.
package exchangerate

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates,verbs=get;list;watch
// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates/status,verbs=patch
// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch

// Reconciler keeps one ExchangeRate's ConfigMap and status.
//
// # In-memory state
//
// What the controller keeps in process memory from one pass to the next (docs/STYLE.md, "In-memory
// state"); everything else a pass reads from the API server or a cache of it. A restart or a change
// of leader loses all of it; the fifth column says what that costs and how the next passes recover.
// A new piece of such memory needs a row here.
//
//	memory             | holds                      | written by             | read by                  | restart, leader change           | protects
//	-------------------+----------------------------+------------------------+--------------------------+----------------------------------+-----------------------
//	Sources            | one RateCache per source   | NewSources (the        | For, in every pass       | lost; the defaults are built     | work: one shared table
//	(*Sources): caches | (type and provider) that   | defaults); For, the    |                          | again at start, other sources    | per source; the limit
//	                   | the defaults or any spec   | first time a spec      |                          | when the first passes name them  | on upstreams
//	                   | named, at most             | names a source (it     |                          |                                  |
//	                   | --exchangerate-max-sources | drops one nobody names |                          |                                  |
//	                   |                            | when at the limit)     |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	Sources: names     | which sources each         | For (each pass), and   | For, to find a source    | lost; rebuilt as each            | the limit: a source
//	                   | ExchangeRate's last pass   | Forget (ExchangeRate   | nobody names when a new  | ExchangeRate's pass runs again   | named once never holds
//	                   | named                      | gone)                  | one needs its place      | (all do at start)                | its place for ever
//	                   |                            |                        |                          |                                  |
//	RateCache: table,  | a source's last good table | fetch, through Get:    | Get and Snapshot, for    | lost; the first pass that names  | work: one upstream
//	checkedAt,         | with its validators (ETag, | one flight             | fetchSources: priceSpec, | the source fetches it            | request per source and
//	fetchedAt          | Last-Modified), when the   | (singleflight) per     | computeStatus            | unconditionally (a 200, not a    | refresh; correctness:
//	                   | source last confirmed it   | source, whichever pass | (lastSuccessfulFetch),   | 304). Until a table comes no     | fetch never steps back
//	                   | and when it sent it        | asks first             | nextRefresh (dueAt);     | ConfigMap is written: the        | to an older
//	                   |                            |                        | fetch (the validators,   | ConfigMap and status.rate keep   | publication, within
//	                   |                            |                        | and the guard against an | the last rate, and Ready says no | one process only
//	                   |                            |                        | older publication)       | rate yet. The guard against      |
//	                   |                            |                        |                          | stepping back to an older        |
//	                   |                            |                        |                          | publication has nothing to       |
//	                   |                            |                        |                          | compare with; heldQuote compares |
//	                   |                            |                        |                          | with the ConfigMap's date and    |
//	                   |                            |                        |                          | keeps the newer rate             |
//	                   |                            |                        |                          |                                  |
//	RateCache: retry,  | a failing source's         | fetch                  | Get (no request before   | lost; the first pass asks a      | work: bounds the
//	lastErr, retryAt,  | backoff: the last error,   |                        | retryAt); Snapshot, for  | failing upstream at once and the | requests to a failing
//	attempts           | when the next attempt is   |                        | computeStatus (Degraded) | backoff starts again from        | upstream
//	                   | allowed, the failures'     |                        | and nextRefresh          | --exchangerate-backoff-base      |
//	                   | schedule                   |                        |                          |                                  |
//	                   | (exponentialBackoff)       |                        |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	ConfigMaps (the    | the ConfigMaps labelled    | its informer (a        | applyConfigMap; the      | rebuilt from a fresh list; the   | correctness: what each
//	controller's       | managed-by (with           | manager Runnable,      | ConfigMap watch          | workers start after the watch of | ConfigMap holds and
//	ConfigMap cache)   | managedFields) in the      | Setup)                 | (notOurWrite, wakes the  | it has synced                    | who controls it;
//	                   | watched namespaces         |                        | owner)                   |                                  | re-derived from the
//	                   |                            |                        |                          |                                  | API server
//
// Not in the table: the ExchangeRates in the manager's shared cache; the Prometheus series
// (forgetExchangeRate, recordFetch, recordSuccess); the work queue's timers (nextRefresh), which
// every pass sets again (after a start, the ExchangeRates' first list wakes each); the upstream
// HTTP client's connections; configuration (DefaultInterval, StaleAfterDays, Shared, Clock,
// Rand).
type Reconciler struct {
	// Client reads ExchangeRates from the manager's cache and writes ConfigMaps and status.
	Client client.Client
	// APIReader reads past the caches, to look at a ConfigMap our cache does not hold.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Rand returns a number in [0, 1) for requeue jitter.
	Rand   func() float64
	Shared operator.Shared
	// ConfigMaps reads our labelled ConfigMaps from the controller's own cache.
	ConfigMaps client.Reader
	// Sources are the shared tables of the upstreams, one per source.
	Sources         *Sources
	DefaultInterval time.Duration
	StaleAfterDays  int
}

// Reconcile prices the ExchangeRate from the shared table, writes its ConfigMap and
// status, and schedules the next refresh.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	xr := &operatorsv1.ExchangeRate{}
	if err := r.Client.Get(ctx, req.NamespacedName, xr); err != nil {
		if apierrors.IsNotFound(err) {
			forgetExchangeRate(req.NamespacedName)
			r.Sources.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The ConfigMap carries a controller reference, so the garbage collector deletes it
	// with the ExchangeRate: there is nothing to clean up and no finalizer to hold.
	if !xr.DeletionTimestamp.IsZero() || !r.Shared.Watches(xr.Namespace) {
		forgetExchangeRate(req.NamespacedName)
		r.Sources.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	// o is what this pass learns; the phases below return their parts of it, and the
	// deferred function turns it into the status, written once and only when it changed.
	o := outcome{Generation: xr.Generation, ConfigMapName: xr.Name, StaleAfterDays: r.StaleAfterDays}
	defer func() {
		status := computeStatus(xr.Status, o)
		recordStale(req.NamespacedName, meta.IsStatusConditionTrue(status.Conditions, operatorsv1.ConditionStale))
		r.recordTransitions(xr, status, o)
		if err := r.writeStatus(ctx, xr, o); err != nil {
			result, reterr = ctrl.Result{}, kerrors.NewAggregate([]error{reterr, err})
			return
		}
		if reterr == nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Reconciled ExchangeRate", "rate", status.Rate, "date", status.PublicationDate,
				"source", status.Source, "requeueAfter", result.RequeueAfter)
		}
	}()

	interval := refreshInterval(xr.Spec, r.DefaultInterval)
	caches, err := r.Sources.For(req.NamespacedName, xr.Spec.Sources)
	if err != nil {
		// Beyond the manager's limit: the user's to resolve (Ready=False says how), or a
		// place frees when the sources nobody names any more are needed: tried again at
		// the refresh interval, not as an error.
		o.Now, o.SourcesErr = r.Clock.Now(), err
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	o.Sources = fetchSources(ctx, caches, interval)
	o.Now = r.Clock.Now()
	o.Pricing, o.Tolerance = priceSpec(o.Sources, xr.Spec, o.Now, r.StaleAfterDays), toleranceOf(xr.Spec)
	o.Quote, o.QuoteErr, o.ConfigMapErr = r.reconcileConfigMap(ctx, xr, o.Pricing)
	// A conflict is the user's to resolve (Ready=False says how): no error retry; the next
	// refresh looks again.
	if o.ConfigMapErr != nil && !errors.Is(o.ConfigMapErr, errConfigMapConflict) {
		return ctrl.Result{}, fmt.Errorf("writing ConfigMap %s: %w", xr.Name, o.ConfigMapErr)
	}
	return ctrl.Result{RequeueAfter: nextRefresh(o, interval, r.Rand)}, nil
}

// fetchSources asks each source's shared cache for its table, which fetches it when it is
// due: one upstream request per source per refresh, whichever ExchangeRate asks first.
func fetchSources(ctx context.Context, caches []*RateCache, interval time.Duration) []sourceAnswer {
	out := make([]sourceAnswer, len(caches))
	for i, c := range caches {
		out[i] = sourceAnswer{Name: c.Name(), Schedule: c.Schedule(), Snapshot: c.Get(ctx, interval)}
	}
	return out
}

// heldBack returns the quote the ConfigMap holds when q is an older publication of the
// same source (heldQuote), with a Warning Event, and nil otherwise.
func (r *Reconciler) heldBack(ctx context.Context, xr *operatorsv1.ExchangeRate, q *Quote) *Quote {
	existing := &corev1.ConfigMap{}
	if err := r.ConfigMaps.Get(ctx, client.ObjectKey{Namespace: xr.Namespace, Name: xr.Name}, existing); err != nil {
		return nil // not there yet, or not ours: applyConfigMap finds out
	}
	held := heldQuote(existing, xr, q)
	if held != nil {
		ctrl.LoggerFrom(ctx).Info("Kept the ConfigMap's newer publication", "source", q.Source, "answered", q.Date, "kept", held.Date)
		r.Recorder.Eventf(xr, existing, corev1.EventTypeWarning, EventOlderPublication, "Fetch",
			"%s answered with rates published %s, older than the %s ones ConfigMap %s holds: kept them", q.Source, q.Date,
			held.Date, existing.Name)
	}
	return held
}

// reconcileConfigMap writes the quote the pricing chose to the ConfigMap. It returns the
// quote the ConfigMap now holds (nil when none was written), why no source prices the spec
// (an unpricedError; nil while a source has no table yet), and why the ConfigMap could not
// be written (errConfigMapConflict or an API error).
func (r *Reconciler) reconcileConfigMap(ctx context.Context, xr *operatorsv1.ExchangeRate, p pricing) (written *Quote, quoteErr, writeErr error) {
	if p.Chosen < 0 {
		return nil, p.Err, nil
	}
	quote := p.Quotes[p.Chosen]
	if held := r.heldBack(ctx, xr, quote); held != nil {
		quote = held
	}
	desired := desiredConfigMap(xr, *quote)
	action, err := r.applyConfigMap(ctx, xr, desired)
	if err != nil {
		return nil, nil, err
	}
	r.recordConfigMapWrite(xr, desired, action)
	return quote, nil, nil
}
