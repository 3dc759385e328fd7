package registrymirror

import (
	"fmt"
	"slices"
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
	pulling := pod("c", "pulling", corev1.PodPending, []string{"team/app@" + digestB}) // by digest before it started
	pulling.Spec.NodeName = "node-1"
	alsoRunning := pod("c", "pulling-web", corev1.PodPending, []string{"nginx:1.27@" + digestA})
	alsoRunning.Spec.NodeName = "node-1"
	pods := []corev1.Pod{
		pod("a", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA),
		pod("b", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA), // same image: once
		withInit,
		swapped,
		pulling,
		alsoRunning,
		pod("c", "web", corev1.PodRunning, []string{"nginx:1.27"}, "docker.io/library/nginx@"+digestA),
		pod("c", "tag-only", corev1.PodPending, []string{"team/other:v1"}), // a tag names no digest yet
		pod("d", "done", corev1.PodSucceeded, []string{"old@" + digestC}, "docker.io/library/old@"+digestC),
		pod("d", "failed", corev1.PodFailed, []string{"old@" + digestB}),
		// No node accepted it (unschedulable, or no scheduler takes it): it pins nothing.
		pod("d", "unscheduled", corev1.PodPending, []string{"0000/first@" + digestA}),
		pod("e", "elsewhere", corev1.PodRunning, []string{"ghcr.io/org/tool:v1"}, "ghcr.io/org/tool@"+digestA),
	}
	lines := func(images []imageInUse) []string {
		var out []string
		for _, i := range images {
			out = append(out, i.String())
		}
		return out
	}
	got := imagesInUse(pods, "docker.io")
	// alpine is named without a tag (latest is not written): none.
	require.Len(t, got, 3, "namespaces a, b and c; d and e run nothing from docker.io that counts")
	assert.Equal(t, "a", got[0].namespace)
	assert.Equal(t, []string{"library/nginx:1.27@" + digestA}, lines(got[0].running))
	assert.Empty(t, got[0].waiting)
	assert.Equal(t, "b", got[1].namespace)
	assert.Equal(t, []string{"library/alpine@" + digestC, "library/busybox:1.36@" + digestB, "library/nginx:1.27@" + digestA,
		"team/app:v2@" + digestB}, lines(got[1].running))
	assert.Equal(t, "c", got[2].namespace)
	assert.Equal(t, []string{"library/nginx:1.27@" + digestA}, lines(got[2].running))
	assert.Equal(t, []string{"team/app@" + digestB}, lines(got[2].waiting), "a pod on a node counts before it runs; what c runs already, not again")
	ghcr := imagesInUse(pods, "ghcr.io")
	require.Len(t, ghcr, 1)
	assert.Equal(t, []imageInUse{{"org/tool", "v1", digestA}}, ghcr[0].running)
	assert.Empty(t, imagesInUse(pods, "quay.io"))
}

func TestPodCounts(t *testing.T) {
	onNode := func(phase corev1.PodPhase) *corev1.Pod {
		p := pod("a", "p", phase, nil)
		p.Spec.NodeName = "node-1"
		return &p
	}
	unbound := func(phase corev1.PodPhase) *corev1.Pod {
		p := pod("a", "p", phase, nil)
		return &p
	}
	for _, tc := range []struct {
		name            string
		pod             *corev1.Pod
		counts, running bool
	}{
		{"running", onNode(corev1.PodRunning), true, true},
		{"running, node not kept by the cache", unbound(corev1.PodRunning), true, true},
		{"pending on a node: pulling", onNode(corev1.PodPending), true, false},
		{"unknown on a node", onNode(corev1.PodUnknown), true, false},
		{"no phase yet, on a node", onNode(""), true, false},
		{"pending, no node accepted it", unbound(corev1.PodPending), false, false},
		{"no phase, no node", unbound(""), false, false},
		{"succeeded", onNode(corev1.PodSucceeded), false, false},
		{"failed", onNode(corev1.PodFailed), false, false},
	} {
		counts, running := podCounts(tc.pod)
		assert.Equal(t, tc.counts, counts, tc.name)
		assert.Equal(t, tc.running, running, tc.name)
	}
}

// someImages returns n images of repository prefix, sorted as imagesInUse sorts them.
func someImages(prefix string, n int) []imageInUse {
	out := make([]imageInUse, n)
	for i := range out {
		out[i] = imageInUse{repository: fmt.Sprintf("%s/%03d", prefix, i), digest: digestA}
	}
	return out
}

// TestPinFairly (review 2026-12-06, finding 3): the cap is shared among namespaces
// max-min fairly, running pods' images first; no namespace's image names push another's
// images off beyond its share.
func TestPinFairly(t *testing.T) {
	shared := imageInUse{repository: "library/nginx", tag: "1.27", digest: digestA}
	for _, tc := range []struct {
		name        string
		in          []namespaceImages
		limit       int
		want        map[string]int // pinned per namespace
		wantPinned  []imageInUse   // some images that must be pinned
		wantDropped []imageInUse   // some images that must not
		wantInUse   int
	}{
		{name: "room for all", limit: 10,
			in:   []namespaceImages{{namespace: "a", running: someImages("a", 2)}, {namespace: "b", running: someImages("b", 3), waiting: someImages("bw", 1)}},
			want: map[string]int{"a": 2, "b": 4}, wantInUse: 6},
		{name: "equal shares: names that sort first win nothing", limit: 4,
			in:         []namespaceImages{{namespace: "attacker", running: someImages("0000", 100)}, {namespace: "victim", running: someImages("zzz", 3)}},
			want:       map[string]int{"attacker": 2, "victim": 2},
			wantPinned: []imageInUse{someImages("zzz", 1)[0], someImages("0000", 1)[0]}, wantDropped: []imageInUse{someImages("zzz", 3)[2], someImages("0000", 3)[2]},
			wantInUse: 103},
		{name: "unused share goes to the others", limit: 10,
			in:   []namespaceImages{{namespace: "a", running: someImages("a", 1)}, {namespace: "b", running: someImages("b", 20)}, {namespace: "c", running: someImages("c", 2)}},
			want: map[string]int{"a": 1, "b": 7, "c": 2}, wantInUse: 23},
		{name: "a round cut short: earlier names have one more", limit: 5,
			in:   []namespaceImages{{namespace: "a", running: someImages("a", 9)}, {namespace: "b", running: someImages("b", 9)}},
			want: map[string]int{"a": 3, "b": 2}, wantInUse: 18},
		{name: "running pods' images before waiting ones, in every namespace", limit: 4,
			in:   []namespaceImages{{namespace: "a", waiting: someImages("a-waiting", 50)}, {namespace: "b", running: someImages("b", 3), waiting: someImages("b-waiting", 5)}},
			want: map[string]int{"a": 1, "b": 3}, wantPinned: someImages("b", 3), wantDropped: someImages("b-waiting", 1), wantInUse: 58},
		{name: "a shared image costs no turn", limit: 4,
			in: []namespaceImages{{namespace: "a", running: append([]imageInUse{shared}, someImages("a", 5)...)},
				{namespace: "b", running: append([]imageInUse{shared}, someImages("b", 5)...)}},
			want: map[string]int{"a": 2, "b": 3}, wantPinned: []imageInUse{shared, someImages("a", 1)[0], someImages("b", 2)[1]}, wantInUse: 11},
		{name: "nothing in use", limit: 5, in: nil, want: map[string]int{}, wantInUse: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pinFairly(tc.in, tc.limit)
			assert.LessOrEqual(t, len(got.images), tc.limit)
			assert.Equal(t, tc.want, got.byNamespace)
			assert.Equal(t, tc.wantInUse, got.inUse)
			for _, img := range tc.wantPinned {
				assert.Contains(t, got.images, img)
			}
			for _, img := range tc.wantDropped {
				assert.NotContains(t, got.images, img)
			}
			assert.True(t, slices.IsSortedFunc(got.images, func(a, b imageInUse) int { return strings.Compare(a.String(), b.String()) }), "the file is sorted")
		})
	}
}

func TestRenderPinnedImages(t *testing.T) {
	list := pinnedList{images: []imageInUse{{"library/nginx", "1.27", digestA}, {"team/app", "", digestB}}, inUse: 2, byNamespace: map[string]int{"a": 2}}
	got := renderPinnedImages("docker.io", list, true)
	assert.True(t, strings.HasPrefix(got, "# Written by Quartet"), got)
	assert.True(t, strings.HasSuffix(got, "\nlibrary/nginx:1.27@"+digestA+"\nteam/app@"+digestB+"\n"), got)
	assert.NotContains(t, got, "images in use", "all of them pinned")

	none := renderPinnedImages("docker.io", list, false)
	assert.Contains(t, none, "no node access")
	assert.NotContains(t, none, digestA, "a mirror without node access pins nothing")

	many := make([]namespaceImages, 2)
	for i := range many {
		many[i] = namespaceImages{namespace: fmt.Sprint(i), running: make([]imageInUse, maxPinnedImages)}
		for j := range many[i].running {
			many[i].running[j] = imageInUse{fmt.Sprintf("team-%d/app-%04d", i, j), "", digestA}
		}
	}
	capped := renderPinnedImages("docker.io", pinFairly(many, maxPinnedImages), true)
	assert.Equal(t, maxPinnedImages/2, strings.Count(capped, "team-0/"))
	assert.Equal(t, maxPinnedImages/2, strings.Count(capped, "team-1/"))
	assert.Contains(t, capped, "# 10000 images in use; 5000 are pinned, shared fairly among 2 namespaces.")
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

	pulling := pod("a", "pulling", corev1.PodPending, []string{"nginx@" + digestA})
	pulling.Spec.NodeName = "node-1"
	pulling.Spec.SchedulerName = "default-scheduler"
	out, err = StripPodImages(&pulling)
	require.NoError(t, err)
	assert.Equal(t, "node-1", out.(*corev1.Pod).Spec.NodeName, "a pod that does not run keeps its node (podCounts)")
	assert.Empty(t, out.(*corev1.Pod).Spec.SchedulerName)

	tombstone := "not a pod"
	got, err := StripPodImages(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, got)
}
