package process

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	"github.com/quartet-operator/quartet/controllers/copyratorrule"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

const (
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
	mediaJSON     = "application/json"
)

// TestManagerTalksProtobufForBuiltinKinds runs the manager binary as shipped behind a proxy
// that records the Content-Type of every response, lets it copy a ConfigMap, and checks
// the wire format per request: protobuf for every built-in kind it reads, watches or
// writes (smaller and cheaper to decode than JSON), JSON for the custom resources (the
// API server serves CRDs only as JSON).
func TestManagerTalksProtobufForBuiltinKinds(t *testing.T) {
	ctx := context.Background()
	proxy := benchutil.StartCountingProxy(t, env.Config)
	src := namespace(t, "wire-src", nil)
	testenv.GrantCopies(t, env.Client, src, copyratorrule.DefaultServiceAccountName)
	dst := namespace(t, "wire-dst", map[string]string{"wire-format": "true"})
	m := startManager(t, "wire", "--kubeconfig="+proxy.Kubeconfig(t), "--controllers=copyratorrule")

	require.NoError(t, env.Client.Create(ctx, configMap(src, "settings", map[string]string{"copy": "wire"}, map[string]string{"k": "v"})))
	create(t, copyRule(src, "wire", flantv1.RuleTypeConfigMap, "copy=wire", "wire-format"))
	copied := func() bool { return fetch(configMap(dst, "settings", nil, nil)) }
	eventually(t, time.Minute, "the copy exists", copied)
	// Drift makes the manager write the copy again: a write of a built-in kind.
	require.NoError(t, env.Client.Delete(ctx, configMap(dst, "settings", nil, nil)))
	eventually(t, time.Minute, "the copy is back", copied)
	m.stop()

	formats := proxy.Formats()
	var builtin, custom, builtinWrites int
	for _, k := range slices.Sorted(maps.Keys(formats)) {
		verb, path, _ := strings.Cut(k, " ")
		for media := range formats[k] {
			t.Logf("%-6s %s → %s", verb, path, media)
		}
		switch {
		case strings.HasPrefix(path, "/apis/flant.com/"):
			custom++
			assert.Equal(t, map[string]int{mediaJSON: formats[k][mediaJSON]}, formats[k], "%s: custom resources are JSON", k)
		case strings.HasPrefix(path, "/api/v1/") || strings.HasPrefix(path, "/apis/coordination.k8s.io/") ||
			strings.HasPrefix(path, "/apis/events.k8s.io/"):
			builtin++
			if verb == "POST" || verb == "PUT" || verb == "PATCH" {
				builtinWrites++
			}
			assert.Equal(t, map[string]int{mediaProtobuf: formats[k][mediaProtobuf]}, formats[k], "%s: built-in kinds are protobuf", k)
		}
	}
	assert.Positive(t, custom, "the manager read CopyratorRules through the proxy")
	assert.Positive(t, builtin, "the manager read built-in kinds through the proxy")
	assert.Positive(t, builtinWrites, "the manager wrote built-in kinds through the proxy")
}
