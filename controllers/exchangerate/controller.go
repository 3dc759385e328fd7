// Package exchangerate keeps exchange rates in ConfigMaps, one per ExchangeRate, from one
// shared table per source: one upstream request per refresh however many ExchangeRates.
package exchangerate

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
)

// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates,verbs=get;list;watch
// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates/status,verbs=patch
// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch

// Reconciler keeps one ExchangeRate's ConfigMap and status.
//
// # In-memory state
//
// What a later pass reads besides the API server and the manager's cache (docs/STYLE.md):
//
//	memory     | holds                               | written / read by                   | restart, leader change          | protects
//	-----------+-------------------------------------+-------------------------------------+---------------------------------+--------------------------------------
//	Sources    | a RateCache per source named (at    | For (at the limit drops a source    | lost; rebuilt as passes name    | work: one table per source for all
//	           | most --exchangerate-max-sources);   | nobody names), Forget / For, each   | the sources again               | ExchangeRates (see RateCache); the
//	           | the sources each ExchangeRate named | pass                                |                                 | source limit
//	RateCache  | a source's last good table, its     | fetch, one flight per source / Get: | lost; the first pass asks       | work: 1 upstream request per refresh
//	           | check and fetch times, last error,  | priceSpec, computeStatus,           | unconditionally; heldQuote      | for 1,000 ExchangeRates (Benchmark-
//	           | backoff and next attempt            | nextRefresh                         | re-derives the guard            | ExchangeRates1000); correctness: never
//	           |                                     |                                     |                                 | an older publication
//	ConfigMaps | our labelled ConfigMaps, with       | its informer / applyConfigMap,      | rebuilt from a fresh list       | correctness: what a ConfigMap holds,
//	(cache)    | managedFields                       | heldQuote, the ConfigMap watch      | before the workers start        | whose write was last
//
// Not memory: configuration, the Prometheus series, the work queue's timers (nextRefresh).
type Reconciler struct {
	Client          client.Client
	APIReader       client.Reader // a ConfigMap our cache does not hold
	Recorder        events.EventRecorder
	Clock           clock.PassiveClock
	Rand            func() float64 // in [0, 1), for requeue jitter
	Namespaces      scope.Namespaces
	ConfigMaps      client.Reader // our labelled ConfigMaps, from the controller's own cache
	Status          *status.Writer[*operatorsv1.ExchangeRate]
	DefaultInterval time.Duration
	StaleAfterDays  int
	Sources         *Sources
}

// Reconcile prices the ExchangeRate, writes its ConfigMap and status, and requeues it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	xr := &operatorsv1.ExchangeRate{}
	err := r.Client.Get(ctx, req.NamespacedName, xr)
	if apierrors.IsNotFound(err) || (err == nil && !xr.DeletionTimestamp.IsZero()) {
		// Gone, or going with its ConfigMap (garbage collected): no finalizer, no status.
		forgetMetrics(req.NamespacedName)
		r.Sources.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	o := outcome{Generation: xr.Generation, ConfigMapName: xr.Name, StaleAfterDays: r.StaleAfterDays}
	defer func() {
		// The observedGeneration rule and this controller's named exception (docs/STYLE.md): a
		// pass without error but without a rate yet, the sources failing or silent, did not act.
		acted := reterr == nil && o.actedOn()
		prev, err := r.Status.Finish(ctx, xr, acted, func(x *operatorsv1.ExchangeRate) {
			was := x.Status
			x.Status = computeStatus(x.Status, o)
			// The series before the write: whoever reads Stale in the status finds it set.
			recordStatus(req.NamespacedName, xr.Generation, was, x.Status, o.Quote)
		})
		if err != nil {
			result, reterr = ctrl.Result{}, kerrors.NewAggregate([]error{reterr, fmt.Errorf("writing status: %w", err)})
			return
		}
		r.recordTransitions(prev, xr, o)
		if reterr == nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Reconciled ExchangeRate", "rate", xr.Status.Rate, "date", xr.Status.PublicationDate,
				"source", xr.Status.Source, "requeueAfter", result.RequeueAfter)
		}
	}()

	interval := refreshInterval(xr.Spec, r.DefaultInterval)
	caches, err := r.Sources.For(req.NamespacedName, xr.Spec.Sources)
	if err != nil {
		// The user's to resolve, or a source nobody names gives its place at the next look.
		o.Now, o.SourcesErr = r.Clock.Now(), err
		return ctrl.Result{RequeueAfter: interval}, nil
	}
	for _, c := range caches {
		// One upstream request per source per refresh, whichever ExchangeRate asks first.
		o.Sources = append(o.Sources, sourceAnswer{Name: c.Name(), Schedule: c.Schedule(), Snapshot: c.Get(ctx, interval)})
	}
	o.Now = r.Clock.Now()
	o.Pricing, o.Tolerance = priceSpec(o.Sources, xr.Spec, o.Now, r.StaleAfterDays), toleranceOf(xr.Spec)
	o.Quote, o.ConfigMapErr = r.reconcileConfigMap(ctx, xr, o.Pricing)
	o.QuoteErr = o.Pricing.Err
	// A conflict is the user's to resolve (Ready=False says how): no error retry.
	if o.ConfigMapErr != nil && !errors.Is(o.ConfigMapErr, errConfigMapConflict) {
		return ctrl.Result{}, fmt.Errorf("writing ConfigMap %s: %w", xr.Name, o.ConfigMapErr)
	}
	return ctrl.Result{RequeueAfter: nextRefresh(o, interval, r.Rand)}, nil
}

// reconcileConfigMap writes the quote the pricing chose, unless the ConfigMap holds a newer
// publication of its source (heldQuote), and returns the quote it holds (nil: none written).
func (r *Reconciler) reconcileConfigMap(ctx context.Context, xr *operatorsv1.ExchangeRate, p pricing) (*Quote, error) {
	if p.Chosen < 0 {
		return nil, nil
	}
	quote := p.Quotes[p.Chosen]
	existing := &corev1.ConfigMap{}
	// Not there yet, or not ours: applyConfigMap finds out.
	if err := r.ConfigMaps.Get(ctx, client.ObjectKey{Namespace: xr.Namespace, Name: xr.Name}, existing); err == nil {
		if held := heldQuote(existing, xr, quote); held != nil {
			ctrl.LoggerFrom(ctx).Info("Kept the ConfigMap's newer publication", "source", quote.Source, "answered", quote.Date, "kept", held.Date)
			r.Recorder.Eventf(xr, existing, corev1.EventTypeWarning, EventOlderPublication, "Fetch",
				"%s answered with rates published %s, older than the %s ones ConfigMap %s holds: kept them", quote.Source, quote.Date,
				held.Date, existing.Name)
			quote = held
		}
	}
	desired := desiredConfigMap(xr, *quote)
	action, err := r.applyConfigMap(ctx, xr, desired)
	if err != nil {
		return nil, err
	}
	r.recordConfigMapWrite(xr, desired, action)
	return quote, nil
}
