package registrymirror

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/internal/operator"
)

// A mirror with node access serves every node's pulls of its host, so the images the
// cluster's pods run from that host are what an outage of the upstream link would stop.
// The mirror pins them (never evicted) and its registry warms its cache with them, those
// pulled before the mirror existed included (cmd/mirror-registry, --pinned-file). The
// pins go into the registry's ConfigMap (pinnedImagesKey), re-read by the registry when
// the kubelet updates the file.

// maxPinnedImages bounds the pinned list (about 100 bytes a line, well under a
// ConfigMap's 1 MiB). status.imagesInUse counts all of them.
const maxPinnedImages = 5000

// pinnedImagesKey is the registry ConfigMap's key holding the pinned images, mounted as
// configMountPath/pinnedImagesKey.
const pinnedImagesKey = "pinned-images"

// imageInUse is an image a pod runs, by digest, in the mirror's terms: the repository
// without the registry host, and the tag the pod's spec names, if any (the registry caches
// it too, so the tag resolves while the upstream is down).
type imageInUse struct {
	repository string
	tag        string
	digest     string
}

func (i imageInUse) String() string {
	if i.tag != "" {
		return i.repository + ":" + i.tag + "@" + i.digest
	}
	return i.repository + "@" + i.digest
}

// imagesInUse returns the distinct images by digest that the pods run from host (a
// RegistryHostGrant's host: "docker.io", "registry.example:5000"), sorted. A container's
// digest comes from its status' imageID (what the node resolved), or from its spec's image
// when that names a digest; a container known only by tag (not started yet) has none. The
// tag comes from the spec's image of the container of the status' name. Pods that ended
// are skipped.
func imagesInUse(pods []corev1.Pod, host string) []imageInUse {
	seen := map[imageInUse]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		specImage := map[string]string{}
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			specImage[c.Name] = c.Image
			if img, ok := parseImageInUse(c.Image, host); ok {
				seen[img] = true
			}
		}
		for _, c := range p.Spec.EphemeralContainers {
			specImage[c.Name] = c.Image
		}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses) {
			if img, ok := parseImageInUse(cs.ImageID, host); ok {
				img.tag = tagOf(specImage[cs.Name], host, img.repository)
				seen[img] = true
			}
		}
	}
	out := make([]imageInUse, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b imageInUse) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// parseImageInUse reads an image reference with a digest ("nginx@sha256:…",
// "docker.io/library/nginx:1.27@sha256:…", an imageID "docker-pullable://…@sha256:…")
// and says whether it is from host. A bare image ID ("sha256:…") names no repository.
func parseImageInUse(ref, host string) (imageInUse, bool) {
	if i := strings.Index(ref, "://"); i >= 0 {
		ref = ref[i+3:]
	}
	if ref == "" || !strings.Contains(ref, "@") {
		return imageInUse{}, false
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return imageInUse{}, false
	}
	digested, ok := named.(reference.Digested)
	if !ok || reference.Domain(named) != host {
		return imageInUse{}, false
	}
	img := imageInUse{repository: reference.Path(named), digest: digested.Digest().String()}
	if t, ok := named.(reference.Tagged); ok {
		img.tag = t.Tag()
	}
	return img, true
}

// tagOf is the tag of image when it is of host and repository; "" otherwise.
func tagOf(image, host, repository string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil || reference.Domain(named) != host || reference.Path(named) != repository {
		return ""
	}
	if t, ok := named.(reference.Tagged); ok {
		return t.Tag()
	}
	return ""
}

// renderPinnedImages is the pinned-images file: a header, then one
// repository[:tag]@digest a line, at most maxPinnedImages of them.
func renderPinnedImages(host string, images []imageInUse, granted bool) string {
	var b strings.Builder
	b.WriteString("# Written by Quartet: images by digest that pods run from ")
	b.WriteString(host)
	b.WriteString(".\n# The registry never evicts them and fetches those it does not hold.\n")
	if !granted {
		b.WriteString("# None: the mirror has no node access (RegistryHostGrant), so it does not serve the nodes.\n")
		return b.String()
	}
	if len(images) > maxPinnedImages {
		fmt.Fprintf(&b, "# %d images in use; the first %d are pinned.\n", len(images), maxPinnedImages)
		images = images[:maxPinnedImages]
	}
	for _, i := range images {
		b.WriteString(i.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// StripPodImages keeps of a Pod what imagesInUse reads: name, namespace, UID and
// resourceVersion, the phase, the containers' names and images and the statuses' names and
// imageIDs. The pod cache holds nothing else, about 300 bytes a pod.
func StripPodImages(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil // a tombstone
	}
	out := &corev1.Pod{}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	out.Status.Phase = p.Status.Phase
	images := func(cs []corev1.Container) []corev1.Container {
		r := make([]corev1.Container, len(cs))
		for i, c := range cs {
			r[i] = corev1.Container{Name: c.Name, Image: c.Image}
		}
		return r
	}
	statuses := func(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
		r := make([]corev1.ContainerStatus, len(ss))
		for i, s := range ss {
			r[i] = corev1.ContainerStatus{Name: s.Name, ImageID: s.ImageID}
		}
		return r
	}
	out.Spec.InitContainers, out.Spec.Containers = images(p.Spec.InitContainers), images(p.Spec.Containers)
	if len(p.Spec.EphemeralContainers) > 0 {
		out.Spec.EphemeralContainers = make([]corev1.EphemeralContainer, len(p.Spec.EphemeralContainers))
		for i, c := range p.Spec.EphemeralContainers {
			out.Spec.EphemeralContainers[i].Name, out.Spec.EphemeralContainers[i].Image = c.Name, c.Image
		}
	}
	out.Status.InitContainerStatuses = statuses(p.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = statuses(p.Status.ContainerStatuses)
	out.Status.EphemeralContainerStatuses = statuses(p.Status.EphemeralContainerStatuses)
	return out, nil
}

// newPodCache builds the cache of pods for imagesInUse: pods that have not ended, in the
// watched namespaces, stripped by StripPodImages. No informer runs until a mirror with
// node access first lists pods, so a manager without one never watches pods for it.
func newPodCache(mgr ctrl.Manager, watchNamespaces []string) (cache.Cache, error) {
	notEnded := fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		ByObject:          map[client.Object]cache.ByObject{&corev1.Pod{}: {Field: notEnded, Transform: StripPodImages}},
		DefaultNamespaces: operator.CacheNamespaces(watchNamespaces),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the pod cache: %w", err)
	}
	return c, nil
}

// podsInUse lists the pods of the pod cache (starting its informer on first use).
func (r *Reconciler) podsInUse(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.Pods.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods for the images in use: %w", err)
	}
	return pods.Items, nil
}
