package registrymirror

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

func grant(name, host, ns, mirror string, age time.Duration, caps ...mirrorsv1alpha1.Capability) mirrorsv1alpha1.RegistryHostGrant {
	return mirrorsv1alpha1.RegistryHostGrant{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))},
		Spec: mirrorsv1alpha1.RegistryHostGrantSpec{Host: host, Mirror: mirrorsv1alpha1.MirrorReference{Namespace: ns, Name: mirror},
			Capabilities: caps},
	}
}

func TestDecideNodeAccess(t *testing.T) {
	m := minimalMirror() // mirrors/docker-hub, https://registry-1.docker.io
	withCreds := minimalMirror()
	withCreds.Spec.CredentialsSecretRef = &mirrorsv1alpha1.SecretReference{Name: "pull"}
	plain := minimalMirror()
	plain.Spec.Upstream = "http://registry-1.docker.io"
	allow := func(g mirrorsv1alpha1.RegistryHostGrant, edit func(*mirrorsv1alpha1.RegistryHostGrantSpec)) mirrorsv1alpha1.RegistryHostGrant {
		edit(&g.Spec)
		return g
	}
	for _, tc := range []struct {
		name     string
		mirror   *mirrorsv1alpha1.RegistryMirror
		grants   []mirrorsv1alpha1.RegistryHostGrant
		granted  bool
		reason   string
		caps     []string
		inSwitch string
	}{
		{name: "no grant: in-cluster only", mirror: m, reason: mirrorsv1alpha1.ReasonNoHostGrant, inSwitch: "http://docker-hub-registry.mirrors.svc:5000"},
		{name: "a grant of another host", mirror: m, grants: []mirrorsv1alpha1.RegistryHostGrant{grant("q", "quay.io", "mirrors", "docker-hub", 0)},
			reason: mirrorsv1alpha1.ReasonNoHostGrant},
		{name: "granted, pull only by default", mirror: m, grants: []mirrorsv1alpha1.RegistryHostGrant{grant("hub", "docker.io", "mirrors", "docker-hub", 0)},
			granted: true, reason: mirrorsv1alpha1.ReasonGranted, caps: []string{"pull"}, inSwitch: "RegistryHostGrant hub"},
		{name: "granted with resolve", mirror: m, grants: []mirrorsv1alpha1.RegistryHostGrant{grant("hub", "docker.io", "mirrors", "docker-hub", 0, "pull", "resolve")},
			granted: true, reason: mirrorsv1alpha1.ReasonGranted, caps: []string{"pull", "resolve"}},
		{name: "the host granted to a mirror of the same name in another namespace", mirror: m,
			grants: []mirrorsv1alpha1.RegistryHostGrant{grant("hub", "docker.io", "platform", "docker-hub", 0)},
			reason: mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror, inSwitch: "RegistryHostGrant hub"},
		{name: "two grants of one host: the oldest counts", mirror: m, grants: []mirrorsv1alpha1.RegistryHostGrant{
			grant("newer", "docker.io", "mirrors", "docker-hub", time.Hour), grant("older", "docker.io", "platform", "hub", 2*time.Hour)},
			reason: mirrorsv1alpha1.ReasonHostGrantedToAnotherMirror, inSwitch: "RegistryHostGrant older"},
		{name: "two grants of one host, this mirror's is the oldest", mirror: m, grants: []mirrorsv1alpha1.RegistryHostGrant{
			grant("newer", "docker.io", "platform", "hub", time.Hour), grant("older", "docker.io", "mirrors", "docker-hub", 2*time.Hour)},
			granted: true, reason: mirrorsv1alpha1.ReasonGranted, caps: []string{"pull"}},
		{name: "upstream credentials need allowCredentials", mirror: withCreds,
			grants: []mirrorsv1alpha1.RegistryHostGrant{grant("hub", "docker.io", "mirrors", "docker-hub", 0)},
			reason: mirrorsv1alpha1.ReasonCredentialsNotGranted, inSwitch: "imagePullSecret"},
		{name: "upstream credentials allowed", mirror: withCreds, grants: []mirrorsv1alpha1.RegistryHostGrant{
			allow(grant("hub", "docker.io", "mirrors", "docker-hub", 0), func(s *mirrorsv1alpha1.RegistryHostGrantSpec) { s.AllowCredentials = true })},
			granted: true, reason: mirrorsv1alpha1.ReasonGranted, caps: []string{"pull"}},
		{name: "a plain HTTP upstream needs allowPlainHTTP", mirror: plain,
			grants: []mirrorsv1alpha1.RegistryHostGrant{grant("hub", "docker.io", "mirrors", "docker-hub", 0)},
			reason: mirrorsv1alpha1.ReasonPlainHTTPNotGranted, inSwitch: "plain HTTP"},
		{name: "a plain HTTP upstream allowed", mirror: plain, grants: []mirrorsv1alpha1.RegistryHostGrant{
			allow(grant("hub", "docker.io", "mirrors", "docker-hub", 0), func(s *mirrorsv1alpha1.RegistryHostGrantSpec) { s.AllowPlainHTTP = true })},
			granted: true, reason: mirrorsv1alpha1.ReasonGranted, caps: []string{"pull"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideNodeAccess(tc.mirror, "docker.io", tc.grants)
			assert.Equal(t, tc.granted, got.Granted)
			assert.Equal(t, tc.reason, got.Reason)
			assert.Equal(t, tc.caps, got.Capabilities)
			assert.Contains(t, got.Message, tc.inSwitch)
			c := got.condition()
			assert.Equal(t, mirrorsv1alpha1.ConditionNodeAccess, c.Type)
			assert.Equal(t, tc.granted, c.Status == metav1.ConditionTrue)
		})
	}
}

func TestMirrorsOfHost(t *testing.T) {
	mirror := func(ns, name, upstream string) mirrorsv1alpha1.RegistryMirror {
		return mirrorsv1alpha1.RegistryMirror{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: mirrorsv1alpha1.RegistryMirrorSpec{Upstream: upstream}}
	}
	g := grant("hub", "docker.io", "platform", "hub", 0)
	got := mirrorsOfHost(&g, []mirrorsv1alpha1.RegistryMirror{
		mirror("platform", "hub", "https://registry-1.docker.io"), mirror("t1", "mine", "https://index.docker.io"),
		mirror("t2", "quay", "https://quay.io")})
	assert.Equal(t, []types.NamespacedName{{Namespace: "platform", Name: "hub"}, {Namespace: "t1", Name: "mine"}}, got)
}

func TestDrift(t *testing.T) {
	m := minimalMirror()
	sts := func(edit func(*corev1.PodSpec)) child {
		live := &appsv1.StatefulSet{}
		desired := desiredStatefulSet(m, testImages, "h1", 0)
		if err := roundTrip(desired, live); err != nil {
			t.Fatal(err)
		}
		edit(&live.Spec.Template.Spec)
		return child{kind: "StatefulSet", desired: desired, live: live}
	}
	svc := func(edit func(map[string]string)) child {
		live := &corev1.Service{}
		desired := desiredService(m)
		if err := roundTrip(desired, live); err != nil {
			t.Fatal(err)
		}
		edit(live.Spec.Selector)
		return child{kind: "Service", desired: desired, live: live}
	}
	for _, tc := range []struct {
		name string
		c    child
		want []string
	}{
		{"as applied", sts(func(*corev1.PodSpec) {}), nil},
		{"defaults are no drift", sts(func(s *corev1.PodSpec) {
			s.DNSPolicy, s.RestartPolicy, s.ServiceAccountName = corev1.DNSClusterFirst, corev1.RestartPolicyAlways, "default"
		}), nil},
		{"kubectl set env: the registry would read another upstream", sts(func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "REGISTRY_PROXY_REMOTEURL", Value: "https://evil.example"}}
		}), []string{"env of container registry"}},
		{"envFrom on the init container", sts(func(s *corev1.PodSpec) {
			s.InitContainers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}
		}), []string{"envFrom of container install-credential-helper"}},
		{"host network and another ServiceAccount", sts(func(s *corev1.PodSpec) {
			s.HostNetwork, s.ServiceAccountName = true, "admin"
		}), []string{"host namespaces", "serviceAccountName"}},
		{"shared process namespace", sts(func(s *corev1.PodSpec) { s.ShareProcessNamespace = ptr.To(true) }), []string{"shareProcessNamespace"}},
		{"Service as applied", svc(func(map[string]string) {}), nil},
		{"Service selector narrowed to someone's pods", svc(func(sel map[string]string) { sel["evil"] = "1" }), []string{"spec.selector"}},
		{"a ConfigMap has no drift of this kind", child{kind: "ConfigMap", desired: desiredConfigMap(m, "x", ""), live: &corev1.ConfigMap{}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, drift(tc.c))
			if tc.want != nil {
				assert.Equal(t, childRevert, decideChild(m, withOwner(m, tc.c), true))
			}
		})
	}
}

// withOwner makes c's live object controlled by m, as the API server returns it.
func withOwner(m *mirrorsv1alpha1.RegistryMirror, c child) child {
	c.live.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: mirrorsv1alpha1.GroupVersion.String(), Kind: "RegistryMirror",
		Name: m.Name, UID: m.UID, Controller: ptr.To(true)}})
	return c
}
