package benchutil

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Peers are other projects' programs that do what a Quartet controller does, run next to
// it in the same benchmark. Their code is not part of this repository and the Go module
// proxy this project builds from refuses their modules, so a benchmark runs a peer only
// when the environment names a binary built elsewhere; otherwise it skips that part and
// the report keeps the figures of the last run that had it.
const (
	// EnvReplicator names a mittwald/kubernetes-replicator binary, as released.
	EnvReplicator = "QUARTET_PEER_REPLICATOR"
	// EnvReplicatorTuned names a replicator binary that raises its client rate limit to the
	// value of PEER_KUBE_API_QPS (burst twice that); the released one has no flag for it
	// and runs at client-go's default of 5 requests per second, burst 10.
	EnvReplicatorTuned = "QUARTET_PEER_REPLICATOR_TUNED"
	// EnvChaoskube names a linki/chaoskube binary.
	EnvChaoskube = "QUARTET_PEER_CHAOSKUBE"
)

// PeerBinary returns the peer binary the environment variable env names, or "" when unset.
// A set variable that names no executable file fails the benchmark: a typo must not turn
// into a silently skipped comparison.
func PeerBinary(b testing.TB, env string) string {
	b.Helper()
	path := os.Getenv(env)
	if path == "" {
		return ""
	}
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		b.Fatalf("%s=%s: not an executable file (%v)", env, path, err)
	}
	return path
}

// CountingProxy is a plain-HTTP reverse proxy on loopback in front of the API server,
// authenticated as cfg: a peer process pointed at it through Kubeconfig makes the same
// requests it would make to the API server, and the proxy counts them by verb and path.
type CountingProxy struct {
	Calls    CallCounter
	URL      string
	mu       sync.Mutex
	formats  map[string]map[string]int // "VERB /path" → response Content-Type → count
	reads    []Read
	watches  map[string]int // watches open now, by WatchKey
	listener net.Listener
	server   *http.Server
}

// StartCountingProxy starts a proxy to cfg's API server; it stops when the test ends.
func StartCountingProxy(b testing.TB, cfg *rest.Config) *CountingProxy {
	b.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		b.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	p := &CountingProxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	rp.ModifyResponse = func(resp *http.Response) error {
		p.recordFormat(resp)
		return nil
	}
	p.listener, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p.URL = "http://" + p.listener.Addr().String()
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Calls.count(r)
		if r.Method == http.MethodGet {
			p.mu.Lock()
			p.reads = append(p.reads, Read{URL: *r.URL, Accept: r.Header.Get("Accept")})
			p.mu.Unlock()
		}
		if isWatch(r) {
			// A watch is held for as long as its request is being served: until the
			// client closes it or the API server ends it (its timeout, a restart).
			key := WatchKey(r)
			p.watchOpened(key, 1)
			defer p.watchOpened(key, -1)
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(p.listener) }()
	b.Cleanup(func() { _ = p.server.Close() })
	return p
}

func (p *CountingProxy) recordFormat(resp *http.Response) {
	key := resp.Request.Method
	if resp.Request.URL.Query().Get("watch") == "true" {
		key = "WATCH"
	}
	key += " " + resp.Request.URL.Path
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.formats == nil {
		p.formats = map[string]map[string]int{}
	}
	if p.formats[key] == nil {
		p.formats[key] = map[string]int{}
	}
	p.formats[key][ct]++
}

// Formats returns, per "VERB /path", how many responses came in each Content-Type (its
// media type, parameters dropped): which wire format the client asked for and got.
func (p *CountingProxy) Formats() map[string]map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]map[string]int, len(p.formats))
	for k, v := range p.formats {
		out[k] = maps.Clone(v)
	}
	return out
}

// isWatch tells a watch request (?watch=true, or 1 as older clients send).
func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return r.Method == http.MethodGet && (w == "true" || w == "1")
}

// WatchKey names a watch by what it follows: its path (resource, and namespace when it
// is confined to one), label and field selectors, and " (metadata)" when it asks for
// metadata only (PartialObjectMetadata).
func WatchKey(r *http.Request) string {
	key := r.URL.Path
	q := url.Values{}
	for _, p := range []string{"labelSelector", "fieldSelector"} {
		if v := r.URL.Query().Get(p); v != "" {
			q.Set(p, v)
		}
	}
	if len(q) > 0 {
		key += "?" + q.Encode()
	}
	if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") {
		key += " (metadata)"
	}
	return key
}

func (p *CountingProxy) watchOpened(key string, delta int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watches == nil {
		p.watches = map[string]int{}
	}
	p.watches[key] += delta
	if p.watches[key] == 0 {
		delete(p.watches, key)
	}
}

// OpenWatches returns the watches open through the proxy now, by WatchKey: the watches
// its client holds on the API server. A client's informer holds one watch at a time and
// opens the next when the API server ends one (every 5 to 10 minutes), so a count taken in
// that moment can be short by one.
func (p *CountingProxy) OpenWatches() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.watches)
}

// Read is one GET the proxy passed on (a get, a list or a watch).
type Read struct {
	URL    url.URL
	Accept string
}

// Reads returns every GET so far, in order.
func (p *CountingProxy) Reads() []Read {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reads)
}

// Kubeconfig writes a kubeconfig that points at the proxy and returns its path.
func (p *CountingProxy) Kubeconfig(b testing.TB) string {
	b.Helper()
	return writeKubeconfig(b, &clientcmdapi.Cluster{Server: p.URL}, &clientcmdapi.AuthInfo{})
}

// DirectKubeconfig writes a kubeconfig that reaches cfg's API server directly, with cfg's
// credentials, and returns its path: for a peer whose requests need not be counted, so that
// its traffic does not pass through (and allocate in) the benchmark's process.
func DirectKubeconfig(b testing.TB, cfg *rest.Config) string {
	b.Helper()
	return writeKubeconfig(b,
		&clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData,
			InsecureSkipTLSVerify: cfg.Insecure, TLSServerName: cfg.ServerName},
		&clientcmdapi.AuthInfo{ClientCertificate: cfg.CertFile, ClientCertificateData: cfg.CertData,
			ClientKey: cfg.KeyFile, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
			Username: cfg.Username, Password: cfg.Password})
}

func writeKubeconfig(b testing.TB, cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo) string {
	b.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = cluster
	kc.AuthInfos["bench"] = user
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// Process is a peer (or the manager binary) running as a child process.
type Process struct {
	Name string
	cmd  *exec.Cmd
	log  *tailBuffer
}

// logTail is how much of a process's output is kept. A peer logging a line per object it
// writes would otherwise grow the benchmark process by megabytes per run, and that process
// is the one whose memory the benchmarks measure when the manager runs in it.
const logTail = 64 << 10

// StartProcess starts binary with args and extra environment; the tail of its output is
// kept in memory and printed if the benchmark fails. The process is killed when the
// benchmark ends.
func StartProcess(b testing.TB, name, binary string, env []string, args ...string) *Process {
	b.Helper()
	p := &Process{Name: name, log: &tailBuffer{max: logTail}}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", name, err)
	}
	b.Cleanup(func() {
		p.Stop()
		if b.Failed() {
			b.Logf("%s output:\n%s", name, tail(p.log.String(), 4000))
		}
	})
	return p
}

// Stop kills the process and waits for it.
func (p *Process) Stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// RSS returns the process's resident memory (VmRSS) in bytes.
func (p *Process) RSS() (uint64, error) { return ProcRSS(p.Pid()) }

// CPU returns the user+system CPU time the process has used so far.
func (p *Process) CPU() (time.Duration, error) { return ProcCPU(p.Pid()) }

// ProcRSS reads VmRSS of process pid from /proc.
func ProcRSS(pid int) (uint64, error) { return ProcStatus(pid, "VmRSS") }

// ProcStatus reads a size field of /proc/<pid>/status (VmRSS, RssAnon, RssFile, …) in bytes.
func ProcStatus(pid int, field string) (uint64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times; 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// ProcCPU reads the user and system CPU time of process pid from /proc/<pid>/stat.
func ProcCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err := strconv.ParseUint(fields[11], 10, 64) // field 14 of the whole line
	if err != nil {
		return 0, err
	}
	stime, err := strconv.ParseUint(fields[12], 10, 64) // field 15
	if err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// WaitFor polls cond every 50 ms until it is true or timeout passes.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tailBuffer is an io.Writer that keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
