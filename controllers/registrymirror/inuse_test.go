package registrymirror

import (
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
		{"docker.io/library/nginx@" + digestA, "docker.io", imageInUse{"library/nginx", digestA}, true},
		{"nginx@" + digestA, "docker.io", imageInUse{"library/nginx", digestA}, true},
		{"nginx:1.27@" + digestA, "docker.io", imageInUse{"library/nginx", digestA}, true},
		{"docker-pullable://docker.io/team/app@" + digestB, "docker.io", imageInUse{"team/app", digestB}, true},
		{"registry.example:5000/app@" + digestB, "registry.example:5000", imageInUse{"app", digestB}, true},
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
	for _, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c", Image: img})
	}
	for _, id := range imageIDs {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{ImageID: id})
	}
	return p
}

func TestImagesInUse(t *testing.T) {
	withInit := pod("b", "init", corev1.PodRunning, []string{"busybox:1.36"}, "docker.io/library/busybox@"+digestB)
	withInit.Status.InitContainerStatuses = []corev1.ContainerStatus{{ImageID: "docker.io/library/alpine@" + digestC}}
	pods := []corev1.Pod{
		pod("a", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA),
		pod("b", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA), // same image: once
		withInit,
		pod("c", "pending", corev1.PodPending, []string{"team/app@" + digestB}), // by digest before it started
		pod("c", "tag-only", corev1.PodPending, []string{"team/other:v1"}),      // a tag names no digest yet
		pod("d", "done", corev1.PodSucceeded, []string{"old@" + digestC}, "docker.io/library/old@"+digestC),
		pod("e", "elsewhere", corev1.PodRunning, []string{"ghcr.io/org/tool:v1"}, "ghcr.io/org/tool@"+digestA),
	}
	got := imagesInUse(pods, "docker.io")
	want := []string{"library/alpine@" + digestC, "library/busybox@" + digestB, "library/nginx@" + digestA, "team/app@" + digestB}
	var lines []string
	for _, i := range got {
		lines = append(lines, i.String())
	}
	assert.Equal(t, want, lines)
	assert.Equal(t, []imageInUse{{"org/tool", digestA}}, imagesInUse(pods, "ghcr.io"))
	assert.Empty(t, imagesInUse(pods, "quay.io"))
}

func TestRenderPinnedImages(t *testing.T) {
	images := []imageInUse{{"library/nginx", digestA}, {"team/app", digestB}}
	got := renderPinnedImages("docker.io", images, true)
	assert.True(t, strings.HasPrefix(got, "# Written by Quartet"), got)
	assert.True(t, strings.HasSuffix(got, "\nlibrary/nginx@"+digestA+"\nteam/app@"+digestB+"\n"), got)

	none := renderPinnedImages("docker.io", images, false)
	assert.Contains(t, none, "no node access")
	assert.NotContains(t, none, digestA, "a mirror without node access pins nothing")

	many := make([]imageInUse, maxPinnedImages+3)
	for i := range many {
		many[i] = imageInUse{"library/nginx", digestA}
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
	p.Status.ContainerStatuses[0].Name, p.Status.ContainerStatuses[0].Image = "c", "nginx:1.27"

	out, err := StripPodImages(&p)
	require.NoError(t, err)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", UID: "u1", ResourceVersion: "42"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Image: "busybox"}}, Containers: []corev1.Container{{Image: "nginx:1.27"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, InitContainerStatuses: []corev1.ContainerStatus{},
			ContainerStatuses:          []corev1.ContainerStatus{{ImageID: "docker.io/library/nginx@" + digestA}},
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
