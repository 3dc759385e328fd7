package localcluster

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequirement(t *testing.T) {
	gomod := []byte(`module example.com/tools

go 1.26.0

require k8s.io/api v0.37.1

require (
	go.etcd.io/etcd/server/v3 v3.7.0
	k8s.io/kubernetes v1.37.1 // the release
)

replace (
	k8s.io/kubernetes => ../kubernetes
)
`)
	for module, want := range map[string]string{
		"k8s.io/api":                "v0.37.1",
		"k8s.io/kubernetes":         "v1.37.1",
		"go.etcd.io/etcd/server/v3": "v3.7.0",
	} {
		got, err := requirement(gomod, module)
		require.NoError(t, err, module)
		assert.Equal(t, want, got, module)
	}
	_, err := requirement(gomod, "k8s.io/client-go")
	require.Error(t, err)
}

// TestControlPlaneVersions reads the real go.mod: both versions must be releases.
func TestControlPlaneVersions(t *testing.T) {
	release := regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	k8s, err := KubernetesVersion()
	require.NoError(t, err)
	assert.Regexp(t, release, k8s)
	etcd, err := EtcdVersion()
	require.NoError(t, err)
	assert.Regexp(t, release, etcd)
}
