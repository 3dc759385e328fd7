package process

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: src, Labels: map[string]string{"copy": "wire"}},
		Data: map[string]string{"k": "v"}}
	require.NoError(t, env.Client.Create(ctx, cm))
	rule := &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{Name: "wire", Namespace: src},
		Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeConfigMap, Selector: map[string]flantv1.LabelValue{"copy": "wire"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"wire-format": "true"}}}}
	require.NoError(t, env.Client.Create(ctx, rule))
	t.Cleanup(func() { forceDelete(rule) })
	eventually(t, time.Minute, "the copy exists", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: dst, Name: "settings"}, &corev1.ConfigMap{}) == nil
	})
	// Drift makes the manager write the copy again: a write of a built-in kind.
	require.NoError(t, env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: "settings"}}))
	eventually(t, time.Minute, "the copy is back", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: dst, Name: "settings"}, &corev1.ConfigMap{}) == nil
	})
	m.stop()

	formats := proxy.Formats()
	keys := make([]string, 0, len(formats))
	for k := range formats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var builtin, custom, builtinWrites int
	for _, k := range keys {
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
