package registrymirror

import (
	"fmt"

	"sigs.k8s.io/yaml"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/registrycreds"
)

// registryConfig is the part of the CNCF distribution registry's config.yml
// (github.com/distribution/distribution/v3/configuration) the operator sets.
type registryConfig struct {
	Version string         `json:"version"`
	Log     registryLog    `json:"log"`
	Storage registryStore  `json:"storage"`
	HTTP    registryHTTP   `json:"http"`
	Health  registryHealth `json:"health"`
	Proxy   registryProxy  `json:"proxy"`
}

type registryLog struct {
	Level     string            `json:"level"`
	Formatter string            `json:"formatter"`
	Fields    map[string]string `json:"fields,omitempty"`
}

type registryStore struct {
	Filesystem struct {
		RootDirectory string `json:"rootdirectory"`
	} `json:"filesystem"`
}

type registryHTTP struct {
	Addr         string              `json:"addr"`
	Headers      map[string][]string `json:"headers,omitempty"`
	DrainTimeout string              `json:"draintimeout"`
}

type registryHealth struct {
	StorageDriver struct {
		Enabled   bool   `json:"enabled"`
		Interval  string `json:"interval"`
		Threshold int    `json:"threshold"`
	} `json:"storagedriver"`
}

// registryProxy has no username or password: the registry asks the credential helper
// (internal/registrycreds, proxy.exec) for them, which reads the mounted credentials
// Secret, so no secret is ever written into the ConfigMap and the registry starts even
// when the upstream cannot be reached (with proxy.username it would panic at start).
//
// Nor has it a ttl: distribution's expiry counts from the first fetch, and mirror-registry
// turns it off (proxy.ttl 0) and keeps content by use instead (--retention, registryArgs).
type registryProxy struct {
	RemoteURL string            `json:"remoteurl"`
	Exec      registryProxyExec `json:"exec"`
}

// registryProxyExec runs Command for credentials and reuses them for Lifetime, so a
// rotated Secret is used within that time.
type registryProxyExec struct {
	Command  string `json:"command"`
	Lifetime string `json:"lifetime"`
}

// credentialsLifetime bounds how long a rotated credentials Secret can go unused (the
// kubelet itself takes up to a minute to update the mounted Secret).
const credentialsLifetime = "30s"

// renderRegistryConfig renders the registry's config.yml for a mirror: proxy mode in
// front of spec.upstream, the cache on the volume, plain HTTP on :5000 (TLS, if wanted,
// belongs to the cluster's network layer), a drain on SIGTERM shorter than the pod's grace
// period, and a storage health check that gates "/". Retention is on mirror-registry's
// command line (registryArgs), not here.
func renderRegistryConfig(m *mirrorsv1alpha1.RegistryMirror) string {
	c := registryConfig{
		Version: "0.1",
		Log:     registryLog{Level: "info", Formatter: "text", Fields: map[string]string{"service": "registry", "mirror": m.Namespace + "/" + m.Name}},
		HTTP: registryHTTP{
			Addr:         fmt.Sprintf(":%d", RegistryPort),
			Headers:      map[string][]string{"X-Content-Type-Options": {"nosniff"}},
			DrainTimeout: registryDrainTimeout.String(),
		},
		Proxy: registryProxy{RemoteURL: upstreamURL(m),
			Exec: registryProxyExec{Command: helperMountPath + "/" + registrycreds.HelperName, Lifetime: credentialsLifetime}},
	}
	c.Storage.Filesystem.RootDirectory = cacheMountPath
	c.Health.StorageDriver.Enabled = true
	c.Health.StorageDriver.Interval = "10s"
	c.Health.StorageDriver.Threshold = 3
	b, err := yaml.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("marshalling the registry configuration: %v", err)) // plain data, cannot fail
	}
	return "# Rendered by the Quartet operator for RegistryMirror " + m.Namespace + "/" + m.Name + "; edits are overwritten.\n" + string(b)
}
