package realnode

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/quartet-operator/quartet/test/localcluster"
)

// UpstreamRegistry is a CNCF distribution registry on the node's network (a process in the
// node's namespace, listening on the node IP), playing a public registry's role for a
// RegistryMirror: plain HTTP, optionally behind htpasswd, its access log kept.
type UpstreamRegistry struct {
	// Host is host:port, as image references and a mirror's spec.upstream name it.
	Host string
	// User and Password are its only account when it wants a login.
	User, Password string

	env      *Env
	dir      string
	htpasswd string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// StartUpstreamRegistry starts a registry on port of every address in the node's namespace:
// RealNodeIP:port (Host) and 127.0.0.1:port, a second name of the same registry that no
// mirror configures (containerd speaks plain HTTP to localhost), for direct pulls. bcrypt, when set, is the
// bcrypt hash of password: the registry then wants user:password.
func (e *Env) StartUpstreamRegistry(port int, user, password, bcrypt string) (*UpstreamRegistry, error) {
	dir, err := os.MkdirTemp(e.Dir, fmt.Sprintf("upstream-%d-", port))
	if err != nil {
		return nil, err
	}
	u := &UpstreamRegistry{Host: fmt.Sprintf("%s:%d", localcluster.RealNodeIP, port), env: e, dir: dir, User: user, Password: password}
	if bcrypt != "" {
		u.htpasswd = filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(u.htpasswd, []byte(user+":"+bcrypt+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return u, u.Start()
}

// Start (re)starts the registry on the same storage and waits until it answers.
func (u *UpstreamRegistry) Start() error {
	auth := ""
	if u.htpasswd != "" {
		auth = fmt.Sprintf("auth: {htpasswd: {realm: upstream, path: %q}}\n", u.htpasswd)
	}
	cfg := filepath.Join(u.dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 0.1
log: {level: info, formatter: text}
storage: {filesystem: {rootdirectory: %q}, delete: {enabled: true}}
http: {addr: %q}
%s`, filepath.Join(u.dir, "data"), ":"+strings.TrimPrefix(u.Host, localcluster.RealNodeIP+":"), auth)), 0o600); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(u.dir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	bin := filepath.Join(u.env.Root, "bin", "registry", localcluster.RegistryVersion, "registry")
	u.cmd = u.env.Cluster.NodeCommand(context.Background(), bin, "serve", cfg)
	u.cmd.Env = []string{"PATH=/usr/bin:/bin"} // no REGISTRY_* from this process
	u.cmd.Stdout, u.cmd.Stderr = logf, logf
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := u.cmd.Start(); err != nil {
		return err
	}
	u.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(u.cmd, u.exited)
	tr, err := u.env.Cluster.RegistryTransport()
	if err != nil {
		return err
	}
	client := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	return WaitFor(context.Background(), "upstream registry "+u.Host+" answering", 30*time.Second, func(ctx context.Context) (bool, string, error) {
		select {
		case <-u.exited:
			return false, "", Failed{Reason: "the registry exited: " + u.Log()}
		default:
		}
		resp, err := client.Get("http://" + u.Host + "/v2/")
		if err != nil {
			return false, "", err
		}
		_ = resp.Body.Close()
		return true, "", nil
	})
}

// Stop stops the registry (its storage stays, for a later Start).
func (u *UpstreamRegistry) Stop() {
	if u.cmd == nil {
		return
	}
	_ = u.cmd.Process.Kill()
	<-u.exited
	u.cmd = nil
}

// Freeze stops the registry's process where it is (SIGSTOP): connections are still
// accepted by the kernel, and nothing is answered until Thaw, so every request made
// meanwhile waits, as on a slow upstream.
func (u *UpstreamRegistry) Freeze() error { return u.cmd.Process.Signal(syscall.SIGSTOP) }

// Thaw lets a frozen registry go on (SIGCONT).
func (u *UpstreamRegistry) Thaw() error { return u.cmd.Process.Signal(syscall.SIGCONT) }

// SetPassword changes the only account's password (bcrypt is its hash) and restarts the
// registry, which reads htpasswd when it starts.
func (u *UpstreamRegistry) SetPassword(password, bcrypt string) error {
	u.Stop()
	u.Password = password
	if err := os.WriteFile(u.htpasswd, []byte(u.User+":"+bcrypt+"\n"), 0o600); err != nil {
		return err
	}
	return u.Start()
}

// Log is the registry's log so far (its access log included).
func (u *UpstreamRegistry) Log() string {
	b, _ := os.ReadFile(filepath.Join(u.dir, "registry.log"))
	return string(b)
}

func (u *UpstreamRegistry) options() ([]remote.Option, error) {
	tr, err := u.env.Cluster.RegistryTransport()
	if err != nil {
		return nil, err
	}
	opts := []remote.Option{remote.WithTransport(tr)}
	if u.htpasswd != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: u.User, Password: u.Password}))
	}
	return opts, nil
}

// Push writes img as <Host>/<repo>:<tag> and returns the full reference.
func (u *UpstreamRegistry) Push(repo, tag string, img remote.Taggable) (string, error) {
	ref := fmt.Sprintf("%s/%s:%s", u.Host, repo, tag)
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	opts, err := u.options()
	if err != nil {
		return "", err
	}
	switch i := img.(type) {
	case v1.ImageIndex:
		return ref, remote.WriteIndex(r, i, opts...)
	case v1.Image:
		return ref, remote.Write(r, i, opts...)
	}
	return "", fmt.Errorf("cannot push a %T", img)
}

// TestImage is the e2e image (a shell, sleep, httpget) plus one layer of size random bytes
// of its own, so pulling it must fetch at least that blob; it returns the image and that
// layer's digest.
func (e *Env) TestImage(t interface{ TempDir() string }, size int) (v1.Image, string, error) {
	base, err := e.StoreImage(E2EImage)
	if err != nil {
		return nil, "", err
	}
	dir := t.TempDir()
	content := make([]byte, size)
	if _, err := rand.Read(content); err != nil {
		return nil, "", err
	}
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(root, "payload"), content, 0o644); err != nil {
		return nil, "", err
	}
	tarPath := filepath.Join(dir, "layer.tar")
	if out, err := exec.Command("tar", "--format=gnu", "--owner=0", "--group=0", "--numeric-owner", "-C", root, "-cf", tarPath, ".").CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("tar: %v: %s", err, out)
	}
	layer, err := tarball.LayerFromFile(tarPath)
	if err != nil {
		return nil, "", err
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, "", err
	}
	dig, err := layer.Digest()
	if err != nil {
		return nil, "", err
	}
	return img, dig.String(), nil
}

// StoreImage reads an image `make images` built, by its published name, from the node's
// image registry.
func (e *Env) StoreImage(published string) (v1.Image, error) {
	_, path, ok := strings.Cut(published, "/")
	if !ok {
		return nil, fmt.Errorf("%q has no registry host", published)
	}
	ref, err := name.ParseReference(localcluster.ImageRegistry + "/" + path)
	if err != nil {
		return nil, err
	}
	tr, err := e.Cluster.RegistryTransport()
	if err != nil {
		return nil, err
	}
	return remote.Image(ref, remote.WithTransport(tr))
}
