package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCacheBehind(t *testing.T) {
	for _, tc := range []struct {
		cached, written string
		behind          bool
	}{
		{"10", "11", true},
		{"9", "10", true}, // numerically, not as strings: "9" > "10" lexically
		{"11", "11", false},
		{"12", "11", false},
		{"100", "99", false},
		{"", "11", false},    // nothing to compare: trust the cache
		{"11", "", false},    // nothing written
		{"abc", "11", false}, // not the API server's form
		{"011", "11", false},
	} {
		assert.Equal(t, tc.behind, CacheBehind(tc.cached, tc.written), "cached %q, written %q", tc.cached, tc.written)
	}
}

func TestMemoryLatest(t *testing.T) {
	pod := func(uid, rv, phase string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID(uid), ResourceVersion: rv},
			Status: corev1.PodStatus{Phase: corev1.PodPhase(phase)}}
	}
	var m Memory[*corev1.Pod]
	assert.Equal(t, "cached", string(m.Latest(pod("a", "10", "cached")).Status.Phase), "nothing written yet")

	written := pod("a", "11", "written")
	m.Wrote(written)
	written.Status.Phase = "changed after the write" // the memory keeps its own copy

	for _, tc := range []struct {
		name   string
		cached *corev1.Pod
		want   string
	}{
		{"the cache is behind the write", pod("a", "10", "cached"), "written"},
		{"the cache shows the write", pod("a", "11", "cached"), "cached"},
		{"the cache shows a later write", pod("a", "12", "cached"), "cached"},
		{"an object of the same name created again", pod("b", "10", "cached"), "cached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m.Latest(tc.cached)
			assert.Equal(t, tc.want, string(got.Status.Phase))
			got.Status.Phase = "edited by the caller"
			assert.NotEqual(t, "edited by the caller", string(m.Latest(pod("a", "10", "cached")).Status.Phase), "Latest returns a copy")
		})
	}

	m.Forget(types.NamespacedName{Namespace: "ns", Name: "p"})
	assert.Equal(t, "cached", string(m.Latest(pod("a", "10", "cached")).Status.Phase), "forgotten")
}
