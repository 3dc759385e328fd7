package registrymirror

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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
