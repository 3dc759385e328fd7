package operator

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
		assert.Equal(t, tc.want, ParseNamespaces(tc.in), "input %q", tc.in)
	}
}

func TestWatches(t *testing.T) {
	assert.True(t, Shared{}.Watches("anything"))
	s := Shared{WatchNamespaces: []string{"team-a", "team-b"}}
	assert.True(t, s.Watches("team-b"))
	assert.False(t, s.Watches("team-c"))
}

func TestProtectedIsAdditive(t *testing.T) {
	got := Shared{OperatorNamespace: "quartet-system"}.Protected("istio-system")
	assert.ElementsMatch(t, []string{"kube-system", "kube-public", "kube-node-lease", "quartet-system", "istio-system"}, got.UnsortedList())
	assert.ElementsMatch(t, SystemNamespaces, Shared{}.Protected().UnsortedList(), "an unknown operator namespace adds nothing")
}
