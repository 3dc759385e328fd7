package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/coalesce"
	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// operatorConfig is the config.yml Quartet 0.2.0 rendered (controllers/registrymirror/registryconfig.go)
// for a mirror with cacheTTL 168h. 0.3.0 renders it without proxy.ttl and with
// http.draintimeout (its own tests run this binary with it); either must work.
const operatorConfig = `# Rendered by the Quartet operator for RegistryMirror default/docker-hub; edits are overwritten.
health:
  storagedriver:
    enabled: true
    interval: 10s
    threshold: 3
http:
  addr: :5000
  headers:
    X-Content-Type-Options:
    - nosniff
log:
  fields:
    mirror: default/docker-hub
    service: registry
  formatter: text
  level: info
proxy:
  exec:
    command: /quartet/bin/quartet-credential-helper
    lifetime: 30s
  remoteurl: https://registry-1.docker.io
  ttl: 168h0m0s
storage:
  filesystem:
    rootdirectory: /var/lib/registry
version: "0.1"
`

func TestPrepareConfigOfTheOperatorsConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yml")
	require.NoError(t, os.WriteFile(path, []byte(operatorConfig), 0o644))
	cfg, err := loadConfig(path)
	require.NoError(t, err)

	root, err := rootDirectory(cfg)
	require.NoError(t, err)
	assert.Equal(t, "/var/lib/registry", root)
	assert.Equal(t, "/var/lib/registry/quartet/last-use", defaultStateFile(root))

	records := retention.NewRecords(retention.RealClock{})
	changed, err := prepareConfig(cfg, records, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"proxy.ttl 168h0m0s -> 0 (expiry by --retention instead)"}, changed)
	require.NotNil(t, cfg.Proxy.TTL)
	assert.Zero(t, *cfg.Proxy.TTL, "0 disables distribution's first-fetch expiry")
	require.Len(t, cfg.Middleware["repository"], 1)
	assert.Equal(t, retention.MiddlewareName, cfg.Middleware["repository"][0].Name)
	assert.Equal(t, "https://registry-1.docker.io", cfg.Proxy.RemoteURL, "the rest is untouched")
	assert.Equal(t, "/quartet/bin/quartet-credential-helper", cfg.Proxy.Exec.Command)
}

func TestPrepareConfigPutsCoalescingInsideRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yml")
	require.NoError(t, os.WriteFile(path, []byte(operatorConfig), 0o644))
	cfg, err := loadConfig(path)
	require.NoError(t, err)
	coalescer, err := coalesce.New(t.Context(), coalesce.Options{Driver: inmemory.New(), TempDir: t.TempDir()})
	require.NoError(t, err)
	_, err = prepareConfig(cfg, retention.NewRecords(retention.RealClock{}), coalescer)
	require.NoError(t, err)
	var names []string
	for _, mw := range cfg.Middleware["repository"] {
		names = append(names, mw.Name)
	}
	assert.Equal(t, []string{coalesce.MiddlewareName, retention.MiddlewareName}, names,
		"the recording middleware, outermost, sees every request as before")
}

func TestPrepareConfig(t *testing.T) {
	minute := time.Minute
	zero := time.Duration(0)
	tests := []struct {
		name        string
		edit        func(*configuration.Configuration)
		wantChanged []string
		wantErr     string
	}{
		{name: "ttl unset means distribution's 7 days", wantChanged: []string{"proxy.ttl unset (7 days) -> 0 (expiry by --retention instead)"}},
		{name: "ttl 0 already", edit: func(c *configuration.Configuration) { c.Proxy.TTL = &zero }},
		{
			name: "a blob descriptor cache is removed",
			edit: func(c *configuration.Configuration) {
				c.Proxy.TTL = &minute
				c.Storage["cache"] = configuration.Parameters{"blobdescriptor": "inmemory"}
			},
			wantChanged: []string{"proxy.ttl 1m0s -> 0 (expiry by --retention instead)", "storage.cache removed"},
		},
		{name: "not a proxy", edit: func(c *configuration.Configuration) { c.Proxy.RemoteURL = "" }, wantErr: "proxy.remoteurl is empty"},
		{
			name: "not a filesystem",
			edit: func(c *configuration.Configuration) {
				c.Storage = configuration.Storage{"inmemory": configuration.Parameters{}}
			},
			wantErr: `storage is "inmemory"`,
		},
		{name: "tls", edit: func(c *configuration.Configuration) { c.HTTP.TLS.Certificate = "/tls.crt" }, wantErr: "http.tls is set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &configuration.Configuration{
				Storage: configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": "/cache"}},
				Proxy:   configuration.Proxy{RemoteURL: "https://upstream.example"},
			}
			if tt.edit != nil {
				tt.edit(cfg)
			}
			changed, err := prepareConfig(cfg, retention.NewRecords(retention.RealClock{}), nil)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantChanged, changed)
			assert.Zero(t, *cfg.Proxy.TTL)
			assert.NotContains(t, cfg.Storage, "cache")
		})
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, options{configPath: "/etc/distribution/config.yml", retention: 30 * 24 * time.Hour, maxDiskPercent: 85,
		diskMinAge: 10 * time.Minute, evictionInterval: time.Minute, saveInterval: time.Minute, warmInterval: 5 * time.Minute,
		warmPlatforms: []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}}, o)

	o, err = parseOptions(strings.Fields("--retention=720h --max-disk-percent=90 --disk-eviction-min-age=0s --pinned-file=/run/pins --state-file=/s --config=/c.yml "+
		"--warm-interval=0 --warm-platforms=linux/amd64,linux/arm64/v8"), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, options{configPath: "/c.yml", retention: 720 * time.Hour, maxDiskPercent: 90, pinnedFile: "/run/pins",
		stateFile: "/s", evictionInterval: time.Minute, saveInterval: time.Minute,
		warmPlatforms: []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64", Variant: "v8"}}}, o)

	for args, want := range map[string]string{
		"--retention=0":               "--retention must be positive",
		"--max-disk-percent=101":      "--max-disk-percent must be between 0 and 100",
		"--eviction-interval=-1s":     "--eviction-interval must be positive",
		"--save-interval=0s":          "--save-interval must be positive",
		"--warm-interval=-1m":         "--warm-interval must not be negative",
		"--disk-eviction-min-age=-1s": "--disk-eviction-min-age must not be negative",
		"--warm-platforms=amd64":      "--warm-platforms: platform \"amd64\" is not os/arch[/variant]",
		"--warm-platforms=,":          "--warm-platforms: no platform",
		"serve /etc/config.yml":       "unexpected arguments",
		"--retention=a-long-while":    "invalid value",
	} {
		_, err := parseOptions(strings.Fields(args), io.Discard)
		assert.ErrorContains(t, err, want, args)
	}
}

func TestSelfURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:5000":   "http://127.0.0.1:5000",
		"[::]:5000":      "http://[::1]:5000",
		"10.1.2.3:5000":  "http://10.1.2.3:5000",
		"127.0.0.1:6000": "http://127.0.0.1:6000",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		require.NoError(t, err)
		assert.Equal(t, want, selfURL(tcp), addr)
	}
}
