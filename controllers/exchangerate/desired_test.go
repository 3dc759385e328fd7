package exchangerate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

func testXR(currency, base string) *operatorsv1.ExchangeRate {
	return &operatorsv1.ExchangeRate{
		ObjectMeta: metav1.ObjectMeta{Name: "exchange-rate-usd", Namespace: "shop", UID: "uid-1", Generation: 3},
		Spec:       operatorsv1.ExchangeRateSpec{Currency: currency, Base: base},
	}
}

func TestQuoteFor(t *testing.T) {
	tab := mustTable(t, "ecb", "2026-05-15", map[string]string{"USD": "1.1625", "JPY": "171.58"})
	tests := []struct {
		name        string
		tab         *Table
		spec        operatorsv1.ExchangeRateSpec
		want        *Quote
		wantUnknown bool
	}{
		{name: "no table yet", tab: nil, spec: operatorsv1.ExchangeRateSpec{Currency: "USD"}},
		{name: "base defaults to EUR", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "USD"},
			want: &Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"}},
		{name: "cross rate", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "JPY", Base: "USD"},
			want: &Quote{Base: "USD", Currency: "JPY", Rate: "147.596", Date: "2026-05-15", Source: "ecb"}},
		{name: "unknown currency", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "XYZ"}, wantUnknown: true},
		{name: "unknown base", tab: tab, spec: operatorsv1.ExchangeRateSpec{Currency: "USD", Base: "XYZ"}, wantUnknown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := quoteFor(tt.tab, tt.spec)
			if tt.wantUnknown {
				var u *UnknownCurrencyError
				require.ErrorAs(t, err, &u)
				assert.Nil(t, q)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, q)
		})
	}
}

func TestRefreshInterval(t *testing.T) {
	assert.Equal(t, time.Hour, refreshInterval(operatorsv1.ExchangeRateSpec{}, time.Hour))
	assert.Equal(t, 5*time.Minute, refreshInterval(operatorsv1.ExchangeRateSpec{RefreshInterval: &metav1.Duration{Duration: 5 * time.Minute}}, time.Hour))
	assert.Equal(t, time.Hour, refreshInterval(operatorsv1.ExchangeRateSpec{RefreshInterval: &metav1.Duration{}}, time.Hour))
}

func TestDesiredConfigMap(t *testing.T) {
	xr := testXR("USD", "EUR")
	cm := desiredConfigMap(xr, Quote{Base: "EUR", Currency: "USD", Rate: "1.1625", Date: "2026-05-15", Source: "ecb"})
	assert.Equal(t, "exchange-rate-usd", cm.Name)
	assert.Equal(t, "shop", cm.Namespace)
	assert.Equal(t, map[string]string{"app.kubernetes.io/managed-by": "quartet-exchangerate"}, cm.Labels)
	assert.Equal(t, map[string]string{"rate": "1.1625", "base": "EUR", "currency": "USD", "date": "2026-05-15", "source": "ecb"}, cm.Data)
	assert.Equal(t, []metav1.OwnerReference{{
		APIVersion: "operators.brennerm.github.io/v1", Kind: "ExchangeRate", Name: "exchange-rate-usd", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}, cm.OwnerReferences)
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
