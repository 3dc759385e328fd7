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
	// 1 MiB): --registrymirror-max-pinned-images is at most this, and this by default.
	maxPinnedImages = 5000
	// maxNamespaceSeries bounds quartet_registrymirror_pinned_images_by_namespace: a
	// series for each of the namespaces with the most images pinned, per mirror.
	maxNamespaceSeries = 10
	pinnedImagesKey    = "pinned-images"
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

// namespaceImages are the images one namespace's pods run from the mirror's host.
type namespaceImages struct {
	namespace string
	running   []imageInUse // of its running pods, sorted
	waiting   []imageInUse // of its pods a node accepted that do not run yet, sorted; none of running
}

// podCounts says whether a pod's images count and whether it runs. A pod that has ended
// does not count; nor does one that no node has accepted (no spec.nodeName: Pending,
// unschedulable or waiting for a scheduler), which anyone who may create pods can make
// by the thousand. A pod a node accepted counts before it runs (its images are being
// pulled), after the running ones.
func podCounts(p *corev1.Pod) (counts, running bool) {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false, false
	case corev1.PodRunning:
		return true, true
	}
	return p.Spec.NodeName != "", false
}

// imagesInUse returns, by namespace (sorted; those with any), the distinct images the pods
// that count (podCounts) run from host: digests from the statuses' imageIDs and the specs,
// tags from the specs.
func imagesInUse(pods []corev1.Pod, host string) []namespaceImages {
	byNamespace := map[string]map[imageInUse]bool{} // an image: whether a running pod runs it
	for i := range pods {
		p := &pods[i]
		counts, running := podCounts(p)
		if !counts {
			continue
		}
		for _, img := range podImages(p, host) {
			if byNamespace[p.Namespace] == nil {
				byNamespace[p.Namespace] = map[imageInUse]bool{}
			}
			byNamespace[p.Namespace][img] = byNamespace[p.Namespace][img] || running
		}
	}
	out := make([]namespaceImages, 0, len(byNamespace))
	for ns, images := range byNamespace {
		n := namespaceImages{namespace: ns}
		for _, img := range sortedImages(slices.Collect(maps.Keys(images))) {
			if images[img] {
				n.running = append(n.running, img)
			} else {
				n.waiting = append(n.waiting, img)
			}
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b namespaceImages) int { return strings.Compare(a.namespace, b.namespace) })
	return out
}

// podImages returns the images pod p runs from host (repeats possible).
func podImages(p *corev1.Pod, host string) []imageInUse {
	var out []imageInUse
	specImage := map[string]string{}
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		specImage[c.Name] = c.Image
		if img, ok := parseImageInUse(c.Image, host); ok {
			out = append(out, img)
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		specImage[c.Name] = c.Image
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses) {
		if img, ok := parseImageInUse(cs.ImageID, host); ok {
			img.tag = tagOf(specImage[cs.Name], host, img.repository)
			out = append(out, img)
		}
	}
	return out
}

// sortedImages returns the images sorted by their line in the pinned list.
func sortedImages(images []imageInUse) []imageInUse {
	slices.SortFunc(images, func(a, b imageInUse) int { return strings.Compare(a.String(), b.String()) })
	return images
}

// pinnedList is the list of pinned images and what it came to.
type pinnedList struct {
	images      []imageInUse   // sorted, at most the cap
	inUse       int            // distinct images the pods that count run (status.imagesInUse)
	byNamespace map[string]int // per namespace with images in use: how many of them are pinned
}

// pinFairly chooses at most limit images to pin, shared fairly among the namespaces:
// first the images of running pods, in rounds in which every namespace that has any left
// adds its next one (in its sorted order; the namespaces in name order), then, while
// room is left, those of pods still waiting on a node, in rounds again. An image already
// pinned for another namespace costs no turn. So each namespace gets an equal share of
// the list, and what a namespace does not use goes to the others in equal parts (a
// max-min fair split): no namespace's pods, whatever they are named, can push another's
// images off beyond its share. The last round may end part-way: namespaces earlier by
// name then have one image more.
func pinFairly(byNamespace []namespaceImages, limit int) pinnedList {
	pinned := map[imageInUse]bool{}
	var chosen []imageInUse
	for _, tier := range []func(namespaceImages) []imageInUse{
		func(n namespaceImages) []imageInUse { return n.running },
		func(n namespaceImages) []imageInUse { return n.waiting },
	} {
		next := make([]int, len(byNamespace))
		active := make([]int, 0, len(byNamespace))
		for i := range byNamespace {
			active = append(active, i)
		}
		for len(active) > 0 && len(chosen) < limit {
			left := active[:0]
			for _, i := range active {
				list := tier(byNamespace[i])
				for next[i] < len(list) && pinned[list[next[i]]] {
					next[i]++
				}
				if next[i] == len(list) || len(chosen) == limit {
					continue
				}
				pinned[list[next[i]]] = true
				chosen = append(chosen, list[next[i]])
				next[i]++
				left = append(left, i)
			}
			active = left
		}
	}
	out := pinnedList{images: chosen, byNamespace: make(map[string]int, len(byNamespace))}
	inUse := map[imageInUse]bool{}
	for _, n := range byNamespace {
		count := 0
		for _, img := range slices.Concat(n.running, n.waiting) {
			inUse[img] = true
			if pinned[img] {
				count++
			}
		}
		out.byNamespace[n.namespace] = count
	}
	out.inUse = len(inUse)
	sortedImages(out.images)
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
func renderPinnedImages(host string, list pinnedList, granted bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by Quartet: images by digest that pods run from %s.\n"+
		"# The registry never evicts them and fetches those it does not hold.\n", host)
	if !granted {
		b.WriteString("# None: the mirror has no node access (RegistryHostGrant), so it does not serve the nodes.\n")
		return b.String()
	}
	if list.inUse > len(list.images) {
		fmt.Fprintf(&b, "# %d images in use; %d are pinned, shared fairly among %d namespaces.\n", list.inUse, len(list.images), len(list.byNamespace))
	}
	for _, i := range list.images {
		b.WriteString(i.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// StripPodImages keeps of a Pod what imagesInUse reads, about 300 bytes: of a pod that
// does not run, its node too (podCounts); a running pod's is not needed.
func StripPodImages(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil // a tombstone
	}
	out := &corev1.Pod{}
	out.Name, out.Namespace, out.UID, out.ResourceVersion = p.Name, p.Namespace, p.UID, p.ResourceVersion
	out.Status.Phase = p.Status.Phase
	if p.Status.Phase != corev1.PodRunning {
		out.Spec.NodeName = p.Spec.NodeName
	}
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
	for _, c := range p.Spec.EphemeralContainers {
		out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Image: c.Image}})
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

// pinnedImages returns the pinned-images file, the count of images in use (nil: no node
// access) and the list chosen (nil: none this pass). While pods cannot be listed, the file
// and count stay (none would evict them).
func (r *Reconciler) pinnedImages(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, host string, granted bool) (file string, inUse *int32, list *pinnedList) {
	if !granted || r.Pods == nil {
		return renderPinnedImages(host, pinnedList{}, false), nil, nil
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
				return f, m.Status.ImagesInUse, nil
			}
		}
		return renderPinnedImages(host, pinnedList{}, true), m.Status.ImagesInUse, nil
	}
	chosen := pinFairly(imagesInUse(pods.Items, host), r.MaxPinnedImages)
	n := int32(min(chosen.inUse, math.MaxInt32))
	return renderPinnedImages(host, chosen, true), &n, &chosen
}
