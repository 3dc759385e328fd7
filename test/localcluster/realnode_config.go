package localcluster

import (
	"bytes"
	"fmt"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	kubeproxyconfigv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/internal/hoststoml"
)

// The real node's configuration files, built as typed values and encoded (TOML for
// containerd, YAML for the kubelet and kube-proxy), so no value needs quoting by hand.

// hostsTOML sends every pull of a registry to the node's registry at addr, trusting ca.
// containerd 1.6 refuses a hosts.toml without a [host] table.
func hostsTOML(comment, addr, ca string) (string, error) {
	b, err := hoststoml.Render(comment, hoststoml.File{
		Server: "https://" + addr,
		Mirror: hoststoml.Host{URL: "https://" + addr, Capabilities: []string{"pull", "resolve"}, CA: ca},
	})
	return string(b), err
}

// containerdConfigFile is the part of containerd's config.toml (version 2) the node sets.
type containerdConfigFile struct {
	Version         int                  `toml:"version"`
	Root            string               `toml:"root"`
	State           string               `toml:"state"`
	DisabledPlugins []string             `toml:"disabled_plugins"`
	GRPC            containerdAddress    `toml:"grpc"`
	TTRPC           containerdAddress    `toml:"ttrpc"`
	Plugins         map[string]criPlugin `toml:"plugins"`
}

type containerdAddress struct {
	Address string `toml:"address"`
}

// criPlugin is [plugins."io.containerd.grpc.v1.cri"].
type criPlugin struct {
	SandboxImage             string        `toml:"sandbox_image"`
	RestrictOOMScoreAdj      bool          `toml:"restrict_oom_score_adj"`
	NetnsMountsUnderStateDir bool          `toml:"netns_mounts_under_state_dir"`
	StreamServerAddress      string        `toml:"stream_server_address"`
	StreamServerPort         string        `toml:"stream_server_port"`
	EnableSELinux            bool          `toml:"enable_selinux"`
	Containerd               criContainerd `toml:"containerd"`
	CNI                      criCNI        `toml:"cni"`
	Registry                 criRegistry   `toml:"registry"`
}

type criContainerd struct {
	Snapshotter        string                `toml:"snapshotter"`
	DefaultRuntimeName string                `toml:"default_runtime_name"`
	Runtimes           map[string]criRuntime `toml:"runtimes"`
}

type criRuntime struct {
	RuntimeType string      `toml:"runtime_type"`
	Options     runcOptions `toml:"options"`
}

type runcOptions struct {
	SystemdCgroup bool   `toml:"SystemdCgroup"`
	Root          string `toml:"Root"`
}

type criCNI struct {
	BinDir  string `toml:"bin_dir"`
	ConfDir string `toml:"conf_dir"`
}

type criRegistry struct {
	ConfigPath string `toml:"config_path"`
}

func containerdConfig(p nodePaths, n *RealNode) (string, error) {
	c := containerdConfigFile{
		Version: 2,
		Root:    filepath.Join(p.containerd, "root"),
		State:   filepath.Join(p.containerd, "state"),
		// Plugins that would write outside root and state, or are not used here.
		DisabledPlugins: []string{"io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
			"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
			"io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"},
		GRPC:  containerdAddress{Address: n.ContainerdSocket},
		TTRPC: containerdAddress{Address: n.ContainerdSocket + ".ttrpc"},
		Plugins: map[string]criPlugin{"io.containerd.grpc.v1.cri": {
			SandboxImage: pauseImage,
			// The machine lacks CAP_SYS_RESOURCE: without this every sandbox fails in runc.
			RestrictOOMScoreAdj:      true,
			NetnsMountsUnderStateDir: true,
			StreamServerAddress:      "127.0.0.1",
			StreamServerPort:         "0",
			EnableSELinux:            false,
			Containerd: criContainerd{
				Snapshotter:        "overlayfs",
				DefaultRuntimeName: "runc",
				Runtimes: map[string]criRuntime{"runc": {
					RuntimeType: "io.containerd.runc.v2",
					Options:     runcOptions{SystemdCgroup: false, Root: filepath.Join(p.containerd, "runc")},
				}},
			},
			CNI:      criCNI{BinDir: CNIBinDir, ConfDir: p.cniConf},
			Registry: criRegistry{ConfigPath: n.CertsDir},
		}},
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		return "", fmt.Errorf("encoding containerd's config.toml: %w", err)
	}
	return b.String(), nil
}

func kubeletConfig(p nodePaths, n *RealNode, caFile string) (string, error) {
	c := kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletconfigv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		// The host uses cgroup v1 and no systemd.
		FailCgroupV1:             ptr.To(false),
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               "/" + n.CgroupRoot,
		ContainerRuntimeEndpoint: "unix://" + n.ContainerdSocket,
		ImageServiceEndpoint:     "unix://" + n.ContainerdSocket,
		FailSwapOn:               ptr.To(false),
		// The disk is shared with everything else on the machine: evict only when it is
		// nearly full, and never garbage-collect the images the tests pulled.
		EvictionHard: map[string]string{
			"nodefs.available":  "2%",
			"imagefs.available": "2%",
			"memory.available":  "100Mi",
		},
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		Address:                     "0.0.0.0",
		Port:                        10250,
		// 0 disables the read-only port; the field is omitempty and 0 is also the default,
		// so the YAML leaves it out.
		ReadOnlyPort:       0,
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To[int32](10248),
		Authentication: kubeletconfigv1beta1.KubeletAuthentication{
			Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			X509:      kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: caFile},
		},
		Authorization:  kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
		ClusterDNS:     []string{ClusterDNSIP},
		ClusterDomain:  ClusterDomain,
		PodLogsDir:     p.podLogs,
		ResolverConfig: ptr.To(p.resolvConf),
		// false: the kubelet then sets vm.overcommit_memory, kernel.panic and
		// kernel.panic_on_oops; Stop writes the host's values back. (omitempty, and false
		// is the default: the YAML leaves it out.)
		ProtectKernelDefaults: false,
		SerializeImagePulls:   ptr.To(false),
		MaxPods:               110,
		HairpinMode:           kubeletconfigv1beta1.HairpinVeth,
		ShutdownGracePeriod:   metav1.Duration{Duration: 0},
		// The node exists for tests: pods see a changed ConfigMap or Secret volume, and
		// the kubelet rechecks its pods, within 10 s instead of the 1 m default (the sync
		// that refreshes volumes comes every syncFrequency, plus jitter).
		SyncFrequency: metav1.Duration{Duration: 10 * time.Second},
		// omitempty, and false is the default: the YAML leaves it out.
		RotateCertificates: false,
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encoding the kubelet's configuration: %w", err)
	}
	return string(b), nil
}

func kubeProxyConfig(p nodePaths) (string, error) {
	c := kubeproxyconfigv1alpha1.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: kubeproxyconfigv1alpha1.SchemeGroupVersion.String(), Kind: "KubeProxyConfiguration"},
		Mode:               kubeproxyconfigv1alpha1.ProxyMode("iptables"),
		ClientConnection:   componentbaseconfigv1alpha1.ClientConnectionConfiguration{Kubeconfig: p.proxyKubeconfig},
		HostnameOverride:   RealNodeName,
		BindAddress:        "0.0.0.0",
		ClusterCIDR:        PodCIDR,
		HealthzBindAddress: "127.0.0.1:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		// Zero leaves the host-wide conntrack settings alone.
		Conntrack: kubeproxyconfigv1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore:            ptr.To[int32](0),
			Min:                   ptr.To[int32](0),
			TCPEstablishedTimeout: &metav1.Duration{},
			TCPCloseWaitTimeout:   &metav1.Duration{},
			UDPTimeout:            metav1.Duration{},
			UDPStreamTimeout:      metav1.Duration{},
		},
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encoding kube-proxy's configuration: %w", err)
	}
	return string(b), nil
}
