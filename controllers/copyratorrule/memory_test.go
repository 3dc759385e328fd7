package copyratorrule

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestFreshNamespaces(t *testing.T) {
	f := newFreshNamespaces()
	other := types.NamespacedName{Namespace: "src", Name: "other"}
	assert.Empty(t, f.take(testRule))

	f.add(testRule, "b")
	f.add(testRule, "a")
	f.add(testRule, "b")
	f.add(other, "c")
	assert.Equal(t, []string{"a", "b"}, f.take(testRule), "sorted, once each")
	assert.Empty(t, f.take(testRule), "taken")
	assert.Equal(t, []string{"c"}, f.take(other), "per rule")

	for i := range maxFreshNamespaces {
		f.add(testRule, fmt.Sprintf("ns-%03d", i))
	}
	assert.Len(t, f.take(testRule), maxFreshNamespaces)
	for i := range maxFreshNamespaces + 5 {
		f.add(testRule, fmt.Sprintf("ns-%03d", i))
	}
	assert.Len(t, f.rules[testRule], maxFreshNamespaces+1, "the set stops growing")
	assert.Empty(t, f.take(testRule), "a burst is planned in one step over all namespaces")

	f.add(testRule, "a")
	f.forget(testRule)
	assert.Empty(t, f.take(testRule))
}

func TestFullPasses(t *testing.T) {
	f := newFullPasses()
	other := types.NamespacedName{Namespace: "src", Name: "other"}
	assert.False(t, f.take(testRule), "nothing marked")
	f.mark(testRule)
	f.mark(testRule)
	assert.True(t, f.take(testRule))
	assert.False(t, f.take(testRule), "taken once")
	f.mark(other)
	assert.False(t, f.take(testRule), "per rule")
	assert.True(t, f.take(other))
}
