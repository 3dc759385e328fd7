package registrymirror

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/localcluster"
	"github.com/quartet-operator/quartet/internal/registrycreds"
)

// registryVersion is the CNCF distribution registry hack/build-registry.sh builds.
const registryVersion = "v3.0.0"

// The upstream's only user (htpasswd needs bcrypt; this is bcrypt of the password).
const (
	upstreamUser     = "puller"
	upstreamPassword = "pull-secret-123"
	upstreamBcrypt   = "$2a$04$rYI/ajz47xi9zNd6vIvg1u6LyFBmWG8gCL7JLV4bf6T6vt/XQ8QCa"
)

var (
	registryBuildOnce sync.Once
	registryBin       string
	registryBuildErr  error
)

// registryExecutable returns bin/registry/<version>/registry, building it with
// hack/build-registry.sh (from the Go module proxy) when it is missing.
func registryExecutable(t *testing.T) string {
	t.Helper()
	registryBuildOnce.Do(func() {
		root, err := localcluster.RepoRoot()
		if err != nil {
			registryBuildErr = err
			return
		}
		registryBin = filepath.Join(root, "bin", "registry", registryVersion, "registry")
		if _, err := os.Stat(registryBin); err == nil {
			return
		}
		t.Logf("building the registry with hack/build-registry.sh (a few minutes on a cold cache)")
		cmd := exec.Command(filepath.Join(root, "hack", "build-registry.sh"))
		cmd.Env = append(os.Environ(), "REGISTRY_VERSION="+registryVersion)
		out, err := cmd.CombinedOutput()
		if err != nil {
			registryBuildErr = fmt.Errorf("hack/build-registry.sh: %w\n%s", err, out)
		}
	})
	require.NoError(t, registryBuildErr)
	return registryBin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRegistry runs the registry with config (YAML) and extra environment, waits until
// GET probePath answers wantCode, and stops it when the test ends. It returns a stop func.
func startRegistry(t *testing.T, name, config string, env []string, base, probePath string, wantCode int) func() {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o600))
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	require.NoError(t, err)
	cmd := exec.Command(registryExecutable(t), "serve", cfgPath)
	// Only what the pod would have: no REGISTRY_* from the test's own environment.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Kill()
		<-exited
		_ = logf.Close()
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s registry log:\n%s", name, b)
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			return true // fail below with the log
		default:
		}
		resp, err := http.Get(base + probePath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == wantCode
	}, 20*time.Second, 50*time.Millisecond, "%s registry did not come up", name)
	select {
	case <-exited:
		t.Fatalf("%s registry exited", name)
	default:
	}
	return stop
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

type testImage struct {
	repo, tag      string
	manifest       []byte
	manifestDigest string
	blobs          map[string][]byte // digest -> content
}

func newTestImage() testImage {
	config := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{}}`)
	layer := bytes.Repeat([]byte("quartet registry mirror test layer\n"), 500)
	img := testImage{repo: "library/quartet-test", tag: "v1", blobs: map[string][]byte{digestOf(config): config, digestOf(layer): layer}}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digestOf(config), "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digestOf(layer), "size": len(layer)}},
	}
	img.manifest, _ = json.Marshal(manifest)
	img.manifestDigest = digestOf(img.manifest)
	return img
}

func do(t *testing.T, method, url string, body []byte, header map[string]string, auth bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if auth {
		req.SetBasicAuth(upstreamUser, upstreamPassword)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// push uploads the image's blobs (monolithic uploads) and manifest with the plain
// registry HTTP API.
func push(t *testing.T, base string, img testImage) {
	t.Helper()
	for digest, content := range img.blobs {
		resp, body := do(t, http.MethodPost, base+"/v2/"+img.repo+"/blobs/uploads/", nil, nil, true)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
		loc := resp.Header.Get("Location")
		if strings.HasPrefix(loc, "/") {
			loc = base + loc
		}
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		resp, body = do(t, http.MethodPut, loc+sep+"digest="+digest, content, map[string]string{"Content-Type": "application/octet-stream"}, true)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	}
	resp, body := do(t, http.MethodPut, base+"/v2/"+img.repo+"/manifests/"+img.tag, img.manifest,
		map[string]string{"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, true)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
}

// pull fetches the manifest by tag and every blob by digest, anonymously, and checks the
// content against the pushed image.
func pull(t *testing.T, base string, img testImage) {
	t.Helper()
	resp, body := do(t, http.MethodGet, base+"/v2/"+img.repo+"/manifests/"+img.tag, nil,
		map[string]string{"Accept": "application/vnd.oci.image.manifest.v1+json"}, false)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, img.manifest, body)
	assert.Equal(t, img.manifestDigest, resp.Header.Get("Docker-Content-Digest"))
	for digest, content := range img.blobs {
		resp, body := do(t, http.MethodGet, base+"/v2/"+img.repo+"/blobs/"+digest, nil, nil, false)
		require.Equal(t, http.StatusOK, resp.StatusCode, "blob %s: %s", digest, body)
		assert.Equal(t, digest, digestOf(body))
		assert.Equal(t, content, body)
	}
}

// TestRenderedConfigServesAsPullThroughCache proves the registry configuration the
// operator renders is real: the CNCF distribution registry runs with exactly that
// config.yml (only the listen address and the cache directory moved to loopback and a
// temporary directory) and the credentials wired the way the StatefulSet wires them, in
// front of a second registry with basic auth acting as the upstream. A test image pushed
// upstream is pulled through the mirror, and pulled again from the cache once the
// upstream is gone.
func TestRenderedConfigServesAsPullThroughCache(t *testing.T) {
	if os.Getenv("QUARTET_SKIP_INTEGRATION") != "" {
		t.Skip("QUARTET_SKIP_INTEGRATION set")
	}
	upstreamPort, mirrorPort := freePort(t), freePort(t)
	upstreamBase := fmt.Sprintf("http://127.0.0.1:%d", upstreamPort)
	mirrorBase := fmt.Sprintf("http://127.0.0.1:%d", mirrorPort)

	// The upstream: a plain registry that wants a password.
	authDir := t.TempDir()
	htpasswd := filepath.Join(authDir, "htpasswd")
	require.NoError(t, os.WriteFile(htpasswd, []byte(upstreamUser+":"+upstreamBcrypt+"\n"), 0o600))
	upstreamConfig := fmt.Sprintf(`version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: %q}}
http: {addr: "127.0.0.1:%d"}
auth: {htpasswd: {realm: upstream, path: %q}}
`, t.TempDir(), upstreamPort, htpasswd)
	stopUpstream := startRegistry(t, "upstream", upstreamConfig, nil, upstreamBase, "/v2/", http.StatusUnauthorized)
	img := newTestImage()
	push(t, upstreamBase, img)
	resp, _ := do(t, http.MethodGet, upstreamBase+"/v2/"+img.repo+"/manifests/"+img.tag, nil, nil, false)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the upstream refuses anonymous pulls")

	// The mirror: exactly what the operator renders, for a mirror of that upstream.
	m := &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Name: "loop", Namespace: "test"},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{
			Upstream:             upstreamBase + "/",
			CacheTTL:             &metav1.Duration{Duration: time.Hour},
			CredentialsSecretRef: &mirrorsv1alpha1.SecretReference{Name: "upstream-login"},
		},
	}
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(renderRegistryConfig(m)), &cfg))
	require.Equal(t, fmt.Sprintf(":%d", RegistryPort), cfg["http"].(map[string]any)["addr"])
	require.Equal(t, cacheMountPath, cfg["storage"].(map[string]any)["filesystem"].(map[string]any)["rootdirectory"])
	cfg["http"].(map[string]any)["addr"] = fmt.Sprintf("127.0.0.1:%d", mirrorPort)
	cfg["storage"].(map[string]any)["filesystem"].(map[string]any)["rootdirectory"] = t.TempDir()

	// Credentials as the StatefulSet passes them: the Secret's keys as files, read by the
	// credential helper (the manager binary, under its helper name) that the config names.
	sts := &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desiredStatefulSet(m, testImages, "x"), sts))
	container := sts.Spec.Template.Spec.Containers[0]
	credDir := t.TempDir()
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			require.Equal(t, "upstream-login", v.Secret.SecretName)
			secret := map[string]string{"username": upstreamUser, "password": upstreamPassword}
			for _, item := range v.Secret.Items {
				require.NoError(t, os.WriteFile(filepath.Join(credDir, item.Path), []byte(secret[item.Key]), 0o400))
			}
		}
	}
	helperDir := t.TempDir()
	proxy := cfg["proxy"].(map[string]any)
	exec := proxy["exec"].(map[string]any)
	require.Equal(t, helperMountPath+"/"+registrycreds.HelperName, exec["command"])
	exec["command"] = buildCredentialHelper(t, helperDir)
	mirrorConfig, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	env := []string{registrycreds.DirEnv + "=" + credDir}
	// The registry's own readiness path, as the StatefulSet probes it.
	probe := container.ReadinessProbe.HTTPGet.Path
	stopMirror := startRegistry(t, "mirror", string(mirrorConfig), env, mirrorBase, probe, http.StatusOK)

	pull(t, mirrorBase, img)
	resp, body := do(t, http.MethodPut, mirrorBase+"/v2/"+img.repo+"/manifests/v2", img.manifest,
		map[string]string{"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, false)
	assert.GreaterOrEqual(t, resp.StatusCode, 400, "a pull-through cache refuses pushes: %s", body)

	// The blobs are cached: they still come when the upstream is gone.
	stopUpstream()
	_, err = http.Get(upstreamBase + "/v2/")
	require.Error(t, err, "upstream stopped")
	for digest, content := range img.blobs {
		resp, body := do(t, http.MethodGet, mirrorBase+"/v2/"+img.repo+"/blobs/"+digest, nil, nil, false)
		require.Equal(t, http.StatusOK, resp.StatusCode, "cached blob %s", digest)
		assert.Equal(t, content, body)
	}
	t.Logf("pulled %s:%s (%d blobs) through the mirror on port %s", img.repo, img.tag, len(img.blobs), strconv.Itoa(mirrorPort))

	// The data centre's outside connection is down and the mirror restarts (a node reboot,
	// an eviction): it must start and keep serving what it cached. With the registry's own
	// proxy.username/password it would panic at start trying to reach the upstream.
	stopMirror()
	startRegistry(t, "mirror after restart", string(mirrorConfig), env, mirrorBase, probe, http.StatusOK)
	resp, body = do(t, http.MethodGet, mirrorBase+"/v2/"+img.repo+"/manifests/"+img.manifestDigest, nil,
		map[string]string{"Accept": "application/vnd.oci.image.manifest.v1+json"}, false)
	require.Equal(t, http.StatusOK, resp.StatusCode, "cached manifest by digest after a restart without upstream: %s", body)
	for digest, content := range img.blobs {
		resp, body := do(t, http.MethodGet, mirrorBase+"/v2/"+img.repo+"/blobs/"+digest, nil, nil, false)
		require.Equal(t, http.StatusOK, resp.StatusCode, "cached blob %s after a restart", digest)
		assert.Equal(t, content, body)
	}
}

// buildCredentialHelper builds the manager into dir under the credential helper's name,
// as the registry pod's init container installs it.
func buildCredentialHelper(t *testing.T, dir string) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	out := filepath.Join(dir, registrycreds.HelperName)
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the manager as the credential helper: %s", b)
	return out
}
