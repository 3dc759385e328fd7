package registrymirror

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	digestC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func TestParseImageInUse(t *testing.T) {
	for _, tc := range []struct {
		ref, host string
		want      imageInUse
		ok        bool
	}{
		{"docker.io/library/nginx@" + digestA, "docker.io", imageInUse{"library/nginx", "", digestA}, true},
		{"nginx@" + digestA, "docker.io", imageInUse{"library/nginx", "", digestA}, true},
		{"nginx:1.27@" + digestA, "docker.io", imageInUse{"library/nginx", "1.27", digestA}, true},
		{"docker-pullable://docker.io/team/app@" + digestB, "docker.io", imageInUse{"team/app", "", digestB}, true},
		{"registry.example:5000/app@" + digestB, "registry.example:5000", imageInUse{"app", "", digestB}, true},
		{"registry.example:5000/app@" + digestB, "registry.example", imageInUse{}, false},
		{"ghcr.io/org/tool@" + digestC, "docker.io", imageInUse{}, false},
		{"nginx:1.27", "docker.io", imageInUse{}, false},
		{digestA, "docker.io", imageInUse{}, false},
		{"", "docker.io", imageInUse{}, false},
		{"Not A Reference@" + digestA, "docker.io", imageInUse{}, false},
	} {
		got, ok := parseImageInUse(tc.ref, tc.host)
		assert.Equal(t, tc.ok, ok, tc.ref)
		assert.Equal(t, tc.want, got, tc.ref)
	}
}

func pod(ns, name string, phase corev1.PodPhase, images []string, imageIDs ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{Phase: phase}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	for i, id := range imageIDs {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i), ImageID: id})
	}
	return p
}

func TestImagesInUse(t *testing.T) {
	withInit := pod("b", "init", corev1.PodRunning, []string{"busybox:1.36"}, "docker.io/library/busybox@"+digestB)
	withInit.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "alpine"}}
	withInit.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", ImageID: "docker.io/library/alpine@" + digestC}}
	// The status' tag comes from the container of its name, not its position.
	swapped := pod("b", "two", corev1.PodRunning, []string{"nginx:1.27", "team/app:v2"}, "docker.io/team/app@"+digestB, "docker.io/library/nginx@"+digestA)
	swapped.Status.ContainerStatuses[0].Name, swapped.Status.ContainerStatuses[1].Name = "c1", "c0"
	pods := []corev1.Pod{
		pod("a", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA),
		pod("b", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA), // same image: once
		withInit,
		swapped,
		pod("c", "pending", corev1.PodPending, []string{"team/app@" + digestB}), // by digest before it started
		pod("c", "tag-only", corev1.PodPending, []string{"team/other:v1"}),      // a tag names no digest yet
		pod("d", "done", corev1.PodSucceeded, []string{"old@" + digestC}, "docker.io/library/old@"+digestC),
		pod("e", "elsewhere", corev1.PodRunning, []string{"ghcr.io/org/tool:v1"}, "ghcr.io/org/tool@"+digestA),
	}
	got := imagesInUse(pods, "docker.io")
	// alpine is named without a tag (latest is not written): none.
	want := []string{"library/alpine@" + digestC, "library/busybox:1.36@" + digestB, "library/nginx:1.27@" + digestA,
		"team/app:v2@" + digestB, "team/app@" + digestB}
	var lines []string
	for _, i := range got {
		lines = append(lines, i.String())
	}
	assert.Equal(t, want, lines)
	assert.Equal(t, []imageInUse{{"org/tool", "v1", digestA}}, imagesInUse(pods, "ghcr.io"))
	assert.Empty(t, imagesInUse(pods, "quay.io"))
}

func TestRenderPinnedImages(t *testing.T) {
	images := []imageInUse{{"library/nginx", "1.27", digestA}, {"team/app", "", digestB}}
	got := renderPinnedImages("docker.io", images, true)
	assert.True(t, strings.HasPrefix(got, "# Written by Quartet"), got)
	assert.True(t, strings.HasSuffix(got, "\nlibrary/nginx:1.27@"+digestA+"\nteam/app@"+digestB+"\n"), got)

	none := renderPinnedImages("docker.io", images, false)
	assert.Contains(t, none, "no node access")
	assert.NotContains(t, none, digestA, "a mirror without node access pins nothing")

	many := make([]imageInUse, maxPinnedImages+3)
	for i := range many {
		many[i] = imageInUse{"library/nginx", "", digestA}
	}
	capped := renderPinnedImages("docker.io", many, true)
	assert.Equal(t, maxPinnedImages, strings.Count(capped, "library/nginx@"))
	assert.Contains(t, capped, "# 5003 images in use; the first 5000 are pinned.")
	assert.Less(t, len(capped), 1<<20, "fits a ConfigMap")
}

func TestStripPodImages(t *testing.T) {
	p := pod("a", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA)
	p.UID, p.ResourceVersion = "u1", "42"
	p.Labels = map[string]string{"app": "web"}
	p.Annotations = map[string]string{"big": strings.Repeat("x", 4096)}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"sh", "-c", "true"}}}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: strings.Repeat("y", 4096)}}
	p.Spec.NodeName = "node-1"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.Status.ContainerStatuses[0].Image = "nginx:1.27"
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox", TTY: true}}}

	out, err := StripPodImages(&p)
	require.NoError(t, err)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", UID: "u1", ResourceVersion: "42"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}}, Containers: []corev1.Container{{Name: "c0", Image: "nginx:1.27"}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{},
			ContainerStatuses:          []corev1.ContainerStatus{{Name: "c0", ImageID: "docker.io/library/nginx@" + digestA}},
			EphemeralContainerStatuses: []corev1.ContainerStatus{}},
	}
	assert.Equal(t, want, out)
	assert.Equal(t, imagesInUse([]corev1.Pod{p}, "docker.io"), imagesInUse([]corev1.Pod{*out.(*corev1.Pod)}, "docker.io"),
		"what imagesInUse reads survives the strip")

	tombstone := "not a pod"
	got, err := StripPodImages(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, got)
}
