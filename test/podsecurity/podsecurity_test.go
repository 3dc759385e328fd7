package podsecurity

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// restrictedPod passes both profiles: what every Quartet pod but the node agent looks like.
func restrictedPod() *corev1.PodSpec {
	return &corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: []corev1.Volume{
			{Name: "cache", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		Containers: []corev1.Container{{
			Name:  "main",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 5000}},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
			},
		}},
	}
}

// TestCheck: each rule catches its violation, in the profile it belongs to.
func TestCheck(t *testing.T) {
	for _, p := range []Profile{Restricted, RestrictedV2} {
		assert.Empty(t, Check(restrictedPod(), p), "%s: the reference pod passes", p)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.PodSpec)
		want   []string // restricted
		wantV2 []string // restricted-v2
	}{
		{"host network", func(s *corev1.PodSpec) { s.HostNetwork = true }, []string{RuleHostNetwork}, []string{RuleHostNetwork}},
		{"host PID", func(s *corev1.PodSpec) { s.HostPID = true }, []string{RuleHostPID}, []string{RuleHostPID}},
		{"host IPC", func(s *corev1.PodSpec) { s.HostIPC = true }, []string{RuleHostIPC}, []string{RuleHostIPC}},
		{"host port", func(s *corev1.PodSpec) { s.Containers[0].Ports[0].HostPort = 5000 }, []string{RuleHostPort}, []string{RuleHostPort}},
		{"hostPath", func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}})
		}, []string{RuleVolumeType}, []string{RuleVolumeType}},
		{"privileged", func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Privileged = ptr.To(true) }, []string{RulePrivileged}, []string{RulePrivileged}},
		{"escalation unset", func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil },
			[]string{RulePrivEscalation}, []string{RulePrivEscalation}},
		{"capabilities kept", func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Capabilities.Drop = nil },
			[]string{RuleCapabilitiesDrop}, []string{RuleCapabilitiesDrop}},
		{"capability added", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.Capabilities.Add = append(s.Containers[0].SecurityContext.Capabilities.Add, "NET_ADMIN")
		}, []string{RuleCapabilitiesAdd}, []string{RuleCapabilitiesAdd}},
		{"no seccomp", func(s *corev1.PodSpec) { s.SecurityContext.SeccompProfile = nil }, []string{RuleSeccomp}, []string{RuleSeccomp}},
		{"unconfined init container", func(s *corev1.PodSpec) {
			init := *s.Containers[0].DeepCopy()
			init.Name = "init"
			init.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
			s.InitContainers = append(s.InitContainers, init)
		}, []string{RuleSeccomp}, []string{RuleSeccomp}},
		{"may run as root", func(s *corev1.PodSpec) { s.SecurityContext.RunAsNonRoot = nil }, []string{RuleRunAsNonRoot}, []string{RuleRunAsNonRoot}},
		{"non-root per container", func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot = nil
			s.Containers[0].SecurityContext.RunAsNonRoot = ptr.To(true)
		}, nil, nil},
		{"fixed non-root UID and fsGroup", func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsUser, s.SecurityContext.FSGroup = ptr.To[int64](1000), ptr.To[int64](1000)
		}, nil, []string{RuleFixedUID, RuleFixedFSGroup}},
		{"fixed UID in a container", func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](65532) },
			nil, []string{RuleFixedUID}},
		{"root", func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsUser = ptr.To[int64](0)
			s.SecurityContext.RunAsNonRoot = ptr.To(false)
		}, []string{RuleRunAsRoot, RuleRunAsNonRoot}, []string{RuleFixedUID, RuleRunAsNonRoot}},
		{"SELinux level", func(s *corev1.PodSpec) { s.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Level: "s0:c1,c2"} },
			nil, []string{RuleSELinuxOptions}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := restrictedPod()
			tc.mutate(s)
			assert.Equal(t, tc.want, Rules(Check(s, Restricted)), "restricted")
			assert.Equal(t, tc.wantV2, Rules(Check(s, RestrictedV2)), "restricted-v2")
		})
	}
}

// TestManagerDeployment: the manager's pod as config/manager has it (config/default and the
// chart change nothing in its security; test/chart keeps the chart equal to
// config/default) passes both profiles, so OLM, Helm and kustomize installs run under
// restricted-v2 with the UID OpenShift assigns, and elsewhere as the image's USER 65532.
func TestManagerDeployment(t *testing.T) {
	b, err := os.ReadFile("../../config/manager/manager.yaml")
	require.NoError(t, err)
	var d *appsv1.Deployment
	for _, doc := range splitYAML(b) {
		var meta struct{ Kind string }
		require.NoError(t, yaml.Unmarshal(doc, &meta))
		if meta.Kind == "Deployment" {
			d = &appsv1.Deployment{}
			require.NoError(t, yaml.UnmarshalStrict(doc, d))
		}
	}
	require.NotNil(t, d, "config/manager/manager.yaml has a Deployment")
	require.NotEmpty(t, d.Spec.Template.Spec.Containers)
	for _, p := range []Profile{Restricted, RestrictedV2} {
		assert.Empty(t, Check(&d.Spec.Template.Spec, p), "%s", p)
	}
}

func splitYAML(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i+4 <= len(b); i++ {
		if (i == 0 || b[i-1] == '\n') && string(b[i:i+4]) == "---\n" {
			out = append(out, b[start:i])
			start = i + 4
		}
	}
	return append(out, b[start:])
}
