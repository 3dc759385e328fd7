package olm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/test/realnode"
)

// TestInstallModes installs the channel head (0.3.0) once in each install mode the CSV declares and shows
// that the running manager acts exactly where OLM told it to: an ExchangeRate in every
// target namespace gets its ConfigMap, one outside the targets (created first, so the
// manager had every chance to see it) is left alone.
func TestInstallModes(t *testing.T) {
	requireEnv(t)
	const outside = "qm-outside"
	modes := []installModeCase{
		{"OwnNamespace", "qm-own", []string{"qm-own"}, []string{"qm-own"}},
		{"SingleNamespace", "qm-single-op", []string{"qm-single"}, []string{"qm-single"}},
		{"MultiNamespace", "qm-multi-op", []string{"qm-multi-a", "qm-multi-b"}, []string{"qm-multi-a", "qm-multi-b"}},
		{"AllNamespaces", "qm-all", nil, []string{"qm-all", outside}},
	}
	// OwnNamespace, SingleNamespace and MultiNamespace side by side: their OperatorGroups'
	// targets do not intersect, so OLM installs each (it refuses two groups that provide the
	// same APIs to one namespace) and each manager must still act only where its group says.
	// AllNamespaces targets every namespace, so it comes alone, after them.
	t.Run("disjoint", func(t *testing.T) {
		for _, m := range modes[:3] {
			t.Run(m.mode, func(t *testing.T) {
				t.Parallel()
				installMode(t, m, outside)
			})
		}
	})
	m := modes[3]
	t.Run(m.mode, func(t *testing.T) { installMode(t, m, outside) })
}

// installModeCase is one install mode of TestInstallModes.
type installModeCase struct {
	mode, ns string
	targets  []string // OperatorGroup targetNamespaces (none: AllNamespaces)
	watched  []string // where the manager must act
}

// installMode is one install of TestInstallModes: 0.3.0 in m.ns with an OperatorGroup of
// m.targets, an ExchangeRate reconciled in each watched namespace and one in outside left
// alone (unless watched), then the uninstall, until no CSV is left in m.ns or its targets.
func installMode(t *testing.T, m installModeCase, outside string) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	since := time.Now()
	require.NoError(t, env.Subscribe(ctx, realnode.Install{Namespace: m.ns, Targets: m.targets, Config: managerConfig()}))
	require.NoError(t, env.WaitCSVSucceeded(ctx, m.ns, realnode.NewCSV, 5*time.Minute))
	timings.Add("install 0.3.0 "+m.mode+": CSV Succeeded", since)
	pod := requireManagerReady(t, m.ns, realnode.OperatorImage)
	got := strings.Split(pod.Annotations["olm.targetNamespaces"], ",")
	if m.targets == nil {
		require.Equal(t, []string{""}, got, "AllNamespaces: empty WATCH_NAMESPACE")
	} else {
		require.ElementsMatch(t, m.targets, got)
	}

	for _, ns := range append([]string{outside}, m.watched...) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	name := "mode-" + strings.ToLower(m.mode)
	rate := func(ns string) *operatorsv1.ExchangeRate {
		return &operatorsv1.ExchangeRate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: operatorsv1.ExchangeRateSpec{Currency: "USD"}}
	}
	var created []client.Object
	if !slices.Contains(m.watched, outside) {
		r := rate(outside)
		require.NoError(t, c.Create(ctx, r))
		created = append(created, r)
	}
	for _, ns := range m.watched {
		r := rate(ns)
		require.NoError(t, c.Create(ctx, r))
		created = append(created, r)
		_, err := env.WaitExchangeRate(ctx, ns, name, 2*time.Minute)
		require.NoError(t, err, "the manager acts in %s", ns)
	}
	if !slices.Contains(m.watched, outside) {
		r := &operatorsv1.ExchangeRate{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: outside, Name: name}, r))
		require.Empty(t, r.Status.Conditions, "%s is outside the OperatorGroup: the manager never touches it", outside)
		err := c.Get(ctx, client.ObjectKey{Namespace: outside, Name: name}, &corev1.ConfigMap{})
		require.True(t, apierrors.IsNotFound(err), "no ConfigMap outside the targets: %v", err)
	}
	t.Logf("%s: acted in %v, left %s alone", m.mode, m.watched, map[bool]string{true: "nothing (all namespaces)", false: outside}[slices.Contains(m.watched, outside)])

	for _, o := range created {
		require.NoError(t, c.Delete(ctx, o))
	}
	require.NoError(t, env.Uninstall(ctx, m.ns))
	// The other modes' installs may run beside this one: only this one's CSVs count.
	mine := append([]string{m.ns}, m.targets...)
	if m.targets == nil {
		mine = nil // AllNamespaces: every namespace holds a copy
	}
	require.NoError(t, realnode.WaitFor(ctx, "copied CSVs gone", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, ns := range env.CSVsNamed(ctx, realnode.NewCSV) {
			if mine == nil || slices.Contains(mine, ns) {
				left = append(left, ns)
			}
		}
		return len(left) == 0, fmt.Sprint(left), nil
	}))
}
