// Package exchangerate keeps currency exchange rates in ConfigMaps. Each ExchangeRate
// gets a ConfigMap of its own name holding rate, base, currency, date and source; all
// ExchangeRates read one shared, conditionally refreshed table per source, so the
// upstream sees one request per refresh however many ExchangeRates exist.
package exchangerate

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// fieldOwner names our writes in managedFields.
const fieldOwner = client.FieldOwner("quartet-exchangerate")

// Reconciler keeps one ExchangeRate's ConfigMap and status.
type Reconciler struct {
	// Client reads ExchangeRates from the manager's cache and writes ConfigMaps and status.
	Client client.Client
	// ConfigMaps reads our labelled ConfigMaps from the controller's own cache.
	ConfigMaps client.Reader
	// APIReader reads past the caches, to look at a ConfigMap our cache does not hold.
	APIReader client.Reader
	Rates     *RateCache
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Random returns a number in [0, 1) for requeue jitter.
	Random          func() float64
	DefaultInterval time.Duration
	StaleAfterDays  int
	Shared          operator.Shared
}

// Reconcile prices the ExchangeRate from the shared table, writes its ConfigMap and
// status, and schedules the next refresh.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	xr := &operatorsv1.ExchangeRate{}
	if err := r.Client.Get(ctx, req.NamespacedName, xr); err != nil {
		if apierrors.IsNotFound(err) {
			forgetExchangeRate(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The ConfigMap carries a controller reference, so the garbage collector deletes it
	// with the ExchangeRate: there is nothing to clean up and no finalizer to hold.
	if !xr.DeletionTimestamp.IsZero() || !r.Shared.Watches(xr.Namespace) {
		forgetExchangeRate(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	// o is what this pass learns; the phases below return their parts of it, and the
	// deferred function turns it into the status, written once and only when it changed.
	o := outcome{Generation: xr.Generation, ConfigMapName: xr.Name, StaleAfterDays: r.StaleAfterDays}
	defer func() {
		status := computeStatus(xr.Status, o)
		recordStale(req.NamespacedName, meta.IsStatusConditionTrue(status.Conditions, ConditionStale))
		r.recordTransitions(xr, status, o)
		if err := r.patchStatus(ctx, xr, status); err != nil {
			result, reterr = ctrl.Result{}, kerrors.NewAggregate([]error{reterr, err})
			return
		}
		if reterr == nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Reconciled ExchangeRate", "rate", status.Rate, "date", status.PublicationDate,
				"requeueAfter", result.RequeueAfter)
		}
	}()

	interval := refreshInterval(xr.Spec, r.DefaultInterval)
	o.Fetch = r.Rates.Get(ctx, interval)
	o.Now = r.Clock.Now()
	o.Quote, o.QuoteErr, o.ConfigMapErr = r.reconcileConfigMap(ctx, xr, o.Fetch.Table)
	// A conflict is the user's to resolve (Ready=False says how): no error retry; the next
	// refresh looks again.
	if o.ConfigMapErr != nil && !errors.Is(o.ConfigMapErr, errConfigMapConflict) {
		return ctrl.Result{}, fmt.Errorf("writing ConfigMap %s: %w", xr.Name, o.ConfigMapErr)
	}
	return ctrl.Result{RequeueAfter: nextRefresh(o, interval, r.Random)}, nil
}

// reconcileConfigMap prices the spec from table and writes the ConfigMap. It returns the
// quote the ConfigMap now holds (nil when none was written), why the table cannot price
// the spec (*UnknownCurrencyError; nil while there is no table yet), and why the
// ConfigMap could not be written (errConfigMapConflict or an API error).
func (r *Reconciler) reconcileConfigMap(ctx context.Context, xr *operatorsv1.ExchangeRate, table *Table) (written *Quote, quoteErr, writeErr error) {
	quote, err := quoteFor(table, xr.Spec)
	if quote == nil {
		return nil, err, nil
	}
	desired := desiredConfigMap(xr, *quote)
	action, err := r.applyConfigMap(ctx, xr, desired)
	if err != nil {
		return nil, nil, err
	}
	r.recordConfigMapWrite(xr, desired, action)
	return quote, nil, nil
}
