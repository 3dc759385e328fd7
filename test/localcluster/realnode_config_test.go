package localcluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/internal/hoststoml"
)

// The typed configurations say what the hand-written ones they replaced said: each
// "handWritten" text below is what the Sprintf template wrote for testNode, and both
// decode (strictly: no field the type lacks) to the same value.

var testPaths = pathsFor("/tmp/qn-test")

var testNode = &RealNode{CgroupRoot: "quartet-test", ContainerdSocket: "/tmp/qn-test/containerd.sock", CertsDir: "/tmp/qn-test/certs.d"}

const handWrittenKubelet = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /quartet-test
containerRuntimeEndpoint: unix:///tmp/qn-test/containerd.sock
imageServiceEndpoint: unix:///tmp/qn-test/containerd.sock
failSwapOn: false
evictionHard:
  nodefs.available: "2%"
  imagefs.available: "2%"
  memory.available: "100Mi"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
address: 0.0.0.0
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: /tmp/qn-test/pki/ca.crt
authorization:
  mode: Webhook
clusterDNS: [10.0.0.10]
clusterDomain: cluster.local
podLogsDir: /tmp/qn-test/pod-logs
resolvConf: /tmp/qn-test/node/resolv.conf
protectKernelDefaults: false
serializeImagePulls: false
maxPods: 110
hairpinMode: hairpin-veth
shutdownGracePeriod: 0s
rotateCertificates: false
syncFrequency: 10s
`

func TestKubeletConfigSaysWhatTheTemplateSaid(t *testing.T) {
	got, err := kubeletConfig(testPaths, testNode, "/tmp/qn-test/pki/ca.crt")
	require.NoError(t, err)
	var typed, want kubeletconfigv1beta1.KubeletConfiguration
	require.NoError(t, yaml.UnmarshalStrict([]byte(got), &typed), got)
	require.NoError(t, yaml.UnmarshalStrict([]byte(handWrittenKubelet), &want))
	// Compared as encoded: the decoded values differ in caches (resource.Quantity's) only.
	canonical, err := yaml.Marshal(want)
	require.NoError(t, err)
	assert.Equal(t, string(canonical), got)
	assert.Equal(t, "kubelet.config.k8s.io/v1beta1", typed.APIVersion)
	assert.Equal(t, "KubeletConfiguration", typed.Kind)
	assert.Equal(t, "/quartet-test", typed.CgroupRoot, "a field the template set is set")
	assert.Equal(t, 10*time.Second, typed.SyncFrequency.Duration, "pods see volume changes within 10 s")
}

// A node killed before its state.json was written is torn down with the cgroup root its
// kubelet configuration names, whether the typed or the hand-written one wrote it.
func TestCgroupRootFromJournal(t *testing.T) {
	dir := t.TempDir()
	p := pathsFor(dir)
	require.NoError(t, os.MkdirAll(filepath.Dir(p.kubeletConfig), 0o755))
	typed, err := kubeletConfig(p, testNode, "/ca.crt")
	require.NoError(t, err)
	for _, content := range []string{typed, handWrittenKubelet} {
		require.NoError(t, os.WriteFile(p.kubeletConfig, []byte(content), 0o644))
		assert.Equal(t, "quartet-test", cgroupRootFromJournal(dir))
	}
	require.NoError(t, os.Remove(p.kubeletConfig))
	assert.Empty(t, cgroupRootFromJournal(dir), "no configuration, no root")
}

const handWrittenKubeProxy = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: /tmp/qn-test/node/kube-proxy.kubeconfig
hostnameOverride: quartet-node
bindAddress: 0.0.0.0
clusterCIDR: 10.244.0.0/24
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`

func TestKubeProxyConfigSaysWhatTheTemplateSaid(t *testing.T) {
	got, err := kubeProxyConfig(testPaths)
	require.NoError(t, err)
	var typed, want kubeproxyconfigv1alpha1.KubeProxyConfiguration
	require.NoError(t, yaml.UnmarshalStrict([]byte(got), &typed), got)
	require.NoError(t, yaml.UnmarshalStrict([]byte(handWrittenKubeProxy), &want))
	// Compared as encoded: the decoded values differ in caches (resource.Quantity's) only.
	canonical, err := yaml.Marshal(want)
	require.NoError(t, err)
	assert.Equal(t, string(canonical), got)
	assert.Equal(t, "kubeproxy.config.k8s.io/v1alpha1", typed.APIVersion)
	assert.Equal(t, "KubeProxyConfiguration", typed.Kind)
	require.NotNil(t, typed.Conntrack.MaxPerCore, "an explicit 0, not unset: the host-wide conntrack settings stay")
	assert.Zero(t, *typed.Conntrack.MaxPerCore)
	require.NotNil(t, typed.Conntrack.TCPEstablishedTimeout)
	assert.Zero(t, typed.Conntrack.TCPEstablishedTimeout.Duration)
}

const handWrittenContainerd = `version = 2
root = "/tmp/qn-test/containerd/root"
state = "/tmp/qn-test/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "/tmp/qn-test/containerd.sock"
[ttrpc]
  address = "/tmp/qn-test/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "/tmp/qn-test/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/tmp/qn-test/node/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/tmp/qn-test/certs.d"
`

func TestContainerdConfigSaysWhatTheTemplateSaid(t *testing.T) {
	got, err := containerdConfig(testPaths, testNode)
	require.NoError(t, err)
	var typed, want map[string]any
	_, err = toml.Decode(got, &typed)
	require.NoError(t, err, got)
	_, err = toml.Decode(handWrittenContainerd, &want)
	require.NoError(t, err)
	assert.Equal(t, want, typed, "every key and value, nothing more")
	// A key on its own, to be sure the comparison sees the nested tables.
	cri := typed["plugins"].(map[string]any)["io.containerd.grpc.v1.cri"].(map[string]any)
	assert.Equal(t, true, cri["restrict_oom_score_adj"])
}

func TestHostsTOMLOfTheNode(t *testing.T) {
	got, err := hostsTOML("quay.io is served from the local image store.", "127.0.0.1:5000", "/tmp/qn-test/pki/ca.crt")
	require.NoError(t, err)
	assert.Equal(t, `# quay.io is served from the local image store.
server = "https://127.0.0.1:5000"

[host]
  [host."https://127.0.0.1:5000"]
    capabilities = ["pull", "resolve"]
    ca = "/tmp/qn-test/pki/ca.crt"
`, got)
	// What the template wrote decodes to the same.
	want, err := hoststoml.Parse([]byte(`# quay.io is served from the local image store.
server = "https://127.0.0.1:5000"

[host."https://127.0.0.1:5000"]
  capabilities = ["pull", "resolve"]
  ca = "/tmp/qn-test/pki/ca.crt"
`))
	require.NoError(t, err)
	typed, err := hoststoml.Parse([]byte(got))
	require.NoError(t, err)
	assert.Equal(t, want, typed)
}
