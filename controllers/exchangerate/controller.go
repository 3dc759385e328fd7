// Package exchangerate keeps currency exchange rates in ConfigMaps. Each ExchangeRate
// gets a ConfigMap of its own name holding rate, base, currency, date and source; all
// ExchangeRates read one shared, conditionally refreshed table per source, so the
// upstream sees one request per refresh however many ExchangeRates exist.
package exchangerate

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates,verbs=get;list;watch
// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates/status,verbs=patch
// +kubebuilder:rbac:groups=operators.brennerm.github.io,resources=exchangerates/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch

// fieldOwner names our writes in managedFields.
const fieldOwner = client.FieldOwner("quartet-exchangerate")

// Event reasons.
const (
	EventConfigMapCreated  = "ConfigMapCreated"
	EventConfigMapUpdated  = "ConfigMapUpdated"
	EventFetchFailed       = "FetchFailed"
	EventUnknownCurrency   = "UnknownCurrency"
	EventConfigMapConflict = "ConfigMapConflict"
)

// notOurWrite lets ConfigMap events through unless they echo our own create or patch.
var notOurWrite = predicate.TypedFuncs[*corev1.ConfigMap]{
	CreateFunc: func(e event.TypedCreateEvent[*corev1.ConfigMap]) bool { return !lastWriteOurs(e.Object) },
	UpdateFunc: func(e event.TypedUpdateEvent[*corev1.ConfigMap]) bool { return !lastWriteOurs(e.ObjectNew) },
}

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

// configMapAction is what reconcileConfigMap did.
type configMapAction int

const (
	configMapUnchanged configMapAction = iota
	configMapCreated
	configMapUpdated
)

// Reconcile prices the ExchangeRate from the shared table, writes its ConfigMap and
// status, and schedules the next refresh.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
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

	interval := refreshInterval(xr.Spec, r.DefaultInterval)
	o := outcome{Generation: xr.Generation, ConfigMapName: xr.Name, StaleAfterDays: r.StaleAfterDays}
	o.Fetch = r.Rates.Get(ctx, interval)
	o.Now = r.Clock.Now()

	var action configMapAction
	var cm *corev1.ConfigMap
	var quote *Quote
	quote, o.QuoteErr = quoteFor(o.Fetch.Table, xr.Spec)
	if quote != nil {
		cm = desiredConfigMap(xr, *quote)
		action, o.ConfigMapErr = r.reconcileConfigMap(ctx, xr, cm)
		if o.ConfigMapErr == nil {
			o.Quote = quote
		}
	}

	status := computeStatus(xr.Status, o)
	recordStale(req.NamespacedName, meta.IsStatusConditionTrue(status.Conditions, ConditionStale))
	r.recordEvents(xr, cm, action, status, o)
	if err := r.writeStatus(ctx, xr, status); err != nil {
		return ctrl.Result{}, err
	}
	if o.ConfigMapErr != nil && o.ConfigMapErr != errConfigMapConflict {
		return ctrl.Result{}, fmt.Errorf("writing ConfigMap %s: %w", xr.Name, o.ConfigMapErr)
	}
	next := nextRefresh(o, interval, r.Random)
	log.V(1).Info("Reconciled ExchangeRate", "rate", status.Rate, "date", status.PublicationDate, "requeueAfter", next)
	return ctrl.Result{RequeueAfter: next}, nil
}

// reconcileConfigMap creates or patches the ConfigMap to desired. A ConfigMap of that
// name that this ExchangeRate does not control is left alone (errConfigMapConflict).
func (r *Reconciler) reconcileConfigMap(ctx context.Context, xr *operatorsv1.ExchangeRate, desired *corev1.ConfigMap) (configMapAction, error) {
	existing := &corev1.ConfigMap{}
	err := r.ConfigMaps.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		err = r.Client.Create(ctx, desired, fieldOwner)
		if err == nil {
			ctrl.LoggerFrom(ctx).Info("Created ConfigMap", "configMap", klog.KObj(desired), "rate", desired.Data[KeyRate])
			return configMapCreated, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return configMapUnchanged, err
		}
		// Not in our cache: either unlabelled (someone else's) or too new for the cache.
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	}
	if err != nil {
		return configMapUnchanged, err
	}
	if !controlledBy(existing, xr) {
		return configMapUnchanged, errConfigMapConflict
	}
	if configMapUpToDate(existing, desired, xr) {
		return configMapUnchanged, nil
	}
	patch := client.MergeFrom(existing.DeepCopy())
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	existing.Labels[managedByLabel] = managedByValue
	existing.Data = desired.Data
	existing.BinaryData = nil
	if err := r.Client.Patch(ctx, existing, patch, fieldOwner); err != nil {
		return configMapUnchanged, err
	}
	ctrl.LoggerFrom(ctx).Info("Updated ConfigMap", "configMap", klog.KObj(existing), "rate", desired.Data[KeyRate])
	return configMapUpdated, nil
}

// writeStatus writes status once, only when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, xr *operatorsv1.ExchangeRate, status operatorsv1.ExchangeRateStatus) error {
	if equality.Semantic.DeepEqual(xr.Status, status) {
		return nil
	}
	patch := client.MergeFrom(xr.DeepCopy())
	xr.Status = status
	if err := r.Client.Status().Patch(ctx, xr, patch, fieldOwner); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// recordEvents reports actions on the ConfigMap, and failures when they begin (not on
// every retry, so an outage is one Warning per ExchangeRate rather than one per attempt).
func (r *Reconciler) recordEvents(xr *operatorsv1.ExchangeRate, cm *corev1.ConfigMap, action configMapAction,
	status operatorsv1.ExchangeRateStatus, o outcome) {
	switch action {
	case configMapCreated:
		r.Recorder.Eventf(xr, cm, corev1.EventTypeNormal, EventConfigMapCreated, "Create",
			"Created ConfigMap %s with %s %s per %s (published %s by %s)", cm.Name, cm.Data[KeyRate], cm.Data[KeyCurrency],
			cm.Data[KeyBase], cm.Data[KeyDate], cm.Data[KeySource])
	case configMapUpdated:
		r.Recorder.Eventf(xr, cm, corev1.EventTypeNormal, EventConfigMapUpdated, "Update",
			"Updated ConfigMap %s to %s %s per %s (published %s by %s)", cm.Name, cm.Data[KeyRate], cm.Data[KeyCurrency],
			cm.Data[KeyBase], cm.Data[KeyDate], cm.Data[KeySource])
	}
	if began(xr.Status.Conditions, status.Conditions, ConditionDegraded, metav1.ConditionTrue, "") {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventFetchFailed, "Fetch", "%v", o.Fetch.Err)
	}
	if began(xr.Status.Conditions, status.Conditions, ConditionReady, metav1.ConditionFalse, ReasonUnknownCurrency) {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventUnknownCurrency, "Reconcile", "%v", o.QuoteErr)
	}
	if began(xr.Status.Conditions, status.Conditions, ConditionReady, metav1.ConditionFalse, ReasonConfigMapConflict) {
		r.Recorder.Eventf(xr, nil, corev1.EventTypeWarning, EventConfigMapConflict, "Reconcile",
			"ConfigMap %s exists and is not controlled by this ExchangeRate; left unchanged", xr.Name)
	}
}
