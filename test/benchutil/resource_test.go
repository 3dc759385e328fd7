package benchutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces":                                "namespaces",
		"/api/v1/namespaces/a":                              "namespaces",
		"/api/v1/namespaces/a/secrets":                      "secrets",
		"/api/v1/namespaces/a/secrets/s":                    "secrets",
		"/apis/events.k8s.io/v1/namespaces/a/events":        "events",
		"/apis/apps/v1/namespaces/ns/statefulsets/x/status": "statefulsets/status",
		"/apis/blackadder.io/v1beta1/chaosagents/x/status":  "chaosagents/status",
		"/apis/blackadder.io/v1beta1/chaosagents":           "chaosagents",
		"/healthz": "/healthz",
	} {
		assert.Equal(t, want, ResourceOf(path), path)
	}
}

func TestSum(t *testing.T) {
	assert.Equal(t, 0, Sum(map[string]int{}))
	assert.Equal(t, 6, Sum(map[string]int{"GET": 1, "LIST": 2, "WATCH": 3}))
	assert.InDelta(t, 2.5, Sum(map[string]float64{"etcd": 1, "kube-apiserver": 1.5}), 1e-9)
}
