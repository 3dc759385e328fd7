package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/internal/hoststoml"
	"github.com/quartet-operator/quartet/test/realnode"
)

// TestMirrorWarmsImagesPulledBeforeItExisted (issue 22, part 2): a pod runs an image the
// node pulled straight from the upstream, before any mirror existed. A mirror for that
// upstream, granted by the cluster admin, pins the pod's image and its registry fetches it
// on its own (no node pulls it through the mirror); status counts it in use and cached.
// Then the outside connection goes and the node loses the image: a new pod of it starts,
// served from the cache. Without warming the cache would not hold it, and the pull would
// fail.
func TestMirrorWarmsImagesPulledBeforeItExisted(t *testing.T) {
	requireEnv(t)
	t.Parallel() // isolated by namespace (main_test.go: which tests run in parallel)
	ctx := context.Background()
	const ns, name, repo = "mirror-warm", "warm", "library/early"
	up, ref, layer := upstreamWithImage(t, 5010, "", "", "", repo, 256<<10)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	// Before the mirror, the node pulls straight from the (plain-HTTP) upstream.
	hostsPath := filepath.Join(env.Cluster.Node.CertsDir, up.Host, "hosts.toml")
	require.NoError(t, os.MkdirAll(filepath.Dir(hostsPath), 0o755))
	hosts, err := hoststoml.Render("", hoststoml.File{
		Server: "http://" + up.Host,
		Mirror: hoststoml.Host{URL: "http://" + up.Host, Capabilities: []string{"pull", "resolve"}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hostsPath, hosts, 0o644))
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(hostsPath)) })
	early := runImage(t, ns, "early", ref)
	require.Len(t, early.Status.ContainerStatuses, 1)
	t.Logf("pulled before the mirror existed: %s (imageID %s)", ref, early.Status.ContainerStatuses[0].ImageID)
	require.NoError(t, os.Remove(hostsPath), "the node agent writes the mirror's own")

	since := time.Now()
	m := newMirror(t, ns, name, "http://"+up.Host, "", pullResolve)
	t.Cleanup(func() { deleteMirrorAndWaitForHostsFile(t, m, up.Host) })
	require.NoError(t, realnode.WaitFor(ctx, "status: 1 image in use, 1 cached", 3*time.Minute, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return false, "", err
		}
		in, cached := m.Status.ImagesInUse, m.Status.ImagesCached
		return in != nil && *in == 1 && cached != nil && *cached == 1, fmt.Sprintf("imagesInUse %v, imagesCached %v", deref(in), deref(cached)), nil
	}))
	timing("RegistryMirror: create to the running pod's image cached (imagesCached)", since)
	registry := registryPod(t, ns, name)
	line := requireLogLine(t, ns, registry.Name, "Warmed the cache with pinned images", "pinned=1", "cached=1")
	t.Logf("the registry: %s", line)
	fetched := fetchers(registryLog(t, m), "/v2/"+repo+"/blobs/"+layer)
	require.NotEmpty(t, fetched, "the registry fetched the layer")
	for _, f := range fetched {
		require.Contains(t, []string{"127.0.0.1", "::1"}, f, "only the registry itself asked for the layer: no node pulled it through the mirror")
	}

	// The outside connection goes; the node loses the image; a new pod of it starts.
	up.Stop()
	removeImage(t, ns, early, repo)
	runImage(t, ns, "after-outage", ref)
	require.Greater(t, len(fetchers(registryLog(t, m), "/v2/"+repo+"/blobs/"+layer)), len(fetched),
		"the node's pull was served by the mirror's cache")
}

func deref(p *int32) any {
	if p == nil {
		return "unset"
	}
	return *p
}
