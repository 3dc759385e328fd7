package registrymirror

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/quartet-operator/quartet/cmd/nodeagent"
)

// TestChildCacheHoldsEveryChildKind: the child cache has an informer for every kind a
// mirror makes (it refuses reads of any other), so no child is read from nowhere.
func TestChildCacheHoldsEveryChildKind(t *testing.T) {
	cached := map[string]bool{}
	for _, obj := range childKinds() {
		cached[fmt.Sprintf("%T", obj)] = true
	}
	m := fullMirror()
	m.Spec.HostPort = ptr.To[int32](35000)
	for _, c := range desiredChildren(m, testImages, reach{hostPort: 35000, hostsPath: "/x", capabilities: nodeagent.DefaultCapabilities}) {
		assert.True(t, cached[fmt.Sprintf("%T", c.live)], "%s %s is not in the child cache", c.kind, c.name)
	}
}
