package csvmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNested(t *testing.T) {
	m := map[string]any{"metadata": map[string]any{"name": "quartet.v0.3.0"}, "spec": "not a map"}

	Nested(m, "metadata", "annotations")["a"] = "b"
	assert.Equal(t, map[string]any{"name": "quartet.v0.3.0", "annotations": map[string]any{"a": "b"}}, m["metadata"],
		"an existing map is kept and a missing one created")

	Nested(m, "spec", "install")["strategy"] = "deployment"
	assert.Equal(t, map[string]any{"install": map[string]any{"strategy": "deployment"}}, m["spec"],
		"a value that is not a map is replaced by one")

	assert.Equal(t, m, Nested(m), "no path: the map itself")
}
