// Command images (make images) builds every container image the real-node cluster pulls,
// offline and reproducibly, and pushes them into a CNCF distribution registry store on disk
// (bin/images/registry) that the node's own registry serves later.
//
// Inputs: binaries built from the Go module proxy (this repository's, and the pinned tools in
// bin/tools/ and bin/registry/), Debian packages fetched with `apt-get download` and unpacked
// with dpkg-deb into bin/images/work/debs/ (busybox-static, ca-certificates; nothing is
// installed on the host), and the repository's bundle/, catalog/ and hack/olm/bundles/. No
// container engine: each layer is a tar written with archive/tar (layer.go: fixed mtime,
// owners, order) into bin/images/work/layers/, and
// go-containerregistry appends the layers to an empty image, sets the config and pushes.
//
// The releases of hack/olm/releases run their own code: each one's operator image is built from
// its commit (a temporary `git worktree`, removed afterwards, with the same build command), as
// that commit's Dockerfile says, and its bundle image from its frozen bundle with the labels of
// that commit's bundle.Dockerfile. v0.1.0 (reconstructed) is the oldest release's operator image
// under another tag. A clone without that history fails here (git fetch --unshallow).
//
// Each image is pushed under its published name minus the host, e.g.
// quay.io/quartet-operator/quartet:v0.3.0 as 127.0.0.1:PORT/quartet-operator/quartet:v0.3.0
// (containerd's hosts.toml on the node maps quay.io, docker.io and registry.k8s.io to it).
// bin/images/images.txt lists "published-name digest"; a rebuild compares its digests with the
// previous list and says which changed. IMAGES_CHECK=1 (make images-check) fails when any did.
//
// It runs from the repository's root (the Makefile: go run ./hack/images), which passes the
// tool paths (OPM, GRPC_HEALTH_PROBE, ...) and image names; the defaults match it. QUARTET_IMAGES_DIR puts the store, the list and the work files elsewhere
// than bin/images (a second build that must not replace the store a running real node pulls
// from); the Debian packages are then fetched again unless copied into its work/debs/.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

var start = time.Now()

func say(format string, args ...any) {
	fmt.Printf("images: [%ds] %s\n", int(time.Since(start).Seconds()), fmt.Sprintf(format, args...))
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// settings are the tool paths and image names, from the environment (the Makefile's).
type settings struct {
	root, out                                           string
	olmVersion, opmVersion                              string
	opm, grpcHealthProbe, scorecardTest, registry, core string
	tagBase                                             string
	images                                              map[string]string // role -> published name
}

func readSettings(root string) settings {
	s := settings{root: root, out: env("QUARTET_IMAGES_DIR", filepath.Join(root, "bin", "images"))}
	tools := filepath.Join(root, "bin", "tools")
	s.olmVersion = env("OLM_VERSION", "v0.46.0")
	s.opmVersion = env("OPM_VERSION", "v1.74.0")
	sdk := env("OPERATOR_SDK_VERSION", "v1.42.2")
	coredns := env("COREDNS_VERSION", "v1.12.4")
	s.opm = env("OPM", filepath.Join(tools, "opm-"+s.opmVersion))
	s.grpcHealthProbe = env("GRPC_HEALTH_PROBE", filepath.Join(tools, "grpc_health_probe-v0.4.40"))
	s.scorecardTest = env("SCORECARD_TEST", filepath.Join(tools, "scorecard-test-"+sdk))
	s.registry = env("REGISTRY", filepath.Join(root, "bin", "registry", "v3.0.0", "registry"))
	s.core = env("COREDNS", filepath.Join(tools, "coredns-"+coredns))
	s.tagBase = env("IMAGE_TAG_BASE", "quay.io/quartet-operator/quartet")
	s.images = map[string]string{
		"IMG":                 env("IMG", s.tagBase+":v0.3.0"),
		"BUNDLE_IMG":          env("BUNDLE_IMG", s.tagBase+"-bundle:v0.3.0"),
		"CATALOG_IMG":         env("CATALOG_IMG", s.tagBase+"-catalog:v0.3.0"),
		"OPM_IMG":             env("OPM_IMG", "quay.io/operator-framework/opm:"+s.opmVersion),
		"OLM_IMG":             env("OLM_IMG", "quay.io/operator-framework/olm:"+s.olmVersion),
		"REGISTRY_IMG":        env("REGISTRY_IMG", "docker.io/library/registry:3.0.0"),
		"MIRROR_REGISTRY_IMG": env("MIRROR_REGISTRY_IMG", "quay.io/quartet-operator/mirror-registry:v0.3.0"),
		"PAUSE_IMG":           env("PAUSE_IMG", "registry.k8s.io/pause:3.10"),
		"SCORECARD_TEST_IMG":  env("SCORECARD_TEST_IMG", "quay.io/operator-framework/scorecard-test:"+sdk),
		"SCORECARD_UNTAR_IMG": env("SCORECARD_UNTAR_IMG", "quay.io/operator-framework/scorecard-untar:quartet"),
		"E2E_IMG":             env("E2E_IMG", "quay.io/quartet-operator/e2e:dev"),
		"COREDNS_IMG":         env("COREDNS_IMG", "registry.k8s.io/coredns/coredns:"+coredns),
		// operator-sdk run bundle hard-codes this image (no flag) for its catalog pod's init
		// container, which runs sh, cat and gzip: a busybox stand-in under that name.
		"UBI_IMG": env("UBI_IMG", "registry.access.redhat.com/ubi9/ubi:9.7"),
		// An empty file-based catalog (opm + an empty /configs + the FBC label): the index image
		// `operator-sdk run bundle --index-image` adds a bundle to.
		"EMPTY_INDEX_IMG": env("EMPTY_INDEX_IMG", "quay.io/quartet-operator/empty-index:"+s.opmVersion),
	}
	return s
}

// olmBins are OLM's binaries, bin/tools/<name>-$OLM_VERSION.
var olmBins = []string{"olm", "catalog", "package-server", "copy-content", "cpb"}

// release is one line of hack/olm/releases: a version that shipped, and its commit.
type release struct{ version, commit string }

// readReleases reads hack/olm/releases, oldest first.
func readReleases(root string) ([]release, error) {
	data, err := os.ReadFile(filepath.Join(root, "hack", "olm", "releases"))
	if err != nil {
		return nil, err
	}
	var out []release
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("hack/olm/releases: malformed line %q", line)
		}
		out = append(out, release{f[0], f[1]})
	}
	if len(out) == 0 {
		return nil, errors.New("hack/olm/releases lists no release")
	}
	return out, nil
}

func main() {
	syscall.Umask(0o022)
	root, err := os.Getwd() // the repository's root: the Makefile runs go run ./hack/images
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = run(ctx, readSettings(root))
		stop()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

// run builds, pushes and lists the images.
func run(ctx context.Context, s settings) error {
	releases, err := readReleases(s.root)
	if err != nil {
		return err
	}
	work := filepath.Join(s.out, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	// One build at a time (make cluster-up NODE=real runs make images too).
	lock, err := os.OpenFile(filepath.Join(s.out, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		say("waiting for another make images to finish")
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			return err
		}
	}
	if err := checkTools(ctx, s); err != nil {
		return err
	}

	debs := map[string]string{}
	for _, pkg := range []string{"busybox-static", "ca-certificates"} {
		if debs[pkg], err = deb(ctx, work, pkg); err != nil {
			return err
		}
	}

	say("building manager, mirror-registry, pause, fakerates, httpget")
	bin := filepath.Join(work, "bin")
	for _, b := range []struct{ dir, out string }{
		{".", "manager"}, {"cmd/mirror-registry", "mirror-registry"}, // a Go module of its own
		{"hack/images/pause", "pause"}, {"hack/fakerates", "fakerates"}, {"test/httpget", "httpget"},
	} {
		if err := goBuild(ctx, filepath.Join(s.root, b.dir), filepath.Join(bin, b.out)); err != nil {
			return err
		}
	}
	for _, r := range releases {
		if err := releaseBuild(ctx, s.root, work, r); err != nil {
			return err
		}
	}

	layers, err := makeLayers(ctx, s, work, releases, debs)
	if err != nil {
		return err
	}
	images, err := assemble(s, work, releases, layers)
	if err != nil {
		return err
	}

	store := filepath.Join(s.out, "registry")
	reg, stopRegistry, err := startRegistry(s.registry, store, work, false)
	if err != nil {
		return err
	}
	defer stopRegistry()
	say("registry %s, storage %s", reg, store)
	var list []string
	for _, ref := range slices.Sorted(maps.Keys(images)) {
		if err := push(ctx, reg, ref, images[ref]); err != nil {
			return err
		}
		d, err := images[ref].Digest()
		if err != nil {
			return err
		}
		say("pushed %s", ref)
		list = append(list, ref+" "+d.String())
	}
	stopRegistry()
	return writeList(s.out, list)
}

// checkTools fails when a tool is missing. The opm image is FROM scratch: opm must be the
// static build of hack/build-olm-tools.sh (an older bin/tools/opm-* may be a dynamic one; it
// is rebuilt then).
func checkTools(ctx context.Context, s settings) error {
	var missing []string
	tools := []string{s.grpcHealthProbe, s.opm, s.scorecardTest, s.registry, s.core}
	for _, b := range olmBins {
		tools = append(tools, filepath.Join(s.root, "bin", "tools", b+"-"+s.olmVersion))
	}
	for _, f := range tools {
		if fi, err := os.Stat(f); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s (run make images, which builds them)", strings.Join(missing, ", "))
	}
	if static, err := isStatic(s.opm); err != nil || static {
		return err
	}
	if s.opm != filepath.Join(s.root, "bin", "tools", "opm-"+s.opmVersion) {
		return fmt.Errorf("%s is not statically linked (see hack/build-olm-tools.sh)", s.opm)
	}
	say("%s is not statically linked: rebuilding it", s.opm)
	if err := os.Remove(s.opm); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.root, "hack", "build-olm-tools.sh"), "opm")
	cmd.Env = append(os.Environ(), "OPM_VERSION="+s.opmVersion)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// isStatic: no program interpreter (ld.so), as `ldd` would say.
func isStatic(file string) (bool, error) {
	f, err := elf.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return !slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }), nil
}

// command runs name with args in dir; its output is shown only when it fails.
func command(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// deb fetches a Debian package once into work/debs/PKG/ (apt-get download, nothing installed)
// and returns the directory it is unpacked into.
func deb(ctx context.Context, work, pkg string) (string, error) {
	dir := filepath.Join(work, "debs", pkg)
	unpacked := filepath.Join(dir, "root")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	debFile := func() string {
		if m, _ := filepath.Glob(filepath.Join(dir, "*.deb")); len(m) == 1 {
			return m[0]
		}
		return ""
	}
	if _, err := os.Stat(unpacked); err != nil {
		if debFile() == "" {
			if command(ctx, "", nil, "apt-cache", "show", pkg) != nil {
				if err := command(ctx, "", nil, "apt-get", "update", "-qq"); err != nil {
					return "", err
				}
			}
			if err := command(ctx, dir, nil, "apt-get", "download", "-qq", pkg); err != nil || debFile() == "" {
				return "", fmt.Errorf("apt-get download %s failed: %v", pkg, err)
			}
		}
		_ = os.RemoveAll(unpacked + ".tmp")
		if err := command(ctx, "", nil, "dpkg-deb", "-x", debFile(), unpacked+".tmp"); err != nil {
			return "", err
		}
		if err := os.Rename(unpacked+".tmp", unpacked); err != nil {
			return "", err
		}
	}
	version, err := exec.CommandContext(ctx, "dpkg-deb", "-f", debFile(), "Version").Output()
	if err != nil {
		return "", fmt.Errorf("dpkg-deb -f %s: %w", debFile(), err)
	}
	say("debian %s %s", pkg, strings.TrimSpace(string(version)))
	return unpacked, nil
}

// goBuild builds the main package in dir as the Dockerfiles' builder stages do: static,
// trimmed, no VCS stamp, linux/amd64.
func goBuild(ctx context.Context, dir, out string) error {
	return command(ctx, dir, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"},
		"go", "build", "-buildvcs=false", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
}

// releaseBuild builds the release's manager in a temporary worktree of its commit with the
// same command, and copies its Dockerfile, bundle.Dockerfile and LICENSE, into
// work/release-vVERSION/.
func releaseBuild(ctx context.Context, root, work string, r release) error {
	since := time.Now()
	dir, wt := filepath.Join(work, "release-v"+r.version), filepath.Join(work, "worktree-v"+r.version)
	if command(ctx, root, nil, "git", "cat-file", "-e", r.commit+"^{commit}") != nil {
		return fmt.Errorf("release %s's commit %s is not in this clone (a shallow clone? git fetch --unshallow)", r.version, r.commit)
	}
	removeWorktree := func() {
		_ = command(context.Background(), root, nil, "git", "worktree", "remove", "--force", wt)
		_ = os.RemoveAll(wt)
		_ = command(context.Background(), root, nil, "git", "worktree", "prune")
	}
	removeWorktree()
	defer removeWorktree()
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := command(ctx, root, nil, "git", "worktree", "add", "--quiet", "--detach", wt, r.commit); err != nil {
		return err
	}
	if err := goBuild(ctx, wt, filepath.Join(dir, "manager")); err != nil {
		return err
	}
	for _, f := range []string{"Dockerfile", "bundle.Dockerfile", "LICENSE"} {
		data, err := os.ReadFile(filepath.Join(wt, f))
		if errors.Is(err, os.ErrNotExist) && f == "LICENSE" {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), data, 0o644)
		}
		if err != nil {
			return err
		}
	}
	say("built release %s's manager from %s in a temporary worktree (%ds)", r.version, r.commit[:12], int(time.Since(since).Seconds()))
	return nil
}

const passwdBase = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

// makeLayers writes every layer's tar into work/layers/ and returns the layers by name.
func makeLayers(ctx context.Context, s settings, work string, releases []release, debs map[string]string) (map[string]v1.Layer, error) {
	trees := map[string]tree{}
	var errs []error
	add := func(layer, p, src string) {
		if trees[layer] == nil {
			trees[layer] = tree{}
		}
		errs = append(errs, trees[layer].file(p, src))
	}
	newTree := func(layer string) tree { trees[layer] = tree{}; return trees[layer] }
	bin := filepath.Join(work, "bin")
	tools := filepath.Join(s.root, "bin", "tools")

	// base: what gcr.io/distroless/static:nonroot gives the manager: root, nobody and nonroot
	// (65532) users, CA certificates (Debian's, concatenated as update-ca-certificates does),
	// nsswitch.conf, /tmp 1777, /root 0700 and /home/nonroot 0700 owned by 65532.
	base := newTree("base")
	base.data("etc/passwd", passwdBase)
	base.data("etc/group", "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n")
	base.data("etc/nsswitch.conf", "hosts: files dns\n")
	certs, err := caCertificates(filepath.Join(debs["ca-certificates"], "usr", "share", "ca-certificates"))
	if err != nil {
		return nil, err
	}
	base.data("etc/ssl/certs/ca-certificates.crt", certs)
	base.dir("tmp", 0o1777)
	base.dir("root", 0o700)
	nonroot := base.dir("home/nonroot", 0o700)
	nonroot.uid, nonroot.gid = 65532, 65532

	// busybox: Debian's static busybox with every applet (sh, cp, tar, gzip, wget, id, ...) as
	// a symlink in /bin.
	busybox := filepath.Join(debs["busybox-static"], "bin", "busybox")
	add("busybox", "bin/busybox", busybox)
	applets, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list: %w", err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			trees["busybox"].symlink("bin/"+a, "busybox")
		}
	}

	// manager and mirror-registry: their Dockerfiles' COPY LICENSE /licenses/LICENSE and COPY
	// --from=builder /workspace/<binary> .; the releases' managers as each release's
	// Dockerfile copies it (with /licenses/LICENSE only where that Dockerfile has the COPY).
	for _, b := range []string{"manager", "mirror-registry"} {
		add(b, "licenses/LICENSE", filepath.Join(s.root, "LICENSE"))
		add(b, b, filepath.Join(bin, b))
	}
	for _, r := range releases {
		dir := filepath.Join(work, "release-v"+r.version)
		df, err := parseDockerfile(filepath.Join(dir, "Dockerfile"))
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(df.final().Commands, func(c instructions.Command) bool {
			cp, ok := c.(*instructions.CopyCommand)
			return ok && cp.From == "" && slices.Equal(cp.SourcePaths, []string{"LICENSE"}) && cp.DestPath == "/licenses/LICENSE"
		}) {
			add("manager-v"+r.version, "licenses/LICENSE", filepath.Join(dir, "LICENSE"))
		}
		add("manager-v"+r.version, "manager", filepath.Join(dir, "manager"))
	}

	// bundles: bundle.Dockerfile's three COPYs, for the current version (bundle/), each release
	// (its frozen bundle) and v0.1.0 (reconstructed), all in hack/olm/bundles/.
	bundles := map[string]string{"bundle-current": "bundle", "bundle-first": "hack/olm/bundles/quartet.v0.1.0"}
	for _, r := range releases {
		bundles["bundle-v"+r.version] = "hack/olm/bundles/quartet.v" + r.version
	}
	for layer, dir := range bundles {
		t := newTree(layer)
		for _, sub := range []string{"manifests", "metadata", "tests/scorecard"} {
			errs = append(errs, t.copyDir(sub, filepath.Join(s.root, dir, sub), false))
		}
	}

	// opm: /bin/opm (static) and /bin/grpc_health_probe, as operator-registry's opm image;
	// catalog.Dockerfile's ADD catalog /configs; an empty /configs for the empty index.
	add("opm", "bin/opm", s.opm)
	add("opm", "bin/grpc_health_probe", s.grpcHealthProbe)
	errs = append(errs, newTree("catalog-configs").copyDir("configs", filepath.Join(s.root, "catalog"), false))
	newTree("empty-configs").dir("configs", 0o755)
	// olm: OLM's Dockerfile: its five binaries in /bin (and /bin/cp from the busybox layer).
	for _, b := range olmBins {
		add("olm", "bin/"+b, filepath.Join(tools, b+"-"+s.olmVersion))
	}
	// registry: the distribution registry and the distribution module's example configuration.
	goList := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/distribution/distribution/v3")
	goList.Dir = filepath.Join(s.root, "hack", "tools", "registry")
	modDir, err := goList.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m github.com/distribution/distribution/v3: %w", err)
	}
	add("registry", "bin/registry", s.registry)
	add("registry", "etc/distribution/config.yml", filepath.Join(strings.TrimSpace(string(modDir)), "cmd", "registry", "config-example.yml"))
	trees["registry"].dir("var/lib/registry", 0o755)
	add("pause", "pause", filepath.Join(bin, "pause"))
	// scorecard-test and scorecard-untar: their Dockerfiles append a user line to /etc/passwd
	// and create WORKDIR ${HOME}.
	for _, sc := range []string{"scorecard-test", "scorecard-untar"} {
		t := newTree(sc)
		t.data("etc/passwd", passwdBase+sc+":x:1001:0:"+sc+" user:/opt/"+sc+":/sbin/nologin\n")
		t.dir("opt/"+sc, 0o755)
	}
	add("scorecard-test", "usr/local/bin/scorecard-test", s.scorecardTest)
	// e2e: fakerates and httpget (busybox's static wget crashes) next to busybox.
	add("e2e", "bin/fakerates", filepath.Join(bin, "fakerates"))
	add("e2e", "bin/httpget", filepath.Join(bin, "httpget"))
	// coredns: the real node's cluster DNS (hack/build-node-tools.sh), as upstream's FROM scratch.
	add("coredns", "coredns", s.core)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	dir := filepath.Join(work, "layers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, n := range slices.Sorted(maps.Keys(trees)) {
		var last []string
		if n == "base" {
			last = []string{"home/nonroot"}
		}
		if err := trees[n].write(filepath.Join(dir, n+".tar"), last...); err != nil {
			return nil, err
		}
	}
	if err := catalogCache(ctx, s.opm, work, trees["catalog-configs"]); err != nil {
		return nil, err
	}
	layers := map[string]v1.Layer{}
	for _, n := range append(slices.Collect(maps.Keys(trees)), "catalog-cache") {
		l, err := tarball.LayerFromFile(filepath.Join(dir, n+".tar"), tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		layers[n] = l
	}
	return layers, nil
}

// caCertificates concatenates the package's certificates, sorted by path, as
// update-ca-certificates does (each ending with a newline).
func caCertificates(dir string) (string, error) {
	var crts []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".crt") {
			crts = append(crts, p)
		}
		return err
	})
	slices.Sort(crts)
	var b strings.Builder
	for _, c := range crts {
		data, err := os.ReadFile(c)
		if err != nil {
			return "", err
		}
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.String(), err
}

// catalogCache makes the layer of catalog.Dockerfile's builder stage: the serve cache of
// opm serve --cache-only (the same static opm) under /tmp/cache. opm's pogreb cache is not
// reproducible (pogreb draws a random hash seed for each new database), so a cache made from
// the same opm and the same /configs is kept and reused.
func catalogCache(ctx context.Context, opm, work string, configs tree) error {
	layers := filepath.Join(work, "layers")
	h := sha256.New()
	for _, f := range []string{opm, filepath.Join(layers, "catalog-configs.tar")} {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		h.Write(data)
	}
	key := hex.EncodeToString(h.Sum(nil)) + "\n"
	keyFile := filepath.Join(work, "catalog-cache.key")
	if old, err := os.ReadFile(keyFile); err == nil && string(old) == key {
		if _, err := os.Stat(filepath.Join(layers, "catalog-cache.tar")); err == nil {
			say("catalog serve cache: opm and /configs unchanged, reusing the previous one")
			return nil
		}
	}
	// opm's cache digest covers the modes: opm reads /configs as the layer has it.
	stage := filepath.Join(work, "stage")
	_ = os.RemoveAll(stage)
	defer os.RemoveAll(stage)
	if err := configs.materialize(stage); err != nil {
		return err
	}
	configsDir := filepath.Join(stage, "configs")
	// On the host, opm serve would create /dev/termination-log and listen on localhost:6060
	// (pprof) by default: both are turned away.
	cache := filepath.Join(stage, "cache")
	if err := command(ctx, "", nil, opm, "serve", configsDir, "--cache-dir="+cache, "--cache-only",
		"--termination-log="+filepath.Join(work, "opm-termination.log"), "--pprof-addr="); err != nil {
		return err
	}
	t := tree{}
	t.dir("tmp", 0o1777)
	if err := t.copyDir("tmp/cache", cache, true); err != nil {
		return err
	}
	if err := t.write(filepath.Join(layers, "catalog-cache.tar")); err != nil {
		return err
	}
	return os.WriteFile(keyFile, []byte(key), 0o644)
}

// cfg is what `crane mutate` set before: labels added, env set by key, entrypoint (which
// resets cmd), cmd, user, workdir, exposed ports; every image is linux/amd64.
type cfg struct {
	entrypoint, cmd, env, ports []string
	user, workdir               string
	labels                      map[string]string
}

func (c cfg) apply(img v1.Image) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range c.labels {
		cf.Config.Labels[k] = v
	}
	for _, e := range c.env {
		k, _, _ := strings.Cut(e, "=")
		if i := slices.IndexFunc(cf.Config.Env, func(o string) bool { return strings.HasPrefix(o, k+"=") }); i >= 0 {
			cf.Config.Env[i] = e
		} else {
			cf.Config.Env = append(cf.Config.Env, e)
		}
	}
	if len(c.entrypoint) > 0 {
		cf.Config.Entrypoint, cf.Config.Cmd = c.entrypoint, nil
	}
	if len(c.cmd) > 0 {
		cf.Config.Cmd = c.cmd
	}
	if c.user != "" {
		cf.Config.User = c.user
	}
	if c.workdir != "" {
		cf.Config.WorkingDir = c.workdir
	}
	if len(c.ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range c.ports {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cf)
}

// assemble makes every image from its layers, by published name.
func assemble(s settings, work string, releases []release, layers map[string]v1.Layer) (map[string]v1.Image, error) {
	images := map[string]v1.Image{}
	var errs []error
	// scratch: an OCI image FROM scratch with the named layers.
	scratch := func(ref string, c cfg, names ...string) v1.Image {
		base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err := mutate.AppendLayers(base, pick(layers, names)...)
		if err == nil {
			img, err = c.apply(img)
		}
		errs = append(errs, err)
		images[ref] = img
		return img
	}
	labels := func(dockerfile string) map[string]string {
		df, err := parseDockerfile(dockerfile)
		errs = append(errs, err)
		if err != nil {
			return nil
		}
		return df.config(df.final(), nil).Labels
	}
	fromOPM := func(ref string, c cfg, names ...string) {
		img, err := mutate.AppendLayers(images[s.images["OPM_IMG"]], pick(layers, names)...)
		if err == nil {
			img, err = c.apply(img)
		}
		errs = append(errs, err)
		images[ref] = img
	}
	im := s.images
	// Upstream's opm image has a shell (distroless:debug's busybox): `operator-sdk run bundle`
	// starts its catalog pod with `sh -c` in it.
	scratch(im["OPM_IMG"], cfg{entrypoint: []string{"/bin/opm"}, user: "1001", env: []string{pathEnv}}, "base", "busybox", "opm")
	fromOPM(im["CATALOG_IMG"], cfg{entrypoint: []string{"/bin/opm"}, cmd: []string{"serve", "/configs", "--cache-dir=/tmp/cache"},
		labels: labels(filepath.Join(s.root, "catalog.Dockerfile"))}, "catalog-configs", "catalog-cache")
	fromOPM(im["EMPTY_INDEX_IMG"], cfg{entrypoint: []string{"/bin/opm"}, cmd: []string{"serve", "/configs"},
		labels: map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"}}, "empty-configs")
	manager := cfg{entrypoint: []string{"/manager"}, user: "65532:65532", workdir: "/", env: []string{pathEnv, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}}
	scratch(im["IMG"], manager, "base", "manager")
	scratch(im["MIRROR_REGISTRY_IMG"], cfg{entrypoint: []string{"/mirror-registry"}, user: "65532:65532", workdir: "/",
		env: manager.env, ports: []string{"5000/tcp"}}, "base", "mirror-registry")
	scratch(im["BUNDLE_IMG"], cfg{labels: labels(filepath.Join(s.root, "bundle.Dockerfile"))}, "bundle-current")
	for _, r := range releases {
		rdir := filepath.Join(work, "release-v"+r.version)
		scratch(s.tagBase+":v"+r.version, manager, "base", "manager-v"+r.version)
		scratch(s.tagBase+"-bundle:v"+r.version, cfg{labels: labels(filepath.Join(rdir, "bundle.Dockerfile"))}, "bundle-v"+r.version)
	}
	// v0.1.0: the oldest release's operator image, and the reconstructed bundle with its labels.
	images[s.tagBase+":v0.1.0"] = images[s.tagBase+":v"+releases[0].version]
	scratch(s.tagBase+"-bundle:v0.1.0", cfg{labels: labels(filepath.Join(work, "release-v"+releases[0].version, "bundle.Dockerfile"))}, "bundle-first")
	scratch(im["OLM_IMG"], cfg{entrypoint: []string{"/bin/olm"}, user: "1001", workdir: "/", ports: []string{"8080/tcp", "5443/tcp"},
		labels: map[string]string{"stage": "olm"}, env: []string{pathEnv}}, "base", "busybox", "olm")
	scratch(im["REGISTRY_IMG"], cfg{entrypoint: []string{"registry"}, cmd: []string{"serve", "/etc/distribution/config.yml"},
		ports: []string{"5000/tcp"}, env: []string{pathEnv}}, "base", "registry")
	scratch(im["PAUSE_IMG"], cfg{entrypoint: []string{"/pause"}, user: "65535:65535"}, "pause")
	for _, sc := range []struct {
		img, name string
		c         cfg
		layers    []string
	}{
		{"SCORECARD_TEST_IMG", "scorecard-test", cfg{entrypoint: []string{"/usr/local/bin/scorecard-test"}}, []string{"base", "scorecard-test"}},
		{"SCORECARD_UNTAR_IMG", "scorecard-untar", cfg{cmd: []string{"sh"}}, []string{"base", "busybox", "scorecard-untar"}},
	} {
		sc.c.user, sc.c.workdir = "1001", "/opt/"+sc.name
		sc.c.env = []string{pathEnv, "HOME=/opt/" + sc.name, "USER_NAME=" + sc.name, "USER_UID=1001"}
		scratch(im[sc.img], sc.c, sc.layers...)
	}
	scratch(im["E2E_IMG"], cfg{cmd: []string{"sh"}, user: "65532:65532", workdir: "/", env: []string{pathEnv}}, "base", "busybox", "e2e")
	scratch(im["COREDNS_IMG"], cfg{entrypoint: []string{"/coredns"}, user: "65532:65532", ports: []string{"53/udp", "53/tcp"}}, "coredns")
	scratch(im["UBI_IMG"], cfg{cmd: []string{"sh"}, env: []string{pathEnv}}, "base", "busybox")
	return images, errors.Join(errs...)
}

func pick(layers map[string]v1.Layer, names []string) []v1.Layer {
	out := make([]v1.Layer, len(names))
	for i, n := range names {
		out[i] = layers[n]
	}
	return out
}

// push pushes img under its published name minus the host.
func push(ctx context.Context, reg, published string, img v1.Image) error {
	_, rest, _ := strings.Cut(published, "/")
	ref, err := name.ParseReference(reg+"/"+rest, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s: %w", published, err)
	}
	return nil
}

// writeList writes images.txt (sorted) after comparing the digests with the previous list;
// with IMAGES_CHECK set, a changed digest fails.
func writeList(out string, list []string) error {
	file := filepath.Join(out, "images.txt")
	slices.Sort(list)
	prev, err := os.ReadFile(file)
	hadPrev := err == nil
	old := map[string]string{}
	for line := range strings.Lines(string(prev)) {
		if f := strings.Fields(line); len(f) == 2 {
			old[f[0]] = f[1]
		}
	}
	changed := 0
	for _, line := range list {
		ref, dig, _ := strings.Cut(line, " ")
		if hadPrev && old[ref] != dig {
			changed++
			say("CHANGED %s %s -> %s", ref, cmp.Or(old[ref], "(new)"), dig)
		}
	}
	if hadPrev && changed == 0 {
		say("all %d digests equal the previous run's (%s)", len(list), file)
	}
	text := strings.Join(list, "\n") + "\n"
	if err := os.WriteFile(file+".new", []byte(text), 0o644); err != nil {
		return err
	}
	if err := os.Rename(file+".new", file); err != nil {
		return err
	}
	say("wrote %s", file)
	fmt.Print(text)
	if os.Getenv("IMAGES_CHECK") != "" {
		if !hadPrev {
			return fmt.Errorf("IMAGES_CHECK: no previous %s to compare with", file)
		}
		if changed != 0 {
			return fmt.Errorf("%d digests differ from the previous build: not reproducible, or its inputs changed", changed)
		}
	}
	return nil
}

var listening = regexp.MustCompile(`listening on (127\.0\.0\.1:[0-9]+)`)

// startRegistry serves store (read-only if asked) on a free loopback port with the
// distribution registry at bin, its config and log in dir; it returns host:port and a stop
// function (safe to call twice).
func startRegistry(bin, store, dir string, readOnly bool) (string, func(), error) {
	cfgFile, logFile := filepath.Join(dir, "registry.yml"), filepath.Join(dir, "registry.log")
	config := fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  maintenance:
    uploadpurging:
      enabled: false
    readonly:
      enabled: %t
http:
  addr: 127.0.0.1:0
`, store, readOnly)
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		return "", nil, err
	}
	log, err := os.Create(logFile)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "serve", cfgFile)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited }
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		data, _ := os.ReadFile(logFile)
		if m := listening.FindSubmatch(data); m != nil {
			return string(m[1]), stop, nil
		}
		select {
		case <-exited:
			deadline = time.Time{}
		default:
		}
	}
	stop()
	data, _ := os.ReadFile(logFile)
	return "", nil, fmt.Errorf("the registry did not start:\n%s", data)
}

// dockerfile is a Dockerfile parsed with BuildKit's own parser.
type dockerfile struct {
	name   string
	stages []instructions.Stage
}

func parseDockerfile(file string) (*dockerfile, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	stages, _, err := instructions.Parse(res.AST, linter.New(&linter.Config{}))
	if err == nil && len(stages) == 0 {
		err = errors.New("no stages")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &dockerfile{name: filepath.Base(file), stages: stages}, nil
}

func (d *dockerfile) final() *instructions.Stage { return &d.stages[len(d.stages)-1] }

// config is the image config a stage defines on top of base (nil: FROM scratch, or a base
// whose fields the stage does not set are then not known).
func (d *dockerfile) config(s *instructions.Stage, base *v1.Config) v1.Config {
	var c v1.Config
	if base != nil {
		c = *base.DeepCopy()
	}
	for _, cmd := range s.Commands {
		switch x := cmd.(type) {
		case *instructions.EntrypointCommand:
			c.Entrypoint, c.Cmd = x.CmdLine, nil
		case *instructions.CmdCommand:
			c.Cmd = x.CmdLine
		case *instructions.UserCommand:
			c.User = x.User
		case *instructions.WorkdirCommand:
			c.WorkingDir = workdir(c.WorkingDir, x.Path)
		case *instructions.LabelCommand:
			if c.Labels == nil {
				c.Labels = map[string]string{}
			}
			for _, kv := range x.Labels {
				c.Labels[kv.Key] = kv.Value
			}
		case *instructions.ExposeCommand:
			if c.ExposedPorts == nil {
				c.ExposedPorts = map[string]struct{}{}
			}
			for _, p := range x.Ports {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				c.ExposedPorts[p] = struct{}{}
			}
		}
	}
	return c
}

func workdir(cur, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join("/", cur, p)
	}
	return filepath.Clean(p)
}
