package chart

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestInstallerIsGeneratedFromConfig: the committed dist/install.yaml is what `make
// build-installer` writes today: `kustomize build config/default` under its two comment
// lines, so `kubectl apply -f` of it installs what `make deploy` does.
func TestInstallerIsGeneratedFromConfig(t *testing.T) {
	_, kustomize := tools(t)
	config := string(run(t, kustomize, "build", "config/default"))
	installer := string(read(t, "dist/install.yaml"))
	header, body, _ := strings.Cut(installer, "\napiVersion:")
	assert.Equal(t, 2, strings.Count(header+"\n", "\n"), "two comment lines above the objects")
	assert.True(t, strings.HasPrefix(header, "# Quartet "+makefileVersion(t)+": "), "the header names the version: %s", header)
	assert.Equal(t, config, "apiVersion:"+body, "dist/install.yaml differs from config/default: run make build-installer")
}
