package localcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The real node: a kubelet, kube-proxy and containerd (with runc and the CNI bridge
// plugin) run next to the control plane, all inside one network namespace that Start
// creates, so pods really run and no packet leaves the machine. Images come from a CNCF
// distribution registry inside the same namespace that serves the store `make images`
// fills over HTTPS (a certificate of the cluster's CA); containerd's hosts.toml sends
// quay.io, docker.io, registry.k8s.io and registry.access.redhat.com there, so manifests
// keep their published image names. ../../../shared/REAL-NODE.md has the facts
// this rests on.

// Node kinds for Options.Node.
const (
	NodeKwok = "kwok"
	NodeReal = "real"
)

// Addresses inside the real node's network namespace. Every port is the same in every
// run: the namespace is the node's own.
const (
	RealNodeName   = "quartet-node"
	RealNodeIP     = "10.213.0.2"
	nodeLinkCIDR   = RealNodeIP + "/24"
	PodCIDR        = "10.244.0.0/24"
	ServiceCIDR    = "10.0.0.0/24"
	nodeAPIPort    = 6443
	nodeEtcdPort   = 2379
	nodePeerPort   = 2380
	nodeRegistryAt = 5000
	// ImageRegistry is the image registry as the node (containerd, hostNetwork pods and
	// programs run with NodeCommand, which trust the cluster CA through SSL_CERT_FILE)
	// reaches it; bridge pods use RealNodeIP:5000.
	ImageRegistry = "127.0.0.1:5000"
	// ScratchRegistry is a second, writable registry for images tests build while the
	// node runs (its storage lives and dies with the cluster folder).
	ScratchRegistry = "127.0.0.1:5001"
	nodeScratchAt   = 5001
	netnsFile       = "quartet-node.netns"
	hostJournal     = "hoststate.json"
	pauseImage      = "registry.k8s.io/pause:3.10"
)

// mirroredRegistries are the registries whose images the node pulls from the local
// store, as an air-gapped cluster pulls from its mirror. registry.access.redhat.com is
// there because `operator-sdk run bundle` hard-codes its catalog pod's init image.
var mirroredRegistries = []string{"quay.io", "docker.io", "registry.k8s.io", "registry.access.redhat.com", ImageRegistry, RealNodeIP + ":5000"}

// RealNode describes the real node of a running cluster.
type RealNode struct {
	// Netns is the path of the bind-mounted network namespace every daemon runs in.
	Netns string `json:"netns"`
	// CgroupRoot is the kubelet's cgroup root (one per run), under every hierarchy.
	CgroupRoot string `json:"cgroupRoot"`
	// ContainerdSocket is containerd's gRPC socket.
	ContainerdSocket string `json:"containerdSocket"`
	// CertsDir is containerd's registry config_path (one hosts.toml per registry host).
	CertsDir string `json:"certsDir"`
	// InternalKubeconfig reaches the API server from inside the namespace (127.0.0.1:6443).
	InternalKubeconfig string `json:"internalKubeconfig"`
}

// nodePaths are the files and folders of a real node under the cluster folder.
type nodePaths struct {
	dir, containerd, containerdConfig, kubeletDir, kubeletConfig, kubeletKubeconfig,
	proxyConfig, proxyKubeconfig, cniConf, cniIPAM, podLogs, pluginDir, resolvConf,
	registryConfig, scratchConfig string
}

func pathsFor(dir string) nodePaths {
	return nodePaths{
		dir:               dir,
		containerd:        filepath.Join(dir, "containerd"),
		containerdConfig:  filepath.Join(dir, "containerd", "config.toml"),
		kubeletDir:        filepath.Join(dir, "kubelet"),
		kubeletConfig:     filepath.Join(dir, "node", "kubelet.yaml"),
		kubeletKubeconfig: filepath.Join(dir, "node", "kubelet.kubeconfig"),
		proxyConfig:       filepath.Join(dir, "node", "kube-proxy.yaml"),
		proxyKubeconfig:   filepath.Join(dir, "node", "kube-proxy.kubeconfig"),
		cniConf:           filepath.Join(dir, "node", "cni"),
		cniIPAM:           filepath.Join(dir, "node", "ipam"),
		podLogs:           filepath.Join(dir, "pod-logs"),
		pluginDir:         filepath.Join(dir, "node", "volume-plugins"),
		resolvConf:        filepath.Join(dir, "node", "resolv.conf"),
		registryConfig:    filepath.Join(dir, "node", "registry.yaml"),
		scratchConfig:     filepath.Join(dir, "node", "scratch-registry.yaml"),
	}
}

// cgroupPrefix starts the name of every real node's cgroup root.
const cgroupPrefix = "quartet-"

// nodeHostTools are the host programs a real node needs (make node-deps installs them).
var nodeHostTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "nsenter", "unshare", "ip", "iptables", "conntrack"}

// CNIBinDir holds Debian's containernetworking-plugins.
const CNIBinDir = "/usr/lib/cni"

// preflightRealNode says exactly what is missing before anything changes on the host.
func preflightRealNode(opts Options) error {
	var missing []string
	if os.Geteuid() != 0 {
		return errors.New("localcluster: a real node needs root (network namespaces, mounts, cgroups)")
	}
	for _, t := range nodeHostTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t+" (run `make node-deps`)")
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(CNIBinDir, p)+" (run `make node-deps`)")
		}
	}
	for _, b := range []string{"kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			missing = append(missing, filepath.Join(opts.BinDir, b)+" (run `make controlplane`)")
		}
	}
	if _, err := os.Stat(opts.RegistryBin); err != nil {
		missing = append(missing, opts.RegistryBin+" (run `make registry`)")
	}
	if _, err := os.Stat(opts.ProvisionerBin); err != nil {
		missing = append(missing, opts.ProvisionerBin+" (run `make node-tools`)")
	}
	if _, err := os.Stat(filepath.Join(opts.ImageStore, "docker", "registry", "v2")); err != nil {
		missing = append(missing, "images in "+opts.ImageStore+" (run `make images`)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("localcluster: the real node needs: %s", strings.Join(missing, "; "))
	}
	return nil
}

// prepareRealNode runs before any daemon starts: it refuses to run beside another real
// node, tears down one a killed run left behind, records the host state, creates the
// network namespace and writes every configuration file.
func (c *Cluster) prepareRealNode(ctx context.Context) error {
	opts := c.opts
	if err := preflightRealNode(opts); err != nil {
		return err
	}
	if err := CleanupStaleRealNodes(opts.Log); err != nil {
		return err
	}
	host, err := SnapshotHost()
	if err != nil {
		return fmt.Errorf("localcluster: recording host state: %w", err)
	}
	b, err := json.Marshal(host)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, hostJournal), b, 0o600); err != nil {
		return err
	}
	if err := writeOwner(c.Dir, os.Getpid()); err != nil {
		return err
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	p := pathsFor(c.Dir)
	c.Node = &RealNode{
		Netns:              filepath.Join(c.Dir, netnsFile),
		CgroupRoot:         cgroupPrefix + hex.EncodeToString(id),
		ContainerdSocket:   filepath.Join(p.containerd, "containerd.sock"),
		CertsDir:           filepath.Join(p.containerd, "certs.d"),
		InternalKubeconfig: filepath.Join(c.Dir, "kubeconfig.node"),
	}
	if len(c.Node.ContainerdSocket)+len(".ttrpc") >= 108 {
		return fmt.Errorf("localcluster: %s is too long for a unix socket; use a shorter cluster folder", c.Node.ContainerdSocket)
	}
	if err := c.createNetns(ctx); err != nil {
		return err
	}
	return writeNodeFiles(c, p)
}

// createNetns makes the node's network namespace, bound to a file in the cluster folder:
// loopback, plus a veth pair with both ends inside (the node IP on one end) and a route
// for the service range. There is no default route: nothing can leave.
func (c *Cluster) createNetns(ctx context.Context) error {
	if err := os.WriteFile(c.Node.Netns, nil, 0o600); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "unshare", "--net="+c.Node.Netns, "true").CombinedOutput(); err != nil {
		return fmt.Errorf("localcluster: creating the network namespace: %v: %s", err, out)
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "qnode0", "type", "veth", "peer", "name", "qnode1"},
		{"addr", "add", nodeLinkCIDR, "dev", "qnode0"},
		{"link", "set", "qnode0", "up"},
		{"link", "set", "qnode1", "up"},
		{"route", "add", ServiceCIDR, "dev", "qnode0", "src", RealNodeIP},
	} {
		if out, err := c.NodeCommand(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("localcluster: ip %s in the node namespace: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// NodeCommand returns a command that runs inside the real node's network namespace (the
// mount namespace stays the host's, as the kubelet's mounts must be seen by containerd),
// with KUBECONFIG set to the admin kubeconfig for inside and SSL_CERT_FILE to the
// cluster CA (which signed the image registry's certificate).
func (c *Cluster) NodeCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + c.Node.Netns, "--", name}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Node.InternalKubeconfig, "SSL_CERT_FILE="+filepath.Join(c.Dir, "pki", "ca.crt"))
	return cmd
}

func writeNodeFiles(c *Cluster, p nodePaths) error {
	for _, d := range []string{p.containerd, c.Node.CertsDir, filepath.Join(c.Dir, "node"), p.cniConf, p.cniIPAM, p.podLogs, p.pluginDir, p.kubeletDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	containerd, err := containerdConfig(p, c.Node)
	if err != nil {
		return err
	}
	kubelet, err := kubeletConfig(p, c.Node, filepath.Join(c.Dir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	proxy, err := kubeProxyConfig(p)
	if err != nil {
		return err
	}
	files := map[string]string{
		p.containerdConfig: containerd,
		p.kubeletConfig:    kubelet,
		p.proxyConfig:      proxy,
		filepath.Join(p.cniConf, "10-quartet.conflist"): cniConfig(p),
		p.resolvConf:     "# The node has no DNS server: nothing may resolve names outside the cluster.\noptions ndots:1\n",
		p.registryConfig: registryConfig(c.opts.ImageStore, filepath.Join(c.Dir, "pki"), nodeRegistryAt, true),
		p.scratchConfig:  registryConfig(filepath.Join(c.Dir, "scratch-registry"), filepath.Join(c.Dir, "pki"), nodeScratchAt, false),
	}
	ca := filepath.Join(c.Dir, "pki", "ca.crt")
	for _, reg := range mirroredRegistries {
		hosts, err := hostsTOML(reg+" is served from the local image store (make images), as from an air-gapped mirror.", ImageRegistry, ca)
		if err != nil {
			return err
		}
		files[filepath.Join(c.Node.CertsDir, reg, "hosts.toml")] = hosts
	}
	for _, reg := range []string{ScratchRegistry, fmt.Sprintf("%s:%d", RealNodeIP, nodeScratchAt)} {
		hosts, err := hostsTOML("The writable scratch registry.", ScratchRegistry, ca)
		if err != nil {
			return err
		}
		files[filepath.Join(c.Node.CertsDir, reg, "hosts.toml")] = hosts
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func cniConfig(p nodePaths) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "quartet",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, PodCIDR, p.cniIPAM)
}

// registryConfig serves store on port over HTTPS; the image store `make images` pushed is
// only read by the node.
func registryConfig(store, pkiDir string, port int, readOnly bool) string {
	return fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  maintenance:
    readonly:
      enabled: %t
    uploadpurging:
      enabled: false
http:
  addr: 0.0.0.0:%d
  tls:
    certificate: %s
    key: %s
`, store, readOnly, port, filepath.Join(pkiDir, "registry.crt"), filepath.Join(pkiDir, "registry.key"))
}

// startRealNode starts the image registry, containerd, the kubelet and kube-proxy in the
// node's namespace and waits until the node is Ready and schedulable.
func (c *Cluster) startRealNode(ctx context.Context, cs kubernetes.Interface) error {
	p := pathsFor(c.Dir)
	if err := c.startProcess("image-registry", c.opts.RegistryBin, "serve", p.registryConfig); err != nil {
		return err
	}
	if err := c.startProcess("scratch-registry", c.opts.RegistryBin, "serve", p.scratchConfig); err != nil {
		return err
	}
	if err := c.startProcess("containerd", "containerd", "--config", p.containerdConfig); err != nil {
		return err
	}
	if err := waitFor(ctx, 60*time.Second, "containerd socket", func() (bool, error) {
		if pr := c.process("containerd"); pr != nil && pr.exited() {
			return false, fmt.Errorf("containerd exited; see %s", pr.Log)
		}
		_, err := os.Stat(c.Node.ContainerdSocket)
		return err == nil, nil
	}); err != nil {
		return err
	}
	if err := createCgroupRoot(c.Node.CgroupRoot); err != nil {
		return err
	}
	if err := c.startProcess("kubelet", filepath.Join(c.opts.BinDir, "kubelet"),
		"--config="+p.kubeletConfig, "--kubeconfig="+p.kubeletKubeconfig,
		"--root-dir="+p.kubeletDir, "--cert-dir="+filepath.Join(p.kubeletDir, "pki"),
		"--hostname-override="+RealNodeName, "--node-ip="+RealNodeIP,
		// A flag, not a configuration field: without it /usr/libexec/kubernetes is used.
		"--volume-plugin-dir="+p.pluginDir); err != nil {
		return err
	}
	if err := c.startProcess("kube-proxy", filepath.Join(c.opts.BinDir, "kube-proxy"), "--config="+p.proxyConfig); err != nil {
		return err
	}
	// Dynamic volumes: a default StorageClass served by a hostPath provisioner.
	if err := c.startProcess("hostpath-provisioner", c.opts.ProvisionerBin, "-kubeconfig="+c.Node.InternalKubeconfig,
		"-dir="+filepath.Join(c.Dir, "volumes"), "-name="+StorageProvisioner); err != nil {
		return err
	}
	if err := createStorageClass(ctx, cs); err != nil {
		return err
	}
	return waitFor(ctx, 120*time.Second, "real node Ready without taints", func() (bool, error) {
		for _, name := range []string{"image-registry", "scratch-registry", "containerd", "kubelet", "kube-proxy", "hostpath-provisioner"} {
			if pr := c.process(name); pr != nil && pr.exited() {
				return false, fmt.Errorf("%s exited; last lines of %s:\n%s", name, pr.Log, tailFile(pr.Log, 15))
			}
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		return ready && len(n.Spec.Taints) == 0, nil
	})
}

// StorageProvisioner is the provisioner name of the real node's default StorageClass.
const StorageProvisioner = "quartet.dev/hostpath"

// createStorageClass makes "standard" the default StorageClass: hostPath volumes under the
// cluster folder, bound when a pod needs them, deleted with their claim.
func createStorageClass(ctx context.Context, cs kubernetes.Interface) error {
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{
			"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       StorageProvisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("localcluster: StorageClass: %w", err)
	}
	return nil
}

// createCgroupRoot makes the kubelet's cgroup root in every hierarchy (the kubelet
// refuses a root that is missing anywhere); a cpuset cgroup starts with the CPUs and
// memory nodes of its parent, or nothing could run in it.
func createCgroupRoot(root string) error {
	hierarchies, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		dir := filepath.Join("/sys/fs/cgroup", h.Name(), root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("localcluster: creating cgroup %s: %w", dir, err)
		}
		if h.Name() == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", h.Name(), f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("localcluster: %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

// killWorkloads stops every container the node runs: SIGKILL to every process in the
// kubelet's cgroups (containers live there, in their own network namespaces).
func (n *RealNode) killWorkloads() {
	if !strings.HasPrefix(n.CgroupRoot, cgroupPrefix) {
		return // never walk (and kill) anything but a node's own cgroups
	}
	_ = killUntilGone(5*time.Second, func() []int { return cgroupPIDs(n.CgroupRoot) })
}

// killUntilGone sends SIGKILL to every process pids lists, every 100 ms, until it lists
// none (nil) or timeout passes (wait's timeout error).
func killUntilGone(timeout time.Duration, pids func() []int) error {
	return wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		left := pids()
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(left) == 0, nil
	})
}

// cgroupPIDs lists the processes in the cgroup tree root of the pids hierarchy (every
// v1 hierarchy holds every process, so one is enough; the memory one as fallback).
func cgroupPIDs(root string) []int {
	var pids []int
	for _, h := range []string{"pids", "memory", "cpu"} {
		base := filepath.Join("/sys/fs/cgroup", h, root)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		_ = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
		return pids
	}
	return pids
}

// processesInNetns lists the processes whose network namespace is the one bound at nsPath.
func processesInNetns(nsPath string) []int {
	var st unix.Stat_t
	if err := unix.Stat(nsPath, &st); err != nil {
		return nil
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if link, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil && link == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// teardown undoes everything a real node did, also when its processes were killed
// without a chance to clean up: it kills what still runs in the namespace and the
// cgroups, unmounts everything below the cluster folder, removes the cgroups and the
// namespace, and restores the host state recorded before the start.
func (n *RealNode) teardown(dir string) error {
	var errs []error
	n.killWorkloads()
	_ = killUntilGone(10*time.Second, func() []int { return processesInNetns(n.Netns) })
	n.killWorkloads()
	if err := unmountBelow(dir); err != nil {
		errs = append(errs, err)
	}
	hierarchies, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hierarchies {
		if n.CgroupRoot == "" {
			break
		}
		if err := removeCgroupTree(filepath.Join("/sys/fs/cgroup", h.Name(), n.CgroupRoot)); err != nil {
			errs = append(errs, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, hostJournal))
	switch {
	case err == nil:
		var before HostState
		if err := json.Unmarshal(b, &before); err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", hostJournal, err))
			break
		}
		if err := before.Restore(func(m string) bool { return under(m, dir) || watched(m) }); err != nil {
			errs = append(errs, err)
		} else {
			_ = os.Remove(filepath.Join(dir, hostJournal))
		}
	case !errors.Is(err, fs.ErrNotExist):
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

func watched(path string) bool {
	for _, w := range watchedPaths {
		if under(path, w) {
			return true
		}
	}
	return false
}

// unmountBelow lazily unmounts every mount point below dir, deepest first (the kubelet
// bind-mounts its root folder onto itself and mounts volumes below it; containerd mounts
// overlays, shm and network namespaces below its state folder).
func unmountBelow(dir string) error {
	var errs []error
	for attempt := 0; attempt < 5; attempt++ {
		mounts, err := mountPoints()
		if err != nil {
			return err
		}
		var mine []string
		for _, m := range mounts {
			if under(m, dir) {
				mine = append(mine, m)
			}
		}
		if len(mine) == 0 {
			return nil
		}
		sort.Sort(sort.Reverse(sort.StringSlice(mine)))
		errs = errs[:0]
		for _, m := range mine {
			if err := unmount(m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func unmount(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmounting %s: %w", path, err)
}

// removeCgroupTree kills what runs in a cgroup tree and removes its folders, deepest first.
func removeCgroupTree(root string) error {
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	var last error
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
				if b, err := os.ReadFile(filepath.Join(path, "cgroup.procs")); err == nil {
					for _, f := range strings.Fields(string(b)) {
						if pid, err := strconv.Atoi(f); err == nil {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		last = nil
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				last = fmt.Errorf("removing cgroup %s: %w", d, err)
			}
		}
		return last == nil, nil
	})
	return last
}

// CleanupStaleRealNodes finds real nodes whose cluster was killed before it could stop
// them (their namespace file is still mounted) and tears them down, restoring the host
// state they recorded. A real node whose API server still runs belongs to someone:
// starting a second one beside it is refused instead (they would share kernel settings).
func CleanupStaleRealNodes(logf func(string, ...any)) error {
	mounts, err := mountPoints()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if filepath.Base(m) != netnsFile {
			continue
		}
		dir := filepath.Dir(m)
		n := &RealNode{Netns: m}
		if st, err := LoadState(dir); err == nil && st.Node != nil {
			n = st.Node
		}
		if ownerAlive(dir) {
			return fmt.Errorf("localcluster: a real node is already running in %s (stop it with `make cluster-down` or its test); only one runs at a time", dir)
		}
		if logf != nil {
			logf("localcluster: tearing down a real node left behind in %s", dir)
		}
		if n.CgroupRoot == "" {
			n.CgroupRoot = cgroupRootFromJournal(dir)
		}
		if err := n.teardown(dir); err != nil {
			return fmt.Errorf("localcluster: cleaning up the real node left in %s: %w", dir, err)
		}
	}
	return nil
}

// ownerFile holds the PID of the process that owns a real node (the test process, or the
// forwarder of a detached cluster) and that process's start time. While it lives, the node
// is not stale. The start time tells the owner from a later process that was given the same
// PID (PIDs are reused, above all in a fresh container or after a reboot): a node whose
// owner died must not be taken for a running one.
const ownerFile = "owner.pid"

func writeOwner(dir string, pid int) error {
	start, err := processStartTime(pid)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(pid)+" "+start), 0o644)
}

func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 || pid == os.Getpid() || syscall.Kill(pid, 0) != nil {
		return false
	}
	if len(fields) < 2 {
		return true // written before start times were recorded
	}
	start, err := processStartTime(pid)
	return err == nil && start == fields[1]
}

// processStartTime is field 22 of /proc/PID/stat: when the process started, in clock ticks
// since boot. The command name (field 2) may hold spaces and parentheses: the fields are
// counted after its last ')'.
func processStartTime(pid int) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state): field 22 is fields[19].
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	return fields[19], nil
}

// cgroupRootFromJournal reads the cgroup root from the kubelet configuration of a node
// whose state.json was never written (a start that was killed midway).
func cgroupRootFromJournal(dir string) string {
	b, err := os.ReadFile(pathsFor(dir).kubeletConfig)
	if err != nil {
		return ""
	}
	var c kubeletconfigv1beta1.KubeletConfiguration
	if err := yaml.Unmarshal(b, &c); err != nil {
		return ""
	}
	return strings.TrimPrefix(c.CgroupRoot, "/")
}

// RegistryTransport reaches the node's registries (ImageRegistry, ScratchRegistry) from
// this process: connections are dialled inside the node's namespace and trust the
// cluster CA. Give it to go-containerregistry (remote.WithTransport) to push test images.
func (c *Cluster) RegistryTransport() (http.RoundTripper, error) {
	pool := x509.NewCertPool()
	b, err := os.ReadFile(filepath.Join(c.Dir, "pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(b)
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dialInNetns(ctx, c.Node.Netns, addr)
		},
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 10 * time.Second,
	}, nil
}

// startAPIForward makes the API server inside the namespace reachable on the host's
// loopback at hostAddr: in this process, or, for a detached cluster, in a forwarder
// process (this program run with ForwardCommand; see RunForwarderIfAsked).
func (c *Cluster) startAPIForward(ctx context.Context, hostAddr string) error {
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(nodeAPIPort))
	if c.opts.Detach {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if err := c.startHostProcess("api-forward", self, ForwardCommand, c.Node.Netns, hostAddr, target); err != nil {
			return err
		}
		// The forwarder lives as long as the detached cluster: it owns the node.
		return writeOwner(c.Dir, c.process("api-forward").PID)
	}
	ln, err := net.Listen("tcp", hostAddr)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(context.Background())
	c.stopForward = cancel
	go forward(fctx, ln, func(ctx context.Context) (net.Conn, error) { return dialInNetns(ctx, c.Node.Netns, target) })
	return nil
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
