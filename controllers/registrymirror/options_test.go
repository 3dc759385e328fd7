package registrymirror

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestImagesFromEnv(t *testing.T) {
	t.Setenv("RELATED_IMAGE_REGISTRY", "")
	t.Setenv("RELATED_IMAGE_NODE_AGENT", "")
	assert.Equal(t, Images{Registry: "docker.io/library/registry:3.0.0", NodeAgent: "quay.io/quartet-operator/quartet:v0.2.0"}, ImagesFromEnv())
	t.Setenv("RELATED_IMAGE_REGISTRY", "mirror.local/registry@sha256:abc")
	t.Setenv("RELATED_IMAGE_NODE_AGENT", " mirror.local/quartet:v9 ")
	assert.Equal(t, Images{Registry: "mirror.local/registry@sha256:abc", NodeAgent: "mirror.local/quartet:v9"}, ImagesFromEnv())
}

func TestFlagDefaults(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	assert.NoError(t, fs.Parse(nil))
	assert.Equal(t, Options{MaxConcurrentReconciles: defaultWorkers, HostsRoot: DefaultHostsRoot, Probes: true}, o)
	assert.NoError(t, fs.Parse([]string{"--registrymirror-workers=3"}))
	assert.Equal(t, 3, o.MaxConcurrentReconciles)
}
