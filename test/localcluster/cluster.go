// Package localcluster starts a real Kubernetes control plane on loopback from binaries
// built out of the Go module proxy: etcd, kube-apiserver and, for a full cluster,
// kube-controller-manager, kube-scheduler and either kwok with fake nodes, so pods "run"
// without a kubelet (scale tests), or one real node (kubelet, kube-proxy, containerd,
// runc, CNI bridge) on which containers really run, inside a network namespace of its
// own (realnode.go). `make cluster-up`, `make demo` and the integration tests all use it.
package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Versions of the binaries the Makefile builds besides the control plane, whose version
// is KubernetesVersion (version.go).
const (
	KwokVersion     = "v0.8.0"
	RegistryVersion = "v3.0.0"
)

// Options say where the binaries are and what to start.
type Options struct {
	// Dir holds data, certificates, logs, the kubeconfig and state.json. Required.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
	BinDir string
	// KwokDir holds kwok and stages.yaml.
	KwokDir string
	// Full also starts kube-controller-manager, kube-scheduler and the nodes.
	// Without it only etcd and kube-apiserver run (like envtest).
	Full bool
	// Node is NodeKwok (default: Nodes fake nodes) or NodeReal (one real node; needs
	// root, `make node-deps` and `make images`; implies Full).
	Node string
	// Nodes is the number of fake nodes (default 1).
	Nodes int
	// ImageStore is the registry storage `make images` fills, served to a real node
	// (default <repo>/bin/images/registry).
	ImageStore string
	// RegistryBin is the CNCF distribution registry that serves ImageStore (default
	// <repo>/bin/registry/<version>/registry).
	RegistryBin string
	// ProvisionerBin serves a real node's default StorageClass (default
	// <repo>/bin/tools/hostpath-provisioner, from `make node-tools`).
	ProvisionerBin string
	// Detach starts the processes in their own session so they outlive this process
	// (make cluster-up); otherwise they die with it.
	Detach bool
	// BeforeControllers, when set, runs once the API server is ready and before the
	// controller-manager starts (tests install CRDs here, so the garbage collector knows
	// their kinds from its first discovery instead of after its next resync).
	BeforeControllers func(cfg *rest.Config) error
	// Log, when set, receives one line per step.
	Log func(format string, args ...any)
}

// Process is one running component.
type Process struct {
	Name string   `json:"name"`
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Log  string   `json:"log"`
	// InNode says the process runs in the real node's network namespace.
	InNode bool `json:"inNode,omitempty"`
	cmd    *exec.Cmd
	done   chan struct{}
}

// Cluster is a running local control plane.
type Cluster struct {
	Dir          string `json:"dir"`
	Kubeconfig   string `json:"kubeconfig"`
	APIServerURL string `json:"apiServerURL"`
	EtcdURL      string `json:"etcdURL"`
	Full         bool   `json:"full"`
	// Node is the real node (nil with kwok).
	Node        *RealNode  `json:"node,omitempty"`
	Processes   []*Process `json:"processes"`
	opts        Options
	restConfig  *rest.Config
	stopForward context.CancelFunc
	stopped     bool
}

// RepoRoot finds the repository root (the directory holding go.mod) from the working
// directory upwards, so tests in any package find bin/.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (PROJECT and go.mod) not found above the working directory")
		}
		dir = parent
	}
}

// DefaultBinDirs returns the binary folders the Makefile fills, honouring
// KUBEBUILDER_ASSETS and QUARTET_KWOK_DIR when set.
func DefaultBinDirs() (binDir, kwokDir string, err error) {
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	binDir = os.Getenv("KUBEBUILDER_ASSETS")
	if binDir == "" {
		k8s, err := KubernetesVersion()
		if err != nil {
			return "", "", err
		}
		binDir = filepath.Join(root, "bin", "k8s", k8s)
	}
	kwokDir = os.Getenv("QUARTET_KWOK_DIR")
	if kwokDir == "" {
		kwokDir = filepath.Join(root, "bin", "kwok", KwokVersion)
	}
	return binDir, kwokDir, nil
}

// defaultRealNodePaths fills ImageStore and RegistryBin from the repository's bin/.
func defaultRealNodePaths(opts *Options) error {
	if opts.ImageStore != "" && opts.RegistryBin != "" && opts.ProvisionerBin != "" {
		return nil
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	if opts.ImageStore == "" {
		opts.ImageStore = filepath.Join(root, "bin", "images", "registry")
	}
	if opts.RegistryBin == "" {
		opts.RegistryBin = filepath.Join(root, "bin", "registry", RegistryVersion, "registry")
	}
	if opts.ProvisionerBin == "" {
		opts.ProvisionerBin = filepath.Join(root, "bin", "tools", "hostpath-provisioner")
	}
	return nil
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start brings up the control plane and waits until it is ready (and, for a full
// cluster, until the fake nodes are Ready and the default ServiceAccount exists).
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Dir == "" {
		return nil, errors.New("localcluster: Options.Dir is required")
	}
	if opts.Nodes == 0 {
		opts.Nodes = 1
	}
	real := opts.Node == NodeReal
	if real {
		opts.Full = true
		if err := defaultRealNodePaths(&opts); err != nil {
			return nil, err
		}
	} else if opts.Node != "" && opts.Node != NodeKwok {
		return nil, fmt.Errorf("localcluster: unknown node kind %q (want %q or %q)", opts.Node, NodeKwok, NodeReal)
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		// (a real node's own binaries are checked by preflightRealNode)
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("localcluster: %s missing in %s (run `make controlplane`): %w", b, opts.BinDir, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(opts.Dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, Full: opts.Full, opts: opts, Kubeconfig: filepath.Join(opts.Dir, "kubeconfig")}
	defer func() {
		if err != nil {
			// A failed start undoes everything, host changes of a real node included.
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, fmt.Errorf("localcluster: cleaning up after the failed start: %w", stopErr))
			}
		}
	}()

	if real {
		if err := c.prepareRealNode(ctx); err != nil {
			return nil, err
		}
	}
	p, err := writePKI(filepath.Join(opts.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("localcluster: certificates: %w", err)
	}
	// The host reaches the API server on apiPort; a real node's control plane listens on
	// fixed ports inside its own namespace and a forwarder connects the two.
	apiPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, listenPort := nodeEtcdPort, nodePeerPort, nodeAPIPort
	if !real {
		if etcdPort, err = FreePort(); err != nil {
			return nil, err
		}
		if peerPort, err = FreePort(); err != nil {
			return nil, err
		}
		listenPort = apiPort
	}
	c.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	dataDir := filepath.Join(opts.Dir, "etcd")
	_ = os.RemoveAll(dataDir)

	start := time.Now()
	if err := c.startProcess("etcd", filepath.Join(opts.BinDir, "etcd"),
		"--name=default", "--data-dir="+dataDir,
		"--listen-client-urls="+c.EtcdURL, "--advertise-client-urls="+c.EtcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync=true", "--log-level=warn",
		"--quota-backend-bytes=8589934592"); err != nil {
		return nil, err
	}
	if err := c.writeKubeconfigs(p); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(p, listenPort); err != nil {
		return nil, err
	}
	if real {
		if err := c.startAPIForward(ctx, fmt.Sprintf("127.0.0.1:%d", apiPort)); err != nil {
			return nil, err
		}
	}
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	opts.Log("localcluster: etcd and kube-apiserver ready at %s in %s", c.APIServerURL, time.Since(start).Round(time.Millisecond))
	if opts.BeforeControllers != nil {
		if err := opts.BeforeControllers(c.RestConfig()); err != nil {
			return nil, err
		}
	}
	if opts.Full {
		if err := c.startRest(ctx, p); err != nil {
			return nil, err
		}
		if real {
			opts.Log("localcluster: controller-manager, scheduler and the real node %s (kubelet, kube-proxy, containerd) ready in %s", RealNodeName, time.Since(start).Round(time.Millisecond))
		} else {
			opts.Log("localcluster: controller-manager, scheduler, kwok and %d node(s) ready in %s", opts.Nodes, time.Since(start).Round(time.Millisecond))
		}
	}
	return c, c.SaveState()
}

func (c *Cluster) apiServerArgs(p *pki, port int) []string {
	if c.Node != nil {
		return append(c.commonAPIServerArgs(p, port),
			// Inside the node's namespace: pods reach it on the node IP and through the
			// kubernetes Service; the kubelet's credentials are checked by the Node authorizer.
			"--bind-address=0.0.0.0", "--advertise-address="+RealNodeIP,
			"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+p.KubeletClientCert, "--kubelet-client-key="+p.KubeletClientKey,
			"--kubelet-preferred-address-types=InternalIP,Hostname")
	}
	return append(c.commonAPIServerArgs(p, port), "--bind-address=127.0.0.1", "--authorization-mode=RBAC")
}

func (c *Cluster) commonAPIServerArgs(p *pki, port int) []string {
	return []string{
		"--etcd-servers=" + c.EtcdURL,
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CACert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.SAPub, "--service-account-signing-key-file=" + p.SAKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		// The aggregation layer (extension API servers such as OLM's packageserver).
		"--requestheader-client-ca-file=" + p.FrontProxyCACert, "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.FrontProxyClientCert, "--proxy-client-key-file=" + p.FrontProxyClientKey,
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
		"--profiling=false",
	}
}

func (c *Cluster) startAPIServer(p *pki, port int) error {
	return c.startProcess("kube-apiserver", filepath.Join(c.opts.BinDir, "kube-apiserver"), c.apiServerArgs(p, port)...)
}

func (c *Cluster) startRest(ctx context.Context, p *pki) error {
	kubeconfig := c.Kubeconfig
	if c.Node != nil {
		kubeconfig = c.Node.InternalKubeconfig
	}
	if err := c.startProcess("kube-controller-manager", filepath.Join(c.opts.BinDir, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--service-account-private-key-file="+p.SAKey, "--root-ca-file="+p.CACert,
		"--cluster-signing-cert-file="+p.CACert, "--cluster-signing-key-file="+p.CAKey,
		"--controllers=*", "--kube-api-qps=200", "--kube-api-burst=400",
		// Without it the flex-volume prober creates /usr/libexec/kubernetes/kubelet-plugins/
		// on the host, kwok clusters included, racing a real-node test's host snapshot.
		"--flex-volume-plugin-dir="+filepath.Join(c.Dir, "flex-volume-plugins"),
		"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		"--concurrent-gc-syncs=40", "--concurrent-namespace-syncs=20"); err != nil {
		return err
	}
	if err := c.startProcess("kube-scheduler", filepath.Join(c.opts.BinDir, "kube-scheduler"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--kube-api-qps=200", "--kube-api-burst=400"); err != nil {
		return err
	}
	if c.Node != nil {
		cs, err := kubernetes.NewForConfig(c.RestConfig())
		if err != nil {
			return err
		}
		if err := c.startRealNode(ctx, cs); err != nil {
			return err
		}
		if err := startClusterDNS(ctx, cs); err != nil {
			return err
		}
		return waitFor(ctx, 90*time.Second, "default ServiceAccount", func() (bool, error) {
			_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	}
	kwok := filepath.Join(c.opts.KwokDir, "kwok")
	if _, err := os.Stat(kwok); err != nil {
		return fmt.Errorf("localcluster: kwok missing in %s (run `make controlplane`): %w", c.opts.KwokDir, err)
	}
	if err := c.startProcess("kwok", kwok,
		"--kubeconfig="+c.Kubeconfig, "--config="+filepath.Join(c.opts.KwokDir, "stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
		// Without an explicit lease duration kwok renews no node Lease, and its status
		// heartbeat (about every 55 s) races the controller-manager's 50 s grace period:
		// the fake node would flap NotReady and its pods with it.
		"--node-lease-duration-seconds=40"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.RestConfig())
	if err != nil {
		return err
	}
	// The fake kubelets claim the API server's own release (its binary carries it).
	server, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("localcluster: API server version: %w", err)
	}
	for i := 0; i < c.opts.Nodes; i++ {
		if err := createFakeNode(ctx, cs, fmt.Sprintf("kwok-node-%d", i), server.GitVersion); err != nil {
			return err
		}
	}
	return waitFor(ctx, 90*time.Second, "nodes Ready and default ServiceAccount", func() (bool, error) {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= c.opts.Nodes, nil
	})
}

func createFakeNode(ctx context.Context, cs kubernetes.Interface, name, kubeletVersion string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": ""},
		},
		Status: corev1.NodeStatus{
			Capacity:    fakeResources(),
			Allocatable: fakeResources(),
			NodeInfo:    corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: kubeletVersion + "-kwok"},
		},
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func fakeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("20000"),
	}
}

// writeKubeconfigs writes the admin kubeconfig for the host and, for a real node, the
// kubeconfigs used inside its namespace: admin (controller-manager, scheduler, tools run
// with NodeCommand), the kubelet's (system:node:<name>) and kube-proxy's.
func (c *Cluster) writeKubeconfigs(p *pki) error {
	if err := writeKubeconfig(c.Kubeconfig, c.APIServerURL, p.CACert, p.AdminCert, p.AdminKey); err != nil {
		return err
	}
	if c.Node == nil {
		return nil
	}
	inside := fmt.Sprintf("https://127.0.0.1:%d", nodeAPIPort)
	np := pathsFor(c.Dir)
	if err := writeKubeconfig(c.Node.InternalKubeconfig, inside, p.CACert, p.AdminCert, p.AdminKey); err != nil {
		return err
	}
	if err := writeKubeconfig(np.kubeletKubeconfig, inside, p.CACert, p.NodeCert, p.NodeKey); err != nil {
		return err
	}
	return writeKubeconfig(np.proxyKubeconfig, inside, p.CACert, p.ProxyCert, p.ProxyKey)
}

func writeKubeconfig(path, server, ca, cert, key string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["quartet-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["quartet-local"] = &clientcmdapi.Context{Cluster: "quartet-local", AuthInfo: "user", Namespace: "default"}
	cfg.CurrentContext = "quartet-local"
	return clientcmd.WriteToFile(*cfg, path)
}

// RestConfig is an admin client configuration for the cluster.
func (c *Cluster) RestConfig() *rest.Config {
	if c.restConfig == nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			panic(fmt.Sprintf("localcluster: reading own kubeconfig: %v", err))
		}
		cfg.QPS, cfg.Burst = 500, 1000
		c.restConfig = cfg
	}
	return rest.CopyConfig(c.restConfig)
}

// Kubectl is the kubectl built beside the control plane's binaries (Options.BinDir).
func (c *Cluster) Kubectl() string {
	return filepath.Join(c.opts.BinDir, "kubectl")
}

func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(c.RestConfig())
	if err != nil {
		return err
	}
	return waitFor(ctx, timeout, "kube-apiserver /readyz", func() (bool, error) {
		if p := c.process("kube-apiserver"); p != nil && p.exited() {
			return false, fmt.Errorf("kube-apiserver exited; see %s", p.Log)
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok", nil
	})
}

// waitFor polls cond every 100 ms until it holds, fails, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case wait.Interrupted(err):
		return fmt.Errorf("localcluster: timed out after %s waiting for %s", timeout, what)
	}
	return err
}

// startProcess starts a component; a real node's components run inside its namespace.
func (c *Cluster) startProcess(name, bin string, args ...string) error {
	return c.start(name, c.Node != nil, bin, args...)
}

// startHostProcess starts a component in the host's network namespace.
func (c *Cluster) startHostProcess(name, bin string, args ...string) error {
	return c.start(name, false, bin, args...)
}

func (c *Cluster) start(name string, inNode bool, bin string, args ...string) error {
	logPath := filepath.Join(c.Dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	if inNode {
		// nsenter enters the namespace and execs bin: the PID is the component's own.
		cmd = exec.Command("nsenter", append([]string{"--net=" + c.Node.Netns, "--", bin}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if c.opts.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localcluster: starting %s: %w", name, err)
	}
	p := &Process{Name: name, PID: cmd.Process.Pid, Args: append([]string{bin}, args...), Log: logPath, InNode: inNode, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	// Replace an earlier process of the same name (a restart).
	for i, old := range c.Processes {
		if old.Name == name {
			c.Processes[i] = p
			return nil
		}
	}
	c.Processes = append(c.Processes, p)
	return nil
}

func (c *Cluster) process(name string) *Process {
	for _, p := range c.Processes {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (p *Process) exited() bool {
	if p.done == nil {
		return syscall.Kill(p.PID, 0) != nil
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to 20 s, then SIGKILL (again every 5 s until it is gone).
func (p *Process) stop() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	// exited sees a child of ours end through done, and any other process (stopped from
	// state.json) by its PID being gone.
	exited := func(context.Context) (bool, error) { return p.exited(), nil }
	for timeout := 20 * time.Second; ; timeout = 5 * time.Second {
		if wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, exited) == nil {
			return
		}
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// Stop stops every component in reverse start order (kwok or the node, scheduler,
// controller-manager, apiserver, etcd), waiting for each, so the apiserver is never left
// without etcd. A real node's containers are killed once its kubelet has stopped (so
// nothing restarts them), and then everything it changed on the host is undone.
func (c *Cluster) Stop() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var err error
	for i := len(c.Processes) - 1; i >= 0; i-- {
		p := c.Processes[i]
		p.stop()
		if p.Name == "kubelet" && c.Node != nil {
			c.Node.killWorkloads()
		}
	}
	c.Processes = nil
	if c.stopForward != nil {
		c.stopForward()
	}
	if c.Node != nil {
		err = c.Node.teardown(c.Dir)
	}
	_ = os.Remove(filepath.Join(c.Dir, "state.json"))
	return err
}

// RestartAPIServer stops kube-apiserver and starts it again with the same flags, then
// waits for /readyz. Fault-injection tests use it.
func (c *Cluster) RestartAPIServer(ctx context.Context, downtime time.Duration) error {
	p := c.process("kube-apiserver")
	if p == nil {
		return errors.New("localcluster: no kube-apiserver")
	}
	p.stop()
	time.Sleep(downtime)
	if err := c.start("kube-apiserver", p.InNode, p.Args[0], p.Args[1:]...); err != nil {
		return err
	}
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		return err
	}
	return c.SaveState()
}

// RestartNodeComponent stops one daemon of the real node (containerd, kubelet or
// kube-proxy) with SIGTERM and starts it again with the same flags. The containers keep
// running, as with `systemctl restart`: their shims are not the daemon's children.
// Fault-injection tests use it.
func (c *Cluster) RestartNodeComponent(name string) error {
	switch name {
	case "containerd", "kubelet", "kube-proxy":
	default:
		return fmt.Errorf("localcluster: %s is not a node daemon", name)
	}
	p := c.process(name)
	if c.Node == nil || p == nil {
		return fmt.Errorf("localcluster: no real node %s to restart", name)
	}
	p.stop()
	if err := c.start(name, p.InNode, p.Args[0], p.Args[1:]...); err != nil {
		return err
	}
	return c.SaveState()
}

// SaveState writes state.json so `make cluster-down` can stop a detached cluster.
func (c *Cluster) SaveState() error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, "state.json"), b, 0o644)
}

// LoadState reads state.json of a cluster started earlier (possibly by another process).
func LoadState(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("localcluster: %s/state.json: %w", dir, err)
	}
	return c, nil
}

// Alive reports whether every recorded process still runs and the API server answers.
func (c *Cluster) Alive(ctx context.Context) bool {
	for _, p := range c.Processes {
		if p.exited() {
			return false
		}
	}
	cs, err := kubernetes.NewForConfig(c.RestConfig())
	if err != nil {
		return false
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && strings.TrimSpace(string(body)) == "ok"
}
