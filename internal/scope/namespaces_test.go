package scope

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

func TestParseNamespaces(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{" a , b ,a,,", []string{"a", "b"}},
	} {
		assert.Equal(t, tc.want, ParseList(tc.in), "input %q", tc.in)
	}
}

func TestWatches(t *testing.T) {
	assert.True(t, Namespaces{}.Watches("anything"))
	s := Namespaces{Watched: []string{"team-a", "team-b"}}
	assert.True(t, s.Watches("team-b"))
	assert.False(t, s.Watches("team-c"))
}

func TestProtectedIsAdditive(t *testing.T) {
	got := Namespaces{Operator: "quartet-system"}.Protected("istio-system")
	assert.ElementsMatch(t, []string{"kube-system", "kube-public", "kube-node-lease", "quartet-system", "istio-system"}, got.UnsortedList())
	assert.ElementsMatch(t, SystemNamespaces, Namespaces{}.Protected().UnsortedList(), "an unknown operator namespace adds nothing")
}

func TestCacheNamespaces(t *testing.T) {
	assert.Nil(t, Namespaces{}.CacheConfig(), "no watch list: all namespaces")
	assert.Equal(t, map[string]cache.Config{"a": {}, "b": {}}, Namespaces{Watched: []string{"a", "b"}}.CacheConfig())
}
