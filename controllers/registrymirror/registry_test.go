package registrymirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/registrycreds"
	"github.com/quartet-operator/quartet/test/localcluster"
)

// registryVersion is the CNCF distribution registry hack/build-registry.sh builds: the
// tests' upstream, and the registry Quartet 0.2.0 ran.
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

	mirrorRegistryBuildOnce sync.Once
	mirrorRegistryBin       string
	mirrorRegistryBuildErr  error
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

// mirrorRegistryExecutable returns the mirror's registry, cmd/mirror-registry, as
// hack/build-mirror-registry.sh (make mirror-registry) builds it into
// bin/mirror-registry/v<VERSION>/. It runs the script once per test binary: the source is
// this repository's, and an unchanged build costs seconds.
func mirrorRegistryExecutable(t *testing.T) string {
	t.Helper()
	mirrorRegistryBuildOnce.Do(func() {
		root, err := localcluster.RepoRoot()
		if err != nil {
			mirrorRegistryBuildErr = err
			return
		}
		cmd := exec.Command(filepath.Join(root, "hack", "build-mirror-registry.sh"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			mirrorRegistryBuildErr = fmt.Errorf("hack/build-mirror-registry.sh: %w\n%s", err, stderr.String())
			return
		}
		mirrorRegistryBin = strings.TrimSpace(string(out))
	})
	require.NoError(t, mirrorRegistryBuildErr)
	return mirrorRegistryBin
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := localcluster.FreePort()
	require.NoError(t, err)
	return p
}

// registryProcess is a registry the test started; it is killed when the test ends, and
// its log is shown if the test failed.
type registryProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	done    bool
}

// startProcess runs argv with extra environment, waits until GET base+probePath answers
// wantCode, and stops it when the test ends.
func startProcess(t *testing.T, name string, argv, env []string, base, probePath string, wantCode int) *registryProcess {
	t.Helper()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	require.NoError(t, err)
	cmd := exec.Command(argv[0], argv[1:]...)
	// Only what the pod would have: no REGISTRY_* from the test's own environment.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	p := &registryProcess{name: name, cmd: cmd, logPath: logf.Name(), exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("%s registry log:\n%s", name, p.log())
		}
	})
	require.Eventually(t, func() bool {
		select {
		case <-p.exited:
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
	case <-p.exited:
		t.Fatalf("%s registry exited", name)
	default:
	}
	return p
}

// startRegistry runs the distribution registry (`registry serve`) with config (YAML).
func startRegistry(t *testing.T, name, config string, env []string, base, probePath string, wantCode int) *registryProcess {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "config.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o600))
	return startProcess(t, name, []string{registryExecutable(t), "serve", cfgPath}, env, base, probePath, wantCode)
}

func (p *registryProcess) kill() {
	if p.done {
		return
	}
	p.done = true
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// terminate stops the process as the kubelet stops a container: SIGTERM, then SIGKILL once
// grace has passed. It fails the test if the process needed the SIGKILL.
func (p *registryProcess) terminate(t *testing.T, grace time.Duration) time.Duration {
	t.Helper()
	require.False(t, p.done, "%s already stopped", p.name)
	p.done = true
	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("%s did not stop within the grace period of %s after SIGTERM", p.name, grace)
	}
	return time.Since(start)
}

func (p *registryProcess) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// waitLogLine waits until the process logged a line with msg (logrus' msg="...") and every
// one of fields (key=value; logrus quotes a value with characters other than letters,
// digits and -._/@^+), and returns that line.
func (p *registryProcess) waitLogLine(t *testing.T, msg string, fields ...string) string {
	t.Helper()
	var found string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(p.log(), "\n") {
			if !strings.Contains(line, `msg="`+msg+`"`) {
				continue
			}
			words := strings.Fields(line)
			ok := true
			for _, f := range fields {
				k, v, _ := strings.Cut(f, "=")
				ok = ok && (slices.Contains(words, f) || slices.Contains(words, k+"="+strconv.Quote(v)))
			}
			if ok {
				found = line
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "%s: no log line %q with %v:\n%s", p.name, msg, fields, p.log())
	return found
}

// renderedMirror is what the operator renders for m, made to run on this host: the
// registry container's command and arguments exactly (the binary is bin/mirror-registry's),
// with the two paths the pod mounts moved to temporary directories: the ConfigMap's
// config.yml (whose listen address moves to loopback, its cache to cacheDir and, if
// helper is set, its credential helper to helper) and the cache volume.
type renderedMirror struct {
	argv      []string
	container corev1.Container
	pod       corev1.PodSpec
	config    map[string]any
	// pinnedFile is where the ConfigMap's pinned images are (written empty; a test puts
	// renderPinnedImages there).
	pinnedFile string
}

func renderMirror(t *testing.T, m *mirrorsv1alpha1.RegistryMirror, port int, cacheDir, helper string) renderedMirror {
	t.Helper()
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(renderRegistryConfig(m)), &cfg))
	require.Equal(t, fmt.Sprintf(":%d", RegistryPort), cfg["http"].(map[string]any)["addr"])
	require.Equal(t, cacheMountPath, cfg["storage"].(map[string]any)["filesystem"].(map[string]any)["rootdirectory"])
	cfg["http"].(map[string]any)["addr"] = fmt.Sprintf("127.0.0.1:%d", port)
	cfg["storage"].(map[string]any)["filesystem"].(map[string]any)["rootdirectory"] = cacheDir
	helperCfg := cfg["proxy"].(map[string]any)["exec"].(map[string]any)
	require.Equal(t, helperMountPath+"/"+registrycreds.HelperName, helperCfg["command"])
	if helper != "" {
		helperCfg["command"] = helper
	}
	config, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	cfgPath := filepath.Join(t.TempDir(), configFileName)
	require.NoError(t, os.WriteFile(cfgPath, config, 0o600))

	sts := &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desiredStatefulSet(m, testImages, "x", 0), sts))
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	require.Equal(t, []string{"/mirror-registry"}, c.Command)
	argv := []string{mirrorRegistryExecutable(t)}
	pinnedPath := filepath.Join(filepath.Dir(cfgPath), pinnedImagesKey)
	require.NoError(t, os.WriteFile(pinnedPath, nil, 0o600))
	moved := 0
	for _, a := range c.Args {
		switch a {
		case "--config=" + configMountPath + "/" + configFileName:
			a, moved = "--config="+cfgPath, moved+1
		case "--pinned-file=" + configMountPath + "/" + pinnedImagesKey:
			a, moved = "--pinned-file="+pinnedPath, moved+1
		}
		argv = append(argv, a)
	}
	require.Equal(t, 2, moved, "the registry reads the mounted config.yml and pinned images: %q", c.Args)
	return renderedMirror{argv: argv, container: c, pod: pod, config: cfg, pinnedFile: pinnedPath}
}

// gracePeriod is the pod's terminationGracePeriodSeconds.
func (r renderedMirror) gracePeriod(t *testing.T) time.Duration {
	t.Helper()
	require.NotNil(t, r.pod.TerminationGracePeriodSeconds)
	return time.Duration(*r.pod.TerminationGracePeriodSeconds) * time.Second
}

// stateFile reads mirror-registry's state file at its default place on the cache volume
// (<rootdirectory>/quartet/last-use): digest -> unix seconds of the last use.
func stateFile(t *testing.T, cacheDir string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cacheDir, "quartet", "last-use"))
	require.NoError(t, err, "the state file on the cache volume")
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n")[1:] { // a header line first
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		sec, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err, "line %q", line)
		out[f[0]] = sec
	}
	return out
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
// registry HTTP API, with the upstream's login when auth is set.
func push(t *testing.T, base string, img testImage, auth bool) {
	t.Helper()
	for digest, content := range img.blobs {
		resp, body := do(t, http.MethodPost, base+"/v2/"+img.repo+"/blobs/uploads/", nil, nil, auth)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)
		loc := resp.Header.Get("Location")
		if strings.HasPrefix(loc, "/") {
			loc = base + loc
		}
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		resp, body = do(t, http.MethodPut, loc+sep+"digest="+digest, content, map[string]string{"Content-Type": "application/octet-stream"}, auth)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	}
	resp, body := do(t, http.MethodPut, base+"/v2/"+img.repo+"/manifests/"+img.tag, img.manifest,
		map[string]string{"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, auth)
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

// pullByDigest fetches the manifest by digest and every blob, anonymously.
func pullByDigest(t *testing.T, base string, img testImage) {
	t.Helper()
	resp, body := do(t, http.MethodGet, base+"/v2/"+img.repo+"/manifests/"+img.manifestDigest, nil,
		map[string]string{"Accept": "application/vnd.oci.image.manifest.v1+json"}, false)
	require.Equal(t, http.StatusOK, resp.StatusCode, "manifest by digest: %s", body)
	assert.Equal(t, img.manifest, body)
	for digest, content := range img.blobs {
		resp, body := do(t, http.MethodGet, base+"/v2/"+img.repo+"/blobs/"+digest, nil, nil, false)
		require.Equal(t, http.StatusOK, resp.StatusCode, "blob %s: %s", digest, body)
		assert.Equal(t, content, body)
	}
}

// digests are the image's manifest and blobs, as the state file names them.
func (img testImage) digests() []string {
	out := []string{img.manifestDigest}
	for d := range img.blobs {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// waitCached waits until the cache in cacheDir holds the data of every digest of img:
// distribution's proxy stores a blob it serves from the upstream with a second fetch of its
// own, in the background (registry/proxy/proxyblobstore.go, ServeBlob), so a pull can end
// before the cache has it.
func waitCached(t *testing.T, cacheDir string, img testImage) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, d := range img.digests() {
			hex := strings.TrimPrefix(d, "sha256:")
			if _, err := os.Stat(filepath.Join(cacheDir, "docker/registry/v2/blobs/sha256", hex[:2], hex, "data")); err != nil {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "the cache holds every digest of %s:%s", img.repo, img.tag)
}

// TestRenderedRegistryServesAsPullThroughCache proves what the operator renders for the
// registry container is real: mirror-registry (cmd/mirror-registry, as make mirror-registry
// builds it) runs with exactly the StatefulSet's command line and the ConfigMap's
// config.yml (only the listen address and the two mounted paths moved to loopback and
// temporary directories) and the credentials wired the way the StatefulSet wires them, in
// front of a second registry with basic auth acting as the upstream. It accepts the rendered
// --retention and --max-disk-percent; a test image pushed upstream is pulled through it, and
// pulled again from the cache once the upstream is gone. Stopped as the kubelet stops it
// (SIGTERM, then the grace period), it saves the last uses into its state file on the cache
// volume; started again with the upstream still gone, it reads them back and serves the
// cache.
//
// The retention itself (kept when pulled within it, however long ago first fetched;
// deleted when not) is proven in cmd/mirror-registry with a fake clock
// (TestMirrorKeepsContentUsedWithinRetention): the API allows no retention under 1h, and the
// binary takes time from the wall clock only.
func TestRenderedRegistryServesAsPullThroughCache(t *testing.T) {
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
	upstream := startRegistry(t, "upstream", upstreamConfig, nil, upstreamBase, "/v2/", http.StatusUnauthorized)
	img := newTestImage()
	push(t, upstreamBase, img, true)
	resp, _ := do(t, http.MethodGet, upstreamBase+"/v2/"+img.repo+"/manifests/"+img.tag, nil, nil, false)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the upstream refuses anonymous pulls")

	// The mirror: exactly what the operator renders, for a mirror of that upstream.
	m := &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Name: "loop", Namespace: "test"},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{
			Upstream:             upstreamBase + "/",
			CacheTTL:             &metav1.Duration{Duration: time.Minute}, // deprecated: ignored
			Retention:            &metav1.Duration{Duration: 2 * time.Hour},
			MaxDiskPercent:       ptr.To[int32](99),
			CredentialsSecretRef: &mirrorsv1alpha1.SecretReference{Name: "upstream-login"},
		},
	}
	cacheDir := t.TempDir()
	rendered := renderMirror(t, m, mirrorPort, cacheDir, buildCredentialHelper(t, t.TempDir()))
	require.NotContains(t, rendered.config["proxy"], "ttl", "cacheTTL is not rendered")

	// Credentials as the StatefulSet passes them: the Secret's keys as files, read by the
	// credential helper (the manager binary, under its helper name) that the config names.
	credDir := t.TempDir()
	for _, v := range rendered.pod.Volumes {
		if v.Secret != nil {
			require.Equal(t, "upstream-login", v.Secret.SecretName)
			secret := map[string]string{"username": upstreamUser, "password": upstreamPassword}
			for _, item := range v.Secret.Items {
				require.NoError(t, os.WriteFile(filepath.Join(credDir, item.Path), []byte(secret[item.Key]), 0o400))
			}
		}
	}
	env := []string{registrycreds.DirEnv + "=" + credDir}
	// The registry's own readiness path, as the StatefulSet probes it.
	probe := rendered.container.ReadinessProbe.HTTPGet.Path
	mirror := startProcess(t, "mirror", rendered.argv, env, mirrorBase, probe, http.StatusOK)
	mirror.waitLogLine(t, "Serving the mirror", "retention=2h0m0s", "maxDiskPercent=99", "upstream="+upstreamBase)

	pull(t, mirrorBase, img)
	resp, body := do(t, http.MethodPut, mirrorBase+"/v2/"+img.repo+"/manifests/v2", img.manifest,
		map[string]string{"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, false)
	assert.GreaterOrEqual(t, resp.StatusCode, 400, "a pull-through cache refuses pushes: %s", body)

	// The image is cached: it still comes, by tag and by digest, when the upstream is gone.
	waitCached(t, cacheDir, img)
	upstream.kill()
	_, err := http.Get(upstreamBase + "/v2/")
	require.Error(t, err, "upstream stopped")
	pull(t, mirrorBase, img)
	pullByDigest(t, mirrorBase, img)
	t.Logf("pulled %s:%s (%d blobs) through the mirror on port %s", img.repo, img.tag, len(img.blobs), strconv.Itoa(mirrorPort))

	// The pod stops (a node drain, a rollout): within its grace period the registry drains
	// and saves the last uses on the cache volume.
	pulled := time.Now()
	took := mirror.terminate(t, rendered.gracePeriod(t))
	t.Logf("SIGTERM to exit: %s (grace period %s)", took.Round(time.Millisecond), rendered.gracePeriod(t))
	saved := stateFile(t, cacheDir)
	assert.ElementsMatch(t, img.digests(), slices.Collect(maps.Keys(saved)), "every digest of the image has a last use")
	for d, sec := range saved {
		assert.InDelta(t, pulled.Unix(), sec, 60, "%s: last used at the pulls above", d)
	}

	// The data centre's outside connection is down and the mirror starts again: it must
	// start, read its last uses back and keep serving what it cached. (With the registry's
	// own proxy.username/password it would panic at start trying to reach the upstream.)
	again := startProcess(t, "mirror after restart", rendered.argv, env, mirrorBase, probe, http.StatusOK)
	again.waitLogLine(t, "Restored cache last uses", "digests=3", "withSavedLastUse=3", "usedNow=0")
	pullByDigest(t, mirrorBase, img)
	pull(t, mirrorBase, img)
}

// TestRenderedRegistryWarmsThePodsImages (issue 22, part 2): an image a node pulled
// straight from the upstream, before any mirror existed, runs in a pod. The operator pins
// it (imagesInUse of the pod's imageID, rendered as the ConfigMap's pinned-images), and
// mirror-registry, run with exactly the StatefulSet's command line, fetches it on its own:
// the manager's probe reads that it holds it, and it is served once the upstream is gone,
// by digest and by the pod's tag, although no client ever pulled it through the mirror.
func TestRenderedRegistryWarmsThePodsImages(t *testing.T) {
	if os.Getenv("QUARTET_SKIP_INTEGRATION") != "" {
		t.Skip("QUARTET_SKIP_INTEGRATION set")
	}
	upstreamPort, mirrorPort := freePort(t), freePort(t)
	upstreamBase := fmt.Sprintf("http://127.0.0.1:%d", upstreamPort)
	mirrorAddr := fmt.Sprintf("127.0.0.1:%d", mirrorPort)
	upstreamConfig := fmt.Sprintf(`version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: %q}}
http: {addr: "127.0.0.1:%d"}
`, t.TempDir(), upstreamPort)
	upstream := startRegistry(t, "upstream", upstreamConfig, nil, upstreamBase, "/v2/", http.StatusOK)
	img := newTestImage()
	push(t, upstreamBase, img, false)

	m := &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: "test"},
		Spec:       mirrorsv1alpha1.RegistryMirrorSpec{Upstream: upstreamBase, Retention: &metav1.Duration{Duration: time.Hour}},
	}
	host, err := HostsDir(m.Spec.Upstream)
	require.NoError(t, err)
	running := pod("apps", "web", corev1.PodRunning, []string{host + "/" + img.repo + ":" + img.tag},
		host+"/"+img.repo+"@"+img.manifestDigest)
	pinned := pinFairly(imagesInUse([]corev1.Pod{running}, host), maxPinnedImages)
	require.Len(t, pinned.images, 1)

	rendered := renderMirror(t, m, mirrorPort, t.TempDir(), "")
	require.NoError(t, os.WriteFile(rendered.pinnedFile, []byte(renderPinnedImages(host, pinned, true)), 0o600))
	mirror := startProcess(t, "mirror", rendered.argv, nil, "http://"+mirrorAddr, rendered.container.ReadinessProbe.HTTPGet.Path, http.StatusOK)
	defer mirror.kill()

	prober := newTestProber(loopback)
	var rep CacheReport
	require.Eventually(t, func() bool {
		rep, err = prober.Cache(context.Background(), mirrorAddr)
		return err == nil && !rep.LastPass.IsZero()
	}, 30*time.Second, 100*time.Millisecond, "the first warm pass runs once the cache is scanned")
	assert.Equal(t, int32(1), rep.Pinned)
	assert.Equal(t, int32(1), rep.Cached)
	mirror.waitLogLine(t, "Warmed the cache with pinned images", "pinned=1", "cached=1", "blobsFetched=2")

	upstream.kill()
	pullByDigest(t, "http://"+mirrorAddr, img)
	pull(t, "http://"+mirrorAddr, img) // by the pod's tag, cached with the image
}

// TestUpgradeFrom020KeepsTheCache: a cache that Quartet 0.2.0's registry filled (plain
// distribution v3.0.0, `registry serve`, with the config.yml 0.2.0 rendered: the same as
// now plus proxy.ttl from spec.cacheTTL and without http.draintimeout) is served by
// mirror-registry run as 0.3.0 renders it on the same volume, with the upstream gone. The
// state file does not exist yet, so every cached digest counts as used at the start (kept
// for at least one retention), and is saved at the next stop.
func TestUpgradeFrom020KeepsTheCache(t *testing.T) {
	if os.Getenv("QUARTET_SKIP_INTEGRATION") != "" {
		t.Skip("QUARTET_SKIP_INTEGRATION set")
	}
	upstreamPort, mirrorPort := freePort(t), freePort(t)
	upstreamBase := fmt.Sprintf("http://127.0.0.1:%d", upstreamPort)
	mirrorBase := fmt.Sprintf("http://127.0.0.1:%d", mirrorPort)
	upstream := startRegistry(t, "upstream", fmt.Sprintf(`version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: %q}}
http: {addr: "127.0.0.1:%d"}
`, t.TempDir(), upstreamPort), nil, upstreamBase, "/v2/", http.StatusOK)
	img := newTestImage()
	push(t, upstreamBase, img, false)

	m := &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "test"},
		Spec:       mirrorsv1alpha1.RegistryMirrorSpec{Upstream: upstreamBase, CacheTTL: &metav1.Duration{Duration: 168 * time.Hour}},
	}
	cacheDir := t.TempDir()
	// No upstream here asks for credentials: the helper is never run.
	rendered := renderMirror(t, m, mirrorPort, cacheDir, "/nonexistent/docker-credential-quartet")

	// 0.2.0: distribution's registry with 0.2.0's config.yml.
	old := rendered.config
	delete(old["http"].(map[string]any), "draintimeout")
	old["proxy"].(map[string]any)["ttl"] = "168h0m0s"
	oldConfig, err := yaml.Marshal(old)
	require.NoError(t, err)
	v020 := startRegistry(t, "0.2.0 registry", string(oldConfig), nil, mirrorBase, "/", http.StatusOK)
	pull(t, mirrorBase, img)
	waitCached(t, cacheDir, img)
	v020.kill()
	upstream.kill()
	_, err = os.Stat(filepath.Join(cacheDir, "quartet"))
	require.True(t, os.IsNotExist(err), "0.2.0 kept no last uses")

	// 0.3.0 on the same volume, the upstream gone.
	upgraded := time.Now()
	v030 := startProcess(t, "0.3.0 mirror-registry", rendered.argv, nil, mirrorBase, rendered.container.ReadinessProbe.HTTPGet.Path, http.StatusOK)
	v030.waitLogLine(t, "Restored cache last uses", "digests=3", "withSavedLastUse=0", "usedNow=3")
	v030.waitLogLine(t, "Serving the mirror", "retention=720h0m0s", "maxDiskPercent=85")
	pull(t, mirrorBase, img)
	pullByDigest(t, mirrorBase, img)
	v030.terminate(t, rendered.gracePeriod(t))
	saved := stateFile(t, cacheDir)
	assert.ElementsMatch(t, img.digests(), slices.Collect(maps.Keys(saved)), "the old cache is known now")
	for d, sec := range saved {
		assert.InDelta(t, upgraded.Unix(), sec, 60, "%s: used at the upgrade", d)
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
