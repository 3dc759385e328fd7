package registrymirror

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/cmd/nodeagent"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var testImages = Images{Registry: "registry.example/mirror-registry:v0.3.0", NodeAgent: "registry.example/quartet:v0.3.0"}

func minimalMirror() *mirrorsv1alpha1.RegistryMirror {
	return &mirrorsv1alpha1.RegistryMirror{
		ObjectMeta: metav1.ObjectMeta{Name: "docker-hub", Namespace: "mirrors", UID: types.UID("6f1c2a4e-0000-4000-8000-000000000001"), Generation: 1},
		Spec: mirrorsv1alpha1.RegistryMirrorSpec{
			Upstream: "https://registry-1.docker.io",
			Storage:  resource.MustParse("10Gi"),
		},
	}
}

func fullMirror() *mirrorsv1alpha1.RegistryMirror {
	m := minimalMirror()
	m.Name = "quay"
	m.Spec = mirrorsv1alpha1.RegistryMirrorSpec{
		Upstream:             "https://quay.example:8443/",
		Storage:              resource.MustParse("50Gi"),
		StorageClassName:     ptr.To("fast"),
		CredentialsSecretRef: &mirrorsv1alpha1.SecretReference{Name: "quay-pull"},
		CacheTTL:             &metav1.Duration{Duration: 72 * time.Hour}, // deprecated, ignored
		Retention:            &metav1.Duration{Duration: 90 * 24 * time.Hour},
		MaxDiskPercent:       ptr.To[int32](70),
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
		ConfigureNodes: true,
		HostPort:       ptr.To[int32](36000),
	}
	return m
}

// renderAll renders every child of m as one multi-document YAML, as applied.
func renderAll(t *testing.T, m *mirrorsv1alpha1.RegistryMirror, hostPort int32) string {
	t.Helper()
	dir, err := HostsDir(m.Spec.Upstream)
	require.NoError(t, err)
	var docs []string
	for _, c := range desiredChildren(m, testImages, reach{hostPort: hostPort, hostsPath: hostsPath("", dir),
		capabilities: nodeagent.DefaultCapabilities, operatorNamespace: "quartet-system"}) {
		b, err := yaml.Marshal(c.desired)
		require.NoError(t, err)
		docs = append(docs, "# "+c.kind+" "+c.name+"\n"+string(b))
	}
	return strings.Join(docs, "---\n")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing; run go test -run %s -update", t.Name())
	assert.Equal(t, string(want), got, "output differs from %s; if intended, rerun with -update", path)
}

// TestChildrenGolden pins every builder's whole output for a minimal and a full mirror.
func TestChildrenGolden(t *testing.T) {
	for _, tc := range []struct {
		file     string
		mirror   *mirrorsv1alpha1.RegistryMirror
		hostPort int32
	}{
		{"minimal.golden.yaml", minimalMirror(), 35000},
		{"full.golden.yaml", fullMirror(), 36000},
	} {
		t.Run(tc.file, func(t *testing.T) { golden(t, tc.file, renderAll(t, tc.mirror, tc.hostPort)) })
	}
}

func TestRegistryConfigGolden(t *testing.T) {
	golden(t, "config-minimal.golden.yml", renderRegistryConfig(minimalMirror()))
	golden(t, "config-full.golden.yml", renderRegistryConfig(fullMirror()))
}

// TestRegistryConfig: what mirror-registry needs of the config (proxy mode, filesystem
// storage, plain HTTP, the credential helper, a drain shorter than the grace period), and no
// proxy.ttl, whatever the deprecated spec.cacheTTL says: mirror-registry would turn it off.
func TestRegistryConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  *metav1.Duration
	}{
		{"no cacheTTL", nil},
		{"cacheTTL a week", &metav1.Duration{Duration: 168 * time.Hour}},
		{"cacheTTL 0s (was: never expire)", &metav1.Duration{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := minimalMirror()
			m.Spec.Upstream = "http://upstream.example:5000/"
			m.Spec.CacheTTL = tc.ttl
			var cfg map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(renderRegistryConfig(m)), &cfg))
			proxy := cfg["proxy"].(map[string]any)
			assert.Equal(t, "http://upstream.example:5000", proxy["remoteurl"], "trailing slash dropped")
			assert.NotContains(t, proxy, "ttl", "retention is mirror-registry's flag; cacheTTL is ignored")
			assert.NotContains(t, proxy, "username", "credentials come from the mounted Secret through the helper, never the ConfigMap")
			assert.NotContains(t, proxy, "password")
			// proxy.exec: the registry asks the helper and never contacts the upstream at start.
			assert.Equal(t, map[string]any{"command": "/quartet/bin/docker-credential-quartet", "lifetime": "30s"}, proxy["exec"])
			assert.Equal(t, map[string]any{"addr": ":5000", "draintimeout": "20s", "headers": map[string]any{"X-Content-Type-Options": []any{"nosniff"}}}, cfg["http"])
			assert.Equal(t, map[string]any{"filesystem": map[string]any{"rootdirectory": "/var/lib/registry"}}, cfg["storage"],
				"filesystem storage, no blob descriptor cache: what mirror-registry evicts from")
			assert.Equal(t, "0.1", cfg["version"])
			assert.Equal(t, renderRegistryConfig(minimalMirrorWithUpstream("http://upstream.example:5000/")), renderRegistryConfig(m),
				"cacheTTL changes nothing, so it rolls no pod")
		})
	}
}

func minimalMirrorWithUpstream(upstream string) *mirrorsv1alpha1.RegistryMirror {
	m := minimalMirror()
	m.Spec.Upstream = upstream
	return m
}

// TestRegistryArgs: mirror-registry's command line from spec.retention and
// spec.maxDiskPercent, with their defaults where the object skipped defaulting.
func TestRegistryArgs(t *testing.T) {
	const pinned = "--pinned-file=/etc/distribution/pinned-images"
	for _, tc := range []struct {
		name      string
		retention *metav1.Duration
		maxDisk   *int32
		cacheTTL  *metav1.Duration
		platforms []string
		want      []string
	}{
		{"defaults (not filled in)", nil, nil, nil, nil,
			[]string{"--config=/etc/distribution/config.yml", "--retention=720h0m0s", "--max-disk-percent=85", pinned}},
		{"as the API server defaults them", &metav1.Duration{Duration: 720 * time.Hour}, ptr.To[int32](85), nil, nil,
			[]string{"--config=/etc/distribution/config.yml", "--retention=720h0m0s", "--max-disk-percent=85", pinned}},
		{"a week, a higher bound", &metav1.Duration{Duration: 168 * time.Hour}, ptr.To[int32](95), nil, nil,
			[]string{"--config=/etc/distribution/config.yml", "--retention=168h0m0s", "--max-disk-percent=95", pinned}},
		{"no disk bound", &metav1.Duration{Duration: 90 * time.Minute}, ptr.To[int32](0), nil, nil,
			[]string{"--config=/etc/distribution/config.yml", "--retention=1h30m0s", "--max-disk-percent=0", pinned}},
		{"cacheTTL is not retention", nil, nil, &metav1.Duration{Duration: time.Hour}, nil,
			[]string{"--config=/etc/distribution/config.yml", "--retention=720h0m0s", "--max-disk-percent=85", pinned}},
		{"cacheTTL 0s does not keep forever", &metav1.Duration{Duration: 48 * time.Hour}, nil, &metav1.Duration{}, nil,
			[]string{"--config=/etc/distribution/config.yml", "--retention=48h0m0s", "--max-disk-percent=85", pinned}},
		{"warmed for two platforms", nil, nil, nil, []string{"linux/amd64", "linux/arm64"},
			[]string{"--config=/etc/distribution/config.yml", "--retention=720h0m0s", "--max-disk-percent=85", pinned, "--warm-platforms=linux/amd64,linux/arm64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := minimalMirror()
			m.Spec.Retention, m.Spec.MaxDiskPercent, m.Spec.CacheTTL = tc.retention, tc.maxDisk, tc.cacheTTL
			m.Spec.WarmPlatforms = tc.platforms
			assert.Equal(t, tc.want, registryArgs(m))
			sts := &appsv1.StatefulSet{}
			require.NoError(t, roundTrip(desiredStatefulSet(m, testImages, "h", 0), sts))
			c := sts.Spec.Template.Spec.Containers[0]
			assert.Equal(t, []string{"/mirror-registry"}, c.Command)
			assert.Equal(t, tc.want, c.Args, "the StatefulSet runs exactly these")
		})
	}
}

func TestHostsDir(t *testing.T) {
	for _, tc := range []struct {
		upstream, want string
		wantErr        bool
	}{
		{upstream: "https://registry-1.docker.io", want: "docker.io"},
		{upstream: "https://index.docker.io/", want: "docker.io"},
		{upstream: "https://docker.io:443", want: "docker.io"},
		{upstream: "https://quay.io", want: "quay.io"},
		{upstream: "https://Registry.K8s.IO/", want: "registry.k8s.io"},
		{upstream: "http://10.0.0.5:5000", want: "10.0.0.5:5000"},
		{upstream: "https://registry-1.docker.io:5000", want: "registry-1.docker.io:5000"},
		{upstream: "https://..", wantErr: true},
		{upstream: "not a url", wantErr: true},
		{upstream: "https://", wantErr: true},
	} {
		got, err := HostsDir(tc.upstream)
		if tc.wantErr {
			assert.Error(t, err, tc.upstream)
			continue
		}
		require.NoError(t, err, tc.upstream)
		assert.Equal(t, tc.want, got, tc.upstream)
	}
}

func TestBuildersOwnAndLabel(t *testing.T) {
	m := minimalMirror()
	kids := desiredChildren(m, testImages, reach{hostPort: 35000, hostsPath: hostsPath("", "docker.io"), capabilities: nodeagent.DefaultCapabilities})
	require.Len(t, kids, 6, "ConfigMap, two Services, PVC, StatefulSet, DaemonSet")
	names := map[string]bool{}
	for _, c := range kids {
		obj := c.live
		require.NoError(t, roundTrip(c.desired, obj))
		names[c.kind+"/"+obj.GetName()] = true
		assert.Equal(t, m.Namespace, obj.GetNamespace())
		ctrlRef := metav1.GetControllerOf(obj)
		require.NotNil(t, ctrlRef, c.name)
		assert.Equal(t, m.UID, ctrlRef.UID)
		assert.Equal(t, "RegistryMirror", ctrlRef.Kind)
		assert.True(t, *ctrlRef.BlockOwnerDeletion)
		assert.Equal(t, managedBy, obj.GetLabels()[labelManagedBy])
		assert.NotEmpty(t, obj.GetAnnotations()[annotationAppliedHash])
	}
	assert.Len(t, names, 6, "names are distinct")
}

func TestStatefulSet(t *testing.T) {
	sts := &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desiredStatefulSet(fullMirror(), testImages, "abc", 0), sts))
	pod := sts.Spec.Template.Spec
	assert.Equal(t, int32(1), *sts.Spec.Replicas)
	assert.Equal(t, "quay-registry-headless", sts.Spec.ServiceName)
	assert.Equal(t, "abc", sts.Spec.Template.Annotations[annotationConfigHash])
	assert.False(t, *pod.EnableServiceLinks, "REGISTRY_* service env vars would reconfigure the registry")
	assert.Equal(t, []string{"/mirror-registry"}, pod.Containers[0].Command)
	assert.Equal(t, []string{"--config=/etc/distribution/config.yml", "--retention=2160h0m0s", "--max-disk-percent=70",
		"--pinned-file=/etc/distribution/pinned-images"}, pod.Containers[0].Args)
	// The grace period outlasts the drain (http.draintimeout), so the state file is saved.
	drain, err := time.ParseDuration(registryConfigOf(t, fullMirror())["http"].(map[string]any)["draintimeout"].(string))
	require.NoError(t, err)
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	assert.Greater(t, time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second, drain+5*time.Second)
	assert.Contains(t, pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: "/var/lib/registry"},
		"the state file (<rootdirectory>/quartet/last-use) lives on the cache volume")
	// restricted pod security standard
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, int64(registryUID), *pod.SecurityContext.RunAsUser)
	assert.Equal(t, int64(registryUID), *pod.SecurityContext.FSGroup)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	c := pod.Containers[0]
	assert.Equal(t, testImages.Registry, c.Image)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, "500m", ptr.To(c.Resources.Requests[corev1.ResourceCPU]).String())
	assert.Empty(t, c.Env, "no credential in the pod spec, not even a reference")
	assert.Equal(t, "quay-registry-cache", pod.Volumes[0].PersistentVolumeClaim.ClaimName)
	// The credentials Secret is a read-only volume where the helper reads it.
	creds := pod.Volumes[len(pod.Volumes)-1]
	require.NotNil(t, creds.Secret)
	assert.Equal(t, "quay-pull", creds.Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "username", Path: "username"}, {Key: "password", Path: "password"}}, creds.Secret.Items)
	assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "credentials", MountPath: "/quartet/credentials", ReadOnly: true})
	assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "helper", MountPath: "/quartet/bin", ReadOnly: true})
	// The operator's image installs the helper, as restricted as the registry.
	require.Len(t, pod.InitContainers, 1)
	init := pod.InitContainers[0]
	assert.Equal(t, testImages.NodeAgent, init.Image)
	assert.Equal(t, []string{"/manager"}, init.Command)
	assert.Equal(t, []string{"install-credential-helper", "/quartet/bin"}, init.Args)
	assert.True(t, *init.SecurityContext.ReadOnlyRootFilesystem)

	// Where the platform assigns UIDs (OpenShift's restricted-v2), the pod names none: a
	// fixed UID or fsGroup outside the namespace's range would be refused.
	assigned := &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desiredStatefulSet(fullMirror(), Images{Registry: "r", NodeAgent: "n", AssignedUIDs: true}, "abc", 0), assigned))
	sc := assigned.Spec.Template.Spec.SecurityContext
	assert.Nil(t, sc.RunAsUser)
	assert.Nil(t, sc.RunAsGroup)
	assert.Nil(t, sc.FSGroup)
	assert.True(t, *sc.RunAsNonRoot)
	assert.Equal(t, corev1.FSGroupChangeOnRootMismatch, *sc.FSGroupChangePolicy, "applies to the fsGroup the platform assigns")

	noCreds := &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desiredStatefulSet(minimalMirror(), testImages, "abc", 0), noCreds))
	for _, v := range noCreds.Spec.Template.Spec.Volumes {
		assert.Nil(t, v.Secret, "no Secret volume without credentialsSecretRef")
	}
	assert.Nil(t, noCreds.Spec.Template.Spec.Containers[0].Resources.Requests)
}

func TestConfigHashRollsOnUpstreamChange(t *testing.T) {
	a, b := minimalMirror(), minimalMirror()
	b.Spec.Upstream = "https://mirror.gcr.io"
	ha, hb := shortHash([]byte(renderRegistryConfig(a))), shortHash([]byte(renderRegistryConfig(b)))
	assert.NotEqual(t, ha, hb)
	stsA, stsB := &appsv1.StatefulSet{}, &appsv1.StatefulSet{}
	require.NoError(t, roundTrip(desiredStatefulSet(a, testImages, ha, 0), stsA))
	require.NoError(t, roundTrip(desiredStatefulSet(b, testImages, hb, 0), stsB))
	assert.NotEqual(t, stsA.Spec.Template.Annotations, stsB.Spec.Template.Annotations, "a new pod template rolls the registry")
}

func TestPVC(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*mirrorsv1alpha1.RegistryMirror)
		wantSize  string
		wantClass *string
	}{
		{"default class", func(*mirrorsv1alpha1.RegistryMirror) {}, "10Gi", nil},
		{"storage not defaulted", func(m *mirrorsv1alpha1.RegistryMirror) { m.Spec.Storage = resource.Quantity{} }, "10Gi", nil},
		{"grown with class", func(m *mirrorsv1alpha1.RegistryMirror) {
			m.Spec.Storage = resource.MustParse("20Gi")
			m.Spec.StorageClassName = ptr.To("fast")
		}, "20Gi", ptr.To("fast")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := minimalMirror()
			tc.mutate(m)
			pvc := &corev1.PersistentVolumeClaim{}
			require.NoError(t, roundTrip(desiredPVC(m, 0), pvc))
			assert.Equal(t, tc.wantSize, ptr.To(pvc.Spec.Resources.Requests[corev1.ResourceStorage]).String())
			assert.Equal(t, tc.wantClass, pvc.Spec.StorageClassName)
			assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes)
		})
	}
}

func TestDaemonSetHostAccess(t *testing.T) {
	for _, tc := range []struct {
		name          string
		configure     bool
		wantHostPath  string
		wantRunAsUser *int64 // nil: the platform's or the image's (USER 65532)
		wantArgs      []string
	}{
		{"relay only", false, "", nil, []string{
			"node-agent", "--listen=:5000", "--health-listen=:8081",
			"--target=docker-hub-registry.mirrors.svc:5000", "--owner=mirrors/docker-hub"}},
		{"configures containerd", true, "/etc/containerd/certs.d/docker.io", ptr.To[int64](0), []string{
			"node-agent", "--listen=:5000", "--health-listen=:8081",
			"--target=docker-hub-registry.mirrors.svc:5000", "--owner=mirrors/docker-hub",
			"--hosts-dir=/run/quartet/hosts-dir", "--server=https://registry-1.docker.io",
			"--mirror=http://127.0.0.1:35007"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := minimalMirror()
			m.Spec.ConfigureNodes = tc.configure
			ds := &appsv1.DaemonSet{}
			require.NoError(t, roundTrip(desiredDaemonSet(m, testImages, 35007, DefaultHostsRoot+"/docker.io", nodeagent.DefaultCapabilities), ds))
			pod := ds.Spec.Template.Spec
			assert.False(t, pod.HostNetwork, "no host network namespace")
			assert.False(t, pod.HostPID)
			assert.False(t, *pod.AutomountServiceAccountToken, "the agent needs no API access")
			c := pod.Containers[0]
			assert.Equal(t, tc.wantArgs, c.Args)
			assert.Equal(t, []string{"/manager"}, c.Command)
			assert.Equal(t, int32(35007), hostPortOf(&pod))
			assert.Equal(t, "127.0.0.1", c.Ports[0].HostIP, "published on the node's loopback only")
			assert.Equal(t, int32(0), c.Ports[1].HostPort, "health port stays in the pod")
			assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
			assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
			assert.Nil(t, c.SecurityContext.Privileged)
			assert.Equal(t, tc.wantRunAsUser, pod.SecurityContext.RunAsUser)
			if tc.wantHostPath == "" {
				assert.Empty(t, pod.Volumes)
				assert.True(t, *pod.SecurityContext.RunAsNonRoot)
				return
			}
			require.Len(t, pod.Volumes, 1)
			assert.Equal(t, tc.wantHostPath, pod.Volumes[0].HostPath.Path)
			assert.Equal(t, corev1.HostPathDirectoryOrCreate, *pod.Volumes[0].HostPath.Type)
			assert.Equal(t, "/run/quartet/hosts-dir", c.VolumeMounts[0].MountPath)
		})
	}
}

// TestNodeAgentArgs: the DaemonSet runs the agent's subcommand with the command line of
// nodeAgentArgs, which the agent parses back to the same arguments.
func TestNodeAgentArgs(t *testing.T) {
	for _, m := range []*mirrorsv1alpha1.RegistryMirror{minimalMirror(), fullMirror()} {
		ds := &appsv1.DaemonSet{}
		require.NoError(t, roundTrip(desiredDaemonSet(m, testImages, 36000, DefaultHostsRoot+"/x", nodeagent.DefaultCapabilities), ds))
		args := ds.Spec.Template.Spec.Containers[0].Args
		require.NotEmpty(t, args)
		assert.Equal(t, nodeagent.Subcommand, args[0])
		got, err := nodeagent.Parse(args[1:])
		require.NoError(t, err, "the DaemonSet's own arguments parse")
		assert.Equal(t, nodeAgentArgs(m, 36000, nodeagent.DefaultCapabilities), got)
	}
	a := nodeAgentArgs(fullMirror(), 36000, nodeagent.DefaultCapabilities)
	assert.Equal(t, "/run/quartet/hosts-dir", a.HostsDir)
	assert.Equal(t, "https://quay.example:8443", a.Server)
	assert.Equal(t, "http://127.0.0.1:36000", a.Mirror)
	assert.Equal(t, "mirrors/quay", a.Owner)
	assert.Equal(t, "quay-registry.mirrors.svc:5000", a.Target)
}

func TestHostsPath(t *testing.T) {
	assert.Equal(t, "/etc/containerd/certs.d/docker.io", hostsPath("", "docker.io"))
	assert.Equal(t, "/var/lib/rancher/k3s/agent/etc/containerd/certs.d/quay.io", hostsPath("/var/lib/rancher/k3s/agent/etc/containerd/certs.d/", "quay.io"))
}

func TestEndpoints(t *testing.T) {
	assert.Equal(t, "http://docker-hub-registry.mirrors.svc:5000", Endpoint(minimalMirror()))
	assert.Equal(t, "http://127.0.0.1:35001", nodeEndpoint(35001))
}

func registryConfigOf(t *testing.T, m *mirrorsv1alpha1.RegistryMirror) map[string]any {
	t.Helper()
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(renderRegistryConfig(m)), &cfg))
	return cfg
}
