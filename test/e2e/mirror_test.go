package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/registrymirror"
	"github.com/quartet-operator/quartet/test/realnode"
	"github.com/quartet-operator/quartet/test/testenv"
)

// Node access a cluster admin grants the test mirrors (RegistryHostGrant capabilities):
// the tests pull by tag through the mirror, also while the upstream is down, so the mirror
// resolves tags too.
var (
	pullOnly    = []mirrorsv1alpha1.Capability{mirrorsv1alpha1.CapabilityPull}
	pullResolve = []mirrorsv1alpha1.Capability{mirrorsv1alpha1.CapabilityPull, mirrorsv1alpha1.CapabilityResolve}
)

// grantNodes is the cluster admin's consent that mirror ns/name configures the nodes for
// upstream's host: a RegistryHostGrant with the capabilities given, allowing a plain-HTTP
// upstream (every upstream of these tests is one) and, when withCredentials, a mirror
// with upstream credentials. The grant is deleted when the test ends.
func grantNodes(t testing.TB, ns, name, upstream string, withCredentials bool, capabilities []mirrorsv1alpha1.Capability) {
	t.Helper()
	host, err := registrymirror.HostsDir(upstream)
	require.NoError(t, err)
	testenv.GrantNodesSpec(t, env.Client, mirrorsv1alpha1.RegistryHostGrantSpec{
		Host: host, Mirror: mirrorsv1alpha1.MirrorReference{Namespace: ns, Name: name}, Capabilities: capabilities,
		AllowPlainHTTP: strings.HasPrefix(upstream, "http://"), AllowCredentials: withCredentials,
	})
}

// newMirror creates a RegistryMirror that configures the node for upstream, with the
// cluster admin's grant (capabilities; allowCredentials when secret is set), and waits
// until it is Ready (its registry answers through its Service, the node agent wrote
// hosts.toml, the upstream answered) with node access granted.
func newMirror(t testing.TB, ns, name, upstream string, secret string, capabilities []mirrorsv1alpha1.Capability) *mirrorsv1alpha1.RegistryMirror {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	grantNodes(t, ns, name, upstream, secret != "", capabilities)
	m := &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       mirrorsv1alpha1.RegistryMirrorSpec{Upstream: upstream, Storage: resource.MustParse("1Gi"), ConfigureNodes: true},
	}
	if secret != "" {
		m.Spec.CredentialsSecretRef = &mirrorsv1alpha1.SecretReference{Name: secret}
	}
	require.NoError(t, env.Client.Create(ctx, m))
	since := time.Now()
	require.NoError(t, env.WaitMirrorReady(ctx, ns, name, 4*time.Minute))
	timing("RegistryMirror "+name+": create to Ready (registry answering, hosts.toml written)", since)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(m), m))
	access := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionNodeAccess)
	require.NotNil(t, access, "the NodeAccess condition")
	require.Equal(t, metav1.ConditionTrue, access.Status, "%s: %s", access.Reason, access.Message)
	return m
}

// runImage starts a pod of image (pulled at every start) and waits until it runs.
func runImage(t testing.TB, ns, name, image string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "main", Image: image, ImagePullPolicy: corev1.PullAlways, Command: []string{"sleep", "3600"}}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, pod))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod) })
	require.NoError(t, realnode.WaitFor(ctx, "pod "+name+" running "+image, 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		for _, p := range env.FindPodProblems(ctx, ns) {
			if strings.HasSuffix(p.Pod, "/"+name) && p.Hopeless {
				return false, "", realnode.Failed{Reason: p.String()}
			}
		}
		return pod.Status.Phase == corev1.PodRunning, string(pod.Status.Phase), nil
	}))
	return pod
}

// pullFails starts a pod of image and waits until its pull fails.
func pullFails(t *testing.T, ns, name, image string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "main", Image: image, ImagePullPolicy: corev1.PullAlways, Command: []string{"sleep", "3600"}}}},
	}
	require.NoError(t, env.Client.Create(ctx, pod))
	defer func() { _ = env.Client.Delete(context.Background(), pod) }()
	var why string
	require.NoError(t, realnode.WaitFor(ctx, "the pull of "+image+" failing", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, "", err
		}
		if pod.Status.Phase == corev1.PodRunning {
			return false, "", realnode.Failed{Reason: "the pod runs: the pull succeeded"}
		}
		for _, st := range pod.Status.ContainerStatuses {
			if w := st.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				why = w.Message
				return true, "", nil
			}
		}
		return false, string(pod.Status.Phase), nil
	}))
	return why
}

// registryLog is the log of a mirror's registry pod (its requests, one line each).
func registryLog(t testing.TB, m *mirrorsv1alpha1.RegistryMirror) string {
	t.Helper()
	var b []byte
	// Logs come from the kubelet, which may be restarting (the fault test) and answer 404
	// until it knows the pod again.
	require.NoError(t, realnode.WaitFor(context.Background(), "the log of "+m.Name+"-registry-0", time.Minute, func(ctx context.Context) (bool, string, error) {
		var err error
		b, err = env.Clientset.CoreV1().Pods(m.Namespace).GetLogs(m.Name+"-registry-0", &corev1.PodLogOptions{Container: "registry"}).DoRaw(ctx)
		return err == nil, "", err
	}))
	return string(b)
}

// accessLine is one line of a registry's access log (combined log format).
// Its groups: the client's address, the method, the path and the status.
var accessLine = regexp.MustCompile(`^(\S+) - - \[[^\]]+\] "(GET|HEAD) (/v2/\S+) HTTP/[0-9.]+" (\d+) `)

// fetchers lists the client addresses that fetched a path starting with uri (under /v2/)
// from a registry and got 200, from its access log.
func fetchers(log, uri string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if addr, _, ok := accessed(line, uri); ok {
			out = append(out, addr)
		}
	}
	return out
}

// accessed reads one access log line: whether it is a request for a path starting with uri
// (under /v2/) that got 200, and then the client's address and the method.
func accessed(line, uri string) (addr, method string, ok bool) {
	m := accessLine.FindStringSubmatch(line)
	if m == nil || m[4] != "200" || (m[3] != uri && !strings.HasPrefix(m[3], uri+"?")) {
		return "", "", false
	}
	return m[1], m[2], true
}

func ctr(t testing.TB, args ...string) string {
	t.Helper()
	all := append([]string{"--address", env.Cluster.Node.ContainerdSocket, "--namespace", "k8s.io"}, args...)
	out, err := env.Cluster.NodeCommand(context.Background(), "ctr", all...).CombinedOutput()
	require.NoError(t, err, "ctr %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// removeImage deletes the pod and every name under which the node's containerd knows an
// image of repo (the tag, the digest and the ID the CRI records), then collects garbage, so
// the node holds none of its content.
func removeImage(t testing.TB, ns string, pod *corev1.Pod, repo string) {
	t.Helper()
	removeImages(t, ns, []*corev1.Pod{pod}, []string{repo})
}

// removeImages is removeImage for pods[i] and repos[i] at once: every pod is deleted before
// the first is waited for, and one garbage collection removes every image.
func removeImages(t testing.TB, ns string, pods []*corev1.Pod, repos []string) {
	t.Helper()
	require.Len(t, repos, len(pods))
	ctx := context.Background()
	for _, pod := range pods {
		require.Equal(t, ns, pod.Namespace)
		require.NoError(t, env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	}
	require.NoError(t, realnode.WaitFor(ctx, fmt.Sprintf("%d pods gone", len(pods)), time.Minute, func(ctx context.Context) (bool, string, error) {
		for _, pod := range pods {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
				return false, pod.Name + ": " + fmt.Sprint(err), nil
			}
		}
		return true, "", nil
	}))
	ofRepos := func(ref string) bool {
		return slices.ContainsFunc(repos, func(repo string) bool { return strings.Contains(ref, "/"+repo) })
	}
	// The kubelet removes a deleted pod's stopped containers in its own time; a container
	// record keeps its snapshot (the unpacked layers) alive, and containerd does not fetch a
	// layer it has unpacked. Remove them as `crictl rm` would, once their tasks are gone.
	require.NoError(t, realnode.WaitFor(ctx, fmt.Sprintf("the containers of %v stopped", repos), time.Minute, func(ctx context.Context) (bool, string, error) {
		var ids []string
		for _, line := range strings.Split(ctr(t, "containers", "ls"), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && ofRepos(f[1]) {
				ids = append(ids, f[0])
			}
		}
		tasks := ctr(t, "tasks", "ls")
		for _, id := range ids {
			if strings.Contains(tasks, id) {
				return false, "still running: " + id, nil
			}
		}
		for _, id := range ids {
			// The kubelet may remove it at the same moment: "not found" is as good.
			out, err := env.Cluster.NodeCommand(ctx, "ctr", "--address", env.Cluster.Node.ContainerdSocket, "--namespace", "k8s.io",
				"containers", "rm", id).CombinedOutput()
			if err != nil && !strings.Contains(string(out), "not found") {
				return false, "", fmt.Errorf("ctr containers rm %s: %v: %s", id, err, out)
			}
		}
		return true, "", nil
	}))
	var images [][]string // ref, type, digest, ...
	for _, line := range strings.Split(ctr(t, "images", "ls"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			images = append(images, f)
		}
	}
	var names []string
	for _, repo := range repos {
		var digests []string
		for _, f := range images {
			if strings.Contains(f[0], "/"+repo+":") {
				digests = append(digests, f[2])
			}
		}
		require.NotEmpty(t, digests, "the node has the image of %s", repo)
		for _, f := range images {
			if slices.Contains(digests, f[2]) && !slices.Contains(names, f[0]) {
				names = append(names, f[0])
			}
		}
	}
	ctr(t, append([]string{"images", "rm", "--sync"}, names...)...)
}

// hostsFiles reads every hosts.toml the node's containerd has (path -> content).
func hostsFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range testenv.Files(t, env.Cluster.Node.CertsDir) {
		b, err := os.ReadFile(filepath.Join(env.Cluster.Node.CertsDir, f))
		require.NoError(t, err)
		out[filepath.Join(env.Cluster.Node.CertsDir, f)] = string(b)
	}
	return out
}

// upstreamWithImage starts an upstream registry on port (with a login when bcrypt is set)
// that stops with the test, and pushes repo:1, the e2e image plus a layer of size random
// bytes; it returns the registry, the image reference and that layer's digest.
func upstreamWithImage(tb testing.TB, port int, user, password, bcrypt, repo string, size int) (*realnode.UpstreamRegistry, string, string) {
	tb.Helper()
	up, err := env.StartUpstreamRegistry(port, user, password, bcrypt)
	require.NoError(tb, err)
	tb.Cleanup(up.Stop)
	img, layer, err := env.TestImage(tb, size)
	require.NoError(tb, err)
	ref, err := up.Push(repo, "1", img)
	require.NoError(tb, err)
	return up, ref, layer
}

// TestMirrorServesPullsAndOutlivesItsUpstream is RegistryMirror's purpose: with a cluster
// admin's grant of pull and resolve for the upstream's host, a node pulls an image of the
// upstream's name through the mirror; the outside connection goes (the upstream stops)
// and the node loses the image; a new pod still starts by tag, served from the mirror's
// cache, while the mirror's status says the upstream is unreachable. Deleting the mirror
// takes its hosts.toml off the node and leaves every other one as it was.
func TestMirrorServesPullsAndOutlivesItsUpstream(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const ns = "mirror-e2e"
	before := hostsFiles(t)
	up, ref, layer := upstreamWithImage(t, 5002, "", "", "", "library/app", 1<<20)

	m := newMirror(t, ns, "upstream", "http://"+up.Host, "", pullResolve)
	hostsPath := filepath.Join(env.Cluster.Node.CertsDir, up.Host, "hosts.toml")
	hosts, err := os.ReadFile(hostsPath)
	require.NoError(t, err, "the node agent wrote containerd's hosts.toml")
	require.Contains(t, string(hosts), m.Status.NodeEndpoint)
	require.Contains(t, string(hosts), `capabilities = ["pull", "resolve"]`, "the grant's capabilities")
	t.Logf("hosts.toml written by the node agent:\n%s", hosts)

	since := time.Now()
	first := runImage(t, ns, "through-mirror", ref)
	timing("pull of a 1 MiB-layer image through a fresh mirror (pod Running)", since)
	mlog := registryLog(t, m)
	require.NotEmpty(t, fetchers(mlog, "/v2/library/app/manifests/1"), "the mirror served the manifest:\n%s", mlog)
	require.NotEmpty(t, fetchers(mlog, "/v2/library/app/blobs/"+layer), "the mirror served the layer")
	require.Contains(t, mlog, "?ns="+url.QueryEscape(up.Host), "containerd asked the mirror on the upstream's behalf (hosts.toml)")
	for _, addr := range fetchers(up.Log(), "/v2/library/app/blobs/"+layer) {
		require.True(t, strings.HasPrefix(addr, "10.244."), "only the mirror's pod (10.244.0.0/24) fetched from the upstream, not the node: %s", addr)
	}

	// The outside connection goes; the node loses the image and its content.
	up.Stop()
	removeImage(t, ns, first, "library/app")
	require.False(t, strings.Contains(ctr(t, "content", "ls"), layer), "the layer %s is gone from the node", layer)
	served := len(fetchers(mlog, "/v2/library/app/blobs/"+layer))
	runImage(t, ns, "from-cache", ref)
	require.Greater(t, len(fetchers(registryLog(t, m), "/v2/library/app/blobs/"+layer)), served, "the mirror served the layer again, from its cache")
	require.NoError(t, realnode.WaitFor(ctx, "status: upstream unreachable, mirror Ready", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, "", err
		}
		up := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable)
		ready := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionReady)
		// The second pull's blobs came from the cache: a hit ratio above 0.
		hits := m.Status.CacheHitPercent != nil && *m.Status.CacheHitPercent > 0
		ok := up != nil && up.Reason == mirrorsv1alpha1.ReasonUnreachable && ready != nil && ready.Status == metav1.ConditionTrue && hits
		return ok, fmt.Sprintf("%+v / %+v / cacheHitPercent %v", up, ready, deref(m.Status.CacheHitPercent)), nil
	}))
	t.Logf("status while the upstream is gone: %s; cacheHitPercent %d", conditionSummary(m.Status.Conditions), *m.Status.CacheHitPercent)
	requireEvent(t, ns, m.Name, "UpstreamUnreachable")

	// The mirror goes: its hosts.toml goes with it; the node's others stay as they were.
	require.NoError(t, env.Client.Delete(ctx, m))
	require.NoError(t, realnode.WaitFor(ctx, "hosts.toml removed", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		_, err := os.Stat(hostsPath)
		return os.IsNotExist(err), fmt.Sprint(err), nil
	}))
	after := hostsFiles(t)
	delete(after, hostsPath)
	require.Equal(t, before, after, "every hosts.toml the node had before is untouched")
	// A later pull no longer goes through the mirror: without the hosts.toml containerd
	// goes to the upstream host itself, with its defaults (HTTPS), which this plain-HTTP
	// upstream does not speak — the error names the upstream, not the mirror's endpoint.
	require.NoError(t, up.Start())
	why := pullFails(t, ns, "direct", ref)
	t.Logf("after the mirror's deletion: %s", why)
	require.Contains(t, why, "https://"+up.Host+"/v2/", "containerd went to the upstream directly")
	require.NotContains(t, why, strings.TrimPrefix(m.Status.NodeEndpoint, "http://"), "and not to the mirror")
}

// TestMirrorCredentialsFromSecret pulls through a mirror of an upstream that wants a
// login, changes the password (upstream and Secret) and pulls again without touching the
// mirror, and then finds the password nowhere the operator writes.
func TestMirrorCredentialsFromSecret(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const ns = "mirror-private"
	hash := func(pw string) string {
		b, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		require.NoError(t, err)
		return string(b)
	}
	pw1, pw2 := "first-Passw0rd-e2e", "second-Passw0rd-e2e"
	up, ref, _ := upstreamWithImage(t, 5003, "puller", pw1, hash(pw1), "private/app", 256<<10)
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "upstream-login", Namespace: ns},
		StringData: map[string]string{"username": "puller", "password": pw1}}
	require.NoError(t, env.Client.Create(ctx, secret))

	m := newMirror(t, ns, "private", "http://"+up.Host, secret.Name, pullResolve)
	runImage(t, ns, "with-login", ref)
	regPod := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name + "-registry-0"}, regPod))

	// The password changes upstream: the mirror's login fails until the Secret follows.
	require.NoError(t, up.SetPassword(pw2, hash(pw2)))
	img2, _, err := env.TestImage(t, 64<<10)
	require.NoError(t, err)
	ref2, err := up.Push("private/app", "2", img2)
	require.NoError(t, err)
	why := pullFails(t, ns, "stale-login", ref2)
	t.Logf("with the old password in the Secret: %s", why)
	secret.StringData = map[string]string{"password": pw2}
	require.NoError(t, env.Client.Update(ctx, secret))
	since := time.Now()
	attempt := 0
	require.NoError(t, realnode.WaitFor(ctx, "a pull with the rotated password", 4*time.Minute, func(ctx context.Context) (bool, string, error) {
		attempt++
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-login-%d", attempt), Namespace: ns},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: "main", Image: ref2, ImagePullPolicy: corev1.PullAlways, Command: []string{"sleep", "3600"}}}}}
		if err := env.Client.Create(ctx, pod); err != nil {
			return false, "", err
		}
		defer func() { _ = env.Client.Delete(context.Background(), pod) }()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err == nil && pod.Status.Phase == corev1.PodRunning {
				return true, "", nil
			}
			time.Sleep(time.Second)
		}
		return false, fmt.Sprintf("attempt %d: %s", attempt, env.PodProblems(ctx, ns)), nil
	}))
	timing("rotated credentials Secret to a pull that uses it (no restart)", since)
	current := &corev1.Pod{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(regPod), current))
	require.Equal(t, regPod.UID, current.UID, "the registry pod was not restarted")

	// No credential in plain text: not in any ConfigMap, the mirror's status, an Event,
	// or the specs of what the operator created.
	var haystack []string
	add := func(v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		haystack = append(haystack, string(b))
	}
	cms := &corev1.ConfigMapList{}
	require.NoError(t, env.Client.List(ctx, cms))
	add(cms)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(m), m))
	add(m)
	events := &corev1.EventList{}
	require.NoError(t, env.Client.List(ctx, events))
	add(events)
	for _, list := range []client.ObjectList{&corev1.PodList{}} {
		require.NoError(t, env.Client.List(ctx, list, client.InNamespace(ns)))
		add(list)
	}
	for _, pw := range []string{pw1, pw2} {
		for _, h := range haystack {
			require.NotContains(t, h, pw, "a password in plain text")
		}
	}
	t.Logf("checked %d ConfigMaps, %d Events, the mirror and the pods of %s: no password", len(cms.Items), len(events.Items), ns)
}

// TestMirrorPullsMultiArchIndex pulls an image index (linux/amd64 and linux/arm64) through
// the mirror: containerd picks the amd64 manifest, by digest, through the mirror.
func TestMirrorPullsMultiArchIndex(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	const ns = "mirror-multiarch"
	up, err := env.StartUpstreamRegistry(5004, "", "", "")
	require.NoError(t, err)
	t.Cleanup(up.Stop)
	amd, amdLayer, err := env.TestImage(t, 128<<10)
	require.NoError(t, err)
	arm, _, err := env.TestImage(t, 128<<10)
	require.NoError(t, err)
	cfg, err := arm.ConfigFile()
	require.NoError(t, err)
	cfg = cfg.DeepCopy()
	cfg.Architecture = "arm64"
	arm, err = mutate.ConfigFile(arm, cfg)
	require.NoError(t, err)
	index := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd, Descriptor: ggcrv1.Descriptor{Platform: &ggcrv1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: ggcrv1.Descriptor{Platform: &ggcrv1.Platform{OS: "linux", Architecture: "arm64"}}})
	ref, err := up.Push("library/multi", "1", index)
	require.NoError(t, err)
	amdDigest, err := amd.Digest()
	require.NoError(t, err)

	m := newMirror(t, ns, "multiarch", "http://"+up.Host, "", pullResolve)
	runImage(t, ns, "multiarch", ref)
	log := registryLog(t, m)
	require.NotEmpty(t, fetchers(log, "/v2/library/multi/manifests/1"), "the index, through the mirror")
	require.NotEmpty(t, fetchers(log, "/v2/library/multi/manifests/"+amdDigest.String()), "the amd64 manifest by digest, through the mirror")
	require.NotEmpty(t, fetchers(log, "/v2/library/multi/blobs/"+amdLayer), "the amd64 layer, through the mirror")
}

func conditionSummary(conds []metav1.Condition) string {
	var out []string
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, "; ")
}

// requireEvent waits for an Event of reason about the named object in ns.
func requireEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), "Event "+reason+" for "+name, time.Minute, func(ctx context.Context) (bool, string, error) {
		evs, err := env.Clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name == name {
				seen = append(seen, e.Reason)
				if e.Reason == reason {
					return true, "", nil
				}
			}
		}
		return false, fmt.Sprint(seen), nil
	}))
}
