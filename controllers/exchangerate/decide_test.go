package exchangerate

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

func TestNextRefresh(t *testing.T) {
	zero := func() float64 { return 0 }
	half := func() float64 { return 0.5 }
	threeQuarters := func() float64 { return 0.75 }
	tab := &Table{Source: "ecb"}
	fetchErr := &FetchError{Reason: ReasonUpstreamServerError, Err: errors.New("503")}
	tests := []struct {
		name     string
		o        outcome
		interval time.Duration
		random   func() float64
		want     time.Duration
	}{
		{name: "fresh table: when it turns older than the interval",
			o:        outcome{Now: t0.Add(10 * time.Minute), Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: zero, want: 50 * time.Minute},
		{name: "jitter is up to a tenth of the interval",
			o:        outcome{Now: t0.Add(10 * time.Minute), Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: half, want: 53 * time.Minute},
		{name: "jitter spreads over the whole tenth",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: threeQuarters, want: 64*time.Minute + 30*time.Second},
		{name: "after a failure: at the retry time",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, CheckedAt: t0.Add(-2 * time.Hour), Err: fetchErr, RetryAt: t0.Add(2 * time.Minute)}},
			interval: time.Hour, random: zero, want: 2 * time.Minute},
		{name: "after a failure: jitter a tenth of the backoff",
			o:        outcome{Now: t0, Fetch: Snapshot{Err: fetchErr, RetryAt: t0.Add(2 * time.Minute)}},
			interval: time.Hour, random: half, want: 2*time.Minute + 6*time.Second},
		{name: "unknown currency: wait for the spec to change",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, CheckedAt: t0}, QuoteErr: &UnknownCurrencyError{Code: "XYZ"}},
			interval: time.Hour, random: half, want: 0},
		{name: "unknown currency during an outage: still no requeue",
			o:        outcome{Now: t0, Fetch: Snapshot{Table: tab, Err: fetchErr, RetryAt: t0.Add(time.Minute)}, QuoteErr: &UnknownCurrencyError{Code: "XYZ"}},
			interval: time.Hour, random: half, want: 0},
		{name: "overdue check: never a hot loop",
			o:        outcome{Now: t0.Add(3 * time.Hour), Fetch: Snapshot{Table: tab, CheckedAt: t0}},
			interval: time.Hour, random: zero, want: time.Second},
		{name: "retry already due: never a hot loop",
			o:        outcome{Now: t0, Fetch: Snapshot{Err: fetchErr, RetryAt: t0.Add(-time.Minute)}},
			interval: time.Hour, random: half, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, nextRefresh(tt.o, tt.interval, tt.random))
		})
	}
}

func TestRefreshInterval(t *testing.T) {
	assert.Equal(t, time.Hour, refreshInterval(operatorsv1.ExchangeRateSpec{}, time.Hour))
	assert.Equal(t, 5*time.Minute, refreshInterval(operatorsv1.ExchangeRateSpec{RefreshInterval: &metav1.Duration{Duration: 5 * time.Minute}}, time.Hour))
	assert.Equal(t, time.Hour, refreshInterval(operatorsv1.ExchangeRateSpec{RefreshInterval: &metav1.Duration{}}, time.Hour))
}

func TestConfigMapUpToDate(t *testing.T) {
	xr := testXR("USD", "EUR")
	desired := desiredConfigMap(xr, Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"})
	mutate := func(f func(cm *corev1.ConfigMap)) *corev1.ConfigMap {
		cm := desired.DeepCopy()
		cm.ResourceVersion = "42"
		f(cm)
		return cm
	}
	other := testXR("USD", "EUR")
	other.UID = "uid-old"
	tests := []struct {
		name     string
		existing *corev1.ConfigMap
		want     bool
	}{
		{name: "same", existing: mutate(func(*corev1.ConfigMap) {}), want: true},
		{name: "extra label is fine", existing: mutate(func(cm *corev1.ConfigMap) { cm.Labels["team"] = "a" }), want: true},
		{name: "rate changed", existing: mutate(func(cm *corev1.ConfigMap) { cm.Data["rate"] = "1.2" }), want: false},
		{name: "key added by hand", existing: mutate(func(cm *corev1.ConfigMap) { cm.Data["note"] = "x" }), want: false},
		{name: "binary data added", existing: mutate(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} }), want: false},
		{name: "label missing", existing: mutate(func(cm *corev1.ConfigMap) { cm.Labels = nil }), want: false},
		{name: "owned by an older ExchangeRate of that name", existing: mutate(func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, operatorsv1.GroupVersion.WithKind("ExchangeRate"))}
		}), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, configMapUpToDate(tt.existing, desired, xr))
		})
	}
}

func TestRoutineUpdate(t *testing.T) {
	// The last pass wrote 1.1625 published 2026-05-15 and recorded it in status.
	written := func() *corev1.ConfigMap {
		xr := testXR("USD", "EUR")
		return desiredConfigMap(xr, Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"})
	}
	settled := func() *operatorsv1.ExchangeRate {
		xr := testXR("USD", "EUR")
		xr.Generation, xr.Status.ObservedGeneration = 3, 3
		xr.Status.Rate, xr.Status.PublicationDate = "1.1625", "2026-05-15"
		return xr
	}
	next := Quote{Base: "EUR", Currency: "USD", Rate: "1.1702", Date: "2026-05-18", Source: "ecb"}
	tests := []struct {
		name     string
		xr       func(*operatorsv1.ExchangeRate)
		existing func(*corev1.ConfigMap)
		quote    func(*Quote)
		want     bool
	}{
		{name: "a new publication", want: true},
		{name: "a corrected rate, same publication date", quote: func(q *Quote) { q.Date = "2026-05-15" }, want: true},
		{name: "spec changed since the last pass", xr: func(xr *operatorsv1.ExchangeRate) { xr.Generation = 4 }, quote: func(q *Quote) { q.Currency = "JPY" }},
		{name: "rate edited by someone else", existing: func(cm *corev1.ConfigMap) { cm.Data[KeyRate] = "42" }},
		{name: "date edited by someone else", existing: func(cm *corev1.ConfigMap) { cm.Data[KeyDate] = "2020-01-01" }},
		{name: "key added by someone else", existing: func(cm *corev1.ConfigMap) { cm.Data["note"] = "x" }},
		{name: "key removed by someone else", existing: func(cm *corev1.ConfigMap) { delete(cm.Data, KeySource) }},
		{name: "source changed (another manager flag)", quote: func(q *Quote) { q.Source = "frankfurter" }},
		{name: "no rate in status yet", xr: func(xr *operatorsv1.ExchangeRate) { xr.Status.Rate, xr.Status.PublicationDate = "", "" },
			existing: func(cm *corev1.ConfigMap) { cm.Data[KeyRate], cm.Data[KeyDate] = "", "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xr, existing, q := settled(), written(), next
			if tt.xr != nil {
				tt.xr(xr)
			}
			if tt.existing != nil {
				tt.existing(existing)
			}
			if tt.quote != nil {
				tt.quote(&q)
			}
			assert.Equal(t, tt.want, routineUpdate(existing, desiredConfigMap(xr, q), xr))
		})
	}
}

func TestControlledBy(t *testing.T) {
	xr := testXR("USD", "EUR")
	cm := &corev1.ConfigMap{}
	assert.False(t, controlledBy(cm, xr), "no owner")
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ExchangeRate", Name: xr.Name, UID: xr.UID}}
	assert.False(t, controlledBy(cm, xr), "owner but not controller")
	cm.OwnerReferences[0].Controller = ptr.To(true)
	assert.True(t, controlledBy(cm, xr))
}

func TestLastWriteOurs(t *testing.T) {
	at := func(sec int) *metav1.Time { tm := metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)); return &tm }
	entry := func(manager string, sec int) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: at(sec)}
	}
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"no managed fields", nil, false},
		{"only ours", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 1)}, true},
		{"ours newest", []metav1.ManagedFieldsEntry{entry("kubectl-edit", 1), entry("quartet-exchangerate", 2)}, true},
		{"someone else newest", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 2), entry("kubectl-edit", 3)}, false},
		{"tie counts as an edit", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 2), entry("kubectl-edit", 2)}, false},
		{"tie the other way round", []metav1.ManagedFieldsEntry{entry("kubectl-edit", 2), entry("quartet-exchangerate", 2)}, false},
		{"entry without time ignored", []metav1.ManagedFieldsEntry{entry("quartet-exchangerate", 2), {Manager: "x"}}, true},
	}
	for _, tt := range tests {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: tt.entries}}
		assert.Equal(t, tt.want, lastWriteOurs(cm), tt.name)
	}
}
