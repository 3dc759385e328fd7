package registrymirror

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/scope"
)

// A mirror with node access pins the images the pods run from its host, which its registry
// never evicts and warms its cache with (cmd/mirror-registry, --pinned-file).
const (
	// maxPinnedImages bounds the list (about 100 bytes a line, well under a ConfigMap's
	// 1 MiB); status.imagesInUse counts all of them.
	maxPinnedImages = 5000
	pinnedImagesKey = "pinned-images"
	// podListTimeout bounds waiting for the pod cache: its first list starts a watch, which
	// RBAC or a namespace-scoped install may refuse.
	podListTimeout = 30 * time.Second
)

// imageInUse is an image a pod runs, by digest, with the tag its spec names.
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

// imagesInUse returns the distinct images the running pods run from host, sorted: digests
// from the statuses' imageIDs and the specs, tags from the specs.
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
	out := slices.Collect(maps.Keys(seen))
	slices.SortFunc(out, func(a, b imageInUse) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// parseImageInUse reads a reference with a digest ("nginx@sha256:…", "docker-pullable://…").
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

// renderPinnedImages is the pinned-images file: one repository[:tag]@digest a line.
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

// StripPodImages keeps of a Pod what imagesInUse reads, about 300 bytes.
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

// newPodCache builds the cache of running pods for imagesInUse; its informer starts with
// the first List.
func newPodCache(mgr ctrl.Manager, ns scope.Namespaces) (cache.Cache, error) {
	notEnded := fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
	return scope.NewCache(mgr, ns, "pod", map[client.Object]cache.ByObject{&corev1.Pod{}: {Field: notEnded, Transform: StripPodImages}}, false)
}

// pinnedImages returns the pinned-images file and the count of images in use (nil: no node
// access). While pods cannot be listed, the file and count stay (none would evict them).
func (r *Reconciler) pinnedImages(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, host string, granted bool) (file string, inUse *int32) {
	if !granted || r.Pods == nil {
		return renderPinnedImages(host, nil, false), nil
	}
	listCtx, cancel := context.WithTimeout(ctx, podListTimeout)
	var pods corev1.PodList
	err := r.Pods.List(listCtx, &pods, client.UnsafeDisableDeepCopy)
	cancel()
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Kept the pinned images as they are: listing pods failed")
		live := &corev1.ConfigMap{}
		if gerr := r.Children.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: configMapName(m)}, live); gerr == nil {
			if f, ok := live.Data[pinnedImagesKey]; ok {
				return f, m.Status.ImagesInUse
			}
		}
		return renderPinnedImages(host, nil, true), m.Status.ImagesInUse
	}
	images := imagesInUse(pods.Items, host)
	n := int32(min(len(images), math.MaxInt32))
	return renderPinnedImages(host, images, true), &n
}
