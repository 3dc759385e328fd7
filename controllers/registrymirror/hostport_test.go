package registrymirror

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

func TestPickHostPort(t *testing.T) {
	for _, tc := range []struct {
		name            string
		explicit        *int32
		current         int32
		held, requested map[int32]string
		lo, hi          int32
		want            int32
		wantConflict    string
	}{
		{name: "first mirror gets the lowest port", lo: 10, hi: 12, want: 10},
		{name: "held ports are skipped", held: map[int32]string{10: "a/x", 11: "a/y"}, lo: 10, hi: 12, want: 12},
		{name: "requested ports are skipped", requested: map[int32]string{10: "a/x"}, lo: 10, hi: 12, want: 11},
		{name: "current port kept", current: 12, lo: 10, hi: 12, want: 12},
		{name: "current port kept outside the range", current: 40000, lo: 10, hi: 12, want: 40000},
		{name: "current port kept though another mirror asks for it", current: 11, requested: map[int32]string{11: "a/x"}, lo: 10, hi: 12, want: 11},
		{name: "current port held by another moves", current: 11, held: map[int32]string{11: "a/x"}, lo: 10, hi: 12, want: 10},
		{name: "explicit port used", explicit: ptr.To[int32](5000), current: 10, lo: 10, hi: 12, want: 5000},
		{name: "explicit port requested by another is fine", explicit: ptr.To[int32](5000), requested: map[int32]string{5000: "a/x"}, lo: 10, hi: 12, want: 5000},
		{name: "explicit port held by another conflicts", explicit: ptr.To[int32](5000), held: map[int32]string{5000: "a/x"}, lo: 10, hi: 12, want: 5000, wantConflict: "a/x"},
		{name: "range full", held: map[int32]string{10: "a", 11: "b", 12: "c"}, lo: 10, hi: 12, want: 0},
	} {
		got, conflict := pickHostPort(tc.explicit, tc.current, tc.held, tc.requested, tc.lo, tc.hi)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, tc.wantConflict, conflict, tc.name)
	}
}

func TestPortBookConcurrentAssignmentsAreDistinct(t *testing.T) {
	var book memory
	const n = 200
	ports := make([]int32, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, conflict, err := book.assignPort(types.NamespacedName{Namespace: "ns", Name: string(rune('a'+i%26)) + string(rune('a'+i/26))}, nil, 0, nil, nil)
			assert.NoError(t, err)
			assert.Empty(t, conflict)
			ports[i] = p
		}()
	}
	wg.Wait()
	seen := map[int32]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d assigned twice", p)
		seen[p] = true
		assert.GreaterOrEqual(t, p, hostPortMin)
	}
}

func TestPortBookReassignAndRelease(t *testing.T) {
	var book memory
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	pa, _, err := book.assignPort(a, nil, 0, nil, nil)
	require.NoError(t, err)
	again, _, err := book.assignPort(a, nil, pa, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, pa, again, "a mirror's own reservation does not block it")
	_, conflict, err := book.assignPort(b, ptr.To(pa), 0, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "ns/a", conflict)
	book.releasePort(a)
	_, conflict, err = book.assignPort(b, ptr.To(pa), 0, nil, nil)
	require.NoError(t, err)
	assert.Empty(t, conflict, "released with the mirror")

	full := map[int32]string{}
	for p := hostPortMin; p <= hostPortMax; p++ {
		full[p] = "x/y"
	}
	_, _, err = book.assignPort(types.NamespacedName{Namespace: "ns", Name: "c"}, nil, 0, full, nil)
	assert.ErrorContains(t, err, "set spec.hostPort")
}

func TestKeepsHostPort(t *testing.T) {
	assert.True(t, keepsHostPort(nil, 35001), "the port the node agents have")
	assert.True(t, keepsHostPort(ptr.To[int32](35001), 35001), "the port asked for is the one they have")
	assert.False(t, keepsHostPort(nil, 0), "no node agents yet")
	assert.False(t, keepsHostPort(ptr.To[int32](36000), 35001), "spec.hostPort asks for another")
}

// TestOthersPorts (review 2026-12-06, finding 4): only the node agents of another mirror
// with node access hold a host port, and only such a mirror's spec.hostPort is set aside;
// a DaemonSet with the node agents' labels and a "mirror" port holds nothing unless a
// granted mirror controls it by UID and it bears that mirror's node agent name.
func TestOthersPorts(t *testing.T) {
	mirror := func(ns, name, uid, host string, hostPort *int32) mirrorsv1alpha1.RegistryMirror {
		return mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
			Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: "https://" + host, HostPort: hostPort}}
	}
	agents := func(ns, name string, port int32, owner *mirrorsv1alpha1.RegistryMirror, controller bool) appsv1.DaemonSet {
		ds := appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{labelManagedBy: managedBy, labelComponent: componentAgent, labelInstance: "platform"}}}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "agent", Ports: []corev1.ContainerPort{{Name: "mirror", HostPort: port, ContainerPort: 5000}}}}
		if owner != nil {
			ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: mirrorsv1alpha1.GroupVersion.String(), Kind: "RegistryMirror",
				Name: owner.Name, UID: owner.UID, Controller: ptr.To(controller)}}
		}
		return ds
	}
	me := mirror("platform", "hub", "uid-me", "docker.io", nil)
	other := mirror("platform", "quay", "uid-quay", "quay.io", nil)
	asking := mirror("platform", "ghcr", "uid-ghcr", "ghcr.io", ptr.To[int32](35010))
	tenants := mirror("t1", "mine", "uid-t1", "registry.t1.example", ptr.To[int32](35020))
	revoked := mirror("platform", "old", "uid-old", "old.example", nil)
	grants := []mirrorsv1alpha1.RegistryHostGrant{grant("hub", "docker.io", "platform", "hub", 0), grant("quay", "quay.io", "platform", "quay", 0),
		grant("ghcr", "ghcr.io", "platform", "ghcr", 0)}
	mirrors := []mirrorsv1alpha1.RegistryMirror{me, other, asking, tenants, revoked}
	otherCopy := other // a copy with another UID: a mirror of that name deleted and made again
	otherCopy.UID = "uid-quay-before"
	for _, tc := range []struct {
		name       string
		daemonSets []appsv1.DaemonSet
		wantHeld   map[int32]string
	}{
		{name: "a granted mirror's node agents hold their port",
			daemonSets: []appsv1.DaemonSet{agents("platform", "quay-node", 35001, &other, true)},
			wantHeld:   map[int32]string{35001: "platform/quay"}},
		{name: "this mirror's own node agents hold nothing against it",
			daemonSets: []appsv1.DaemonSet{agents("platform", "hub-node", 35000, &me, true)}},
		{name: "a look-alike with the labels only",
			daemonSets: []appsv1.DaemonSet{agents("t1", "squat", 35000, nil, false)}},
		{name: "a look-alike owned, not controlled, by a granted mirror",
			daemonSets: []appsv1.DaemonSet{agents("platform", "quay-node", 35000, &other, false)}},
		{name: "a look-alike controlled by a mirror without node access",
			daemonSets: []appsv1.DaemonSet{agents("t1", "mine-node", 35000, &tenants, true), agents("platform", "old-node", 35002, &revoked, true)}},
		{name: "a look-alike naming a granted mirror's UID in another namespace",
			daemonSets: []appsv1.DaemonSet{agents("t1", "quay-node", 35000, &other, true)}},
		{name: "a look-alike of another name, controlled by a granted mirror",
			daemonSets: []appsv1.DaemonSet{agents("platform", "squat", 35000, &other, true)}},
		{name: "node agents left by a mirror of that name before (another UID)",
			daemonSets: []appsv1.DaemonSet{agents("platform", "quay-node", 35000, &otherCopy, true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, requested := othersPorts(&me, tc.daemonSets, mirrors, grants)
			if tc.wantHeld == nil {
				tc.wantHeld = map[int32]string{}
			}
			assert.Equal(t, tc.wantHeld, held)
			// Only the granted mirror's spec.hostPort is set aside, not the tenant's.
			assert.Equal(t, map[int32]string{35010: "platform/ghcr"}, requested)
		})
	}
}
