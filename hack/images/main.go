// Command images (make images; docs/REAL-NODE.md, Images) builds every container image the
// real-node cluster pulls, offline and reproducibly, and pushes each under its published name
// minus the host into the CNCF distribution registry store bin/images/registry, which the
// node's registry serves (containerd's hosts.toml sends quay.io, docker.io, ... to it).
// Inputs: binaries built from the Go module proxy (this repository's, bin/tools/,
// bin/registry/), Debian's busybox-static and ca-certificates (apt-get download into
// bin/images/work/debs/, nothing installed), and bundle/, catalog/, hack/olm/bundles/. No
// container engine: layers are written with archive/tar (layer.go) and go-containerregistry
// puts them on an empty image. A release of hack/olm/releases gets its operator image built
// from its commit (a temporary git worktree; a shallow clone fails: git fetch --unshallow) and
// its bundle image with the labels of that commit's bundle.Dockerfile; v0.1.0 (reconstructed) is
// the oldest release's operator image under another tag.
//
// bin/images/images.txt lists "published-name digest"; a rebuild says which digests changed,
// and IMAGES_CHECK=1 (make images-check) fails when any did. It runs from the repository's
// root with the Makefile's tool paths and image names (the defaults match them).
// QUARTET_IMAGES_DIR puts the store, the list and the work files elsewhere than bin/images (a
// build that must not replace the store a running real node pulls from); copy work/debs/ there
// to not fetch the Debian packages again.
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
	"io/fs"
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

	"github.com/quartet-operator/quartet/hack/olm/release"
)

var start = time.Now()

func say(format string, args ...any) {
	fmt.Printf("images: [%ds] %s\n", int(time.Since(start).Seconds()), fmt.Sprintf(format, args...))
}

func env(key, def string) string { return cmp.Or(os.Getenv(key), def) }

const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// settings are the tool paths and image names, from the environment (the Makefile's).
type settings struct {
	root, out, olmVersion                               string
	opm, grpcHealthProbe, scorecardTest, registry, core string
	tagBase                                             string
	images                                              map[string]string // role -> published name
}

func readSettings(root string) settings {
	tools := filepath.Join(root, "bin", "tools")
	opmVersion, sdk, coredns := env("OPM_VERSION", "v1.74.0"), env("OPERATOR_SDK_VERSION", "v1.42.2"), env("COREDNS_VERSION", "v1.12.4")
	s := settings{
		root: root, out: env("QUARTET_IMAGES_DIR", filepath.Join(root, "bin", "images")), olmVersion: env("OLM_VERSION", "v0.46.0"),
		opm:             env("OPM", filepath.Join(tools, "opm-"+opmVersion)),
		grpcHealthProbe: env("GRPC_HEALTH_PROBE", filepath.Join(tools, "grpc_health_probe-v0.4.40")),
		scorecardTest:   env("SCORECARD_TEST", filepath.Join(tools, "scorecard-test-"+sdk)),
		registry:        env("REGISTRY", filepath.Join(root, "bin", "registry", "v3.0.0", "registry")),
		core:            env("COREDNS", filepath.Join(tools, "coredns-"+coredns)),
		tagBase:         env("IMAGE_TAG_BASE", "quay.io/quartet-operator/quartet"),
	}
	s.images = map[string]string{
		"IMG":                 env("IMG", s.tagBase+":v0.3.0"),
		"BUNDLE_IMG":          env("BUNDLE_IMG", s.tagBase+"-bundle:v0.3.0"),
		"CATALOG_IMG":         env("CATALOG_IMG", s.tagBase+"-catalog:v0.3.0"),
		"OPM_IMG":             env("OPM_IMG", "quay.io/operator-framework/opm:"+opmVersion),
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
		"EMPTY_INDEX_IMG": env("EMPTY_INDEX_IMG", "quay.io/quartet-operator/empty-index:"+opmVersion),
	}
	return s
}

// olmBins are OLM's binaries, bin/tools/<name>-$OLM_VERSION.
var olmBins = []string{"olm", "catalog", "package-server", "copy-content", "cpb"}

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

func run(ctx context.Context, s settings) error {
	releases, err := release.Read(s.root)
	if err != nil {
		return err
	}
	work := filepath.Join(s.out, "work")
	if err := os.MkdirAll(filepath.Join(work, "layers"), 0o755); err != nil {
		return err
	}
	// One build at a time (make cluster-up NODE=real runs make images too).
	lock, err := os.OpenFile(filepath.Join(s.out, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		say("waiting for another make images to finish (at most %s)", lockWait)
		if err := waitLock(ctx, lock, lockWait); err != nil {
			return err
		}
	}
	if err := checkTools(s); err != nil {
		return err
	}
	debs := map[string]string{}
	for _, pkg := range []string{"busybox-static", "ca-certificates"} {
		if debs[pkg], err = deb(ctx, work, pkg); err != nil {
			return err
		}
	}
	say("building manager, mirror-registry, pause, fakerates, httpget")
	for _, b := range [][2]string{{".", "manager"}, {"cmd/mirror-registry", "mirror-registry"}, // a module of its own
		{"hack/images/pause", "pause"}, {"hack/fakerates", "fakerates"}, {"test/httpget", "httpget"}} {
		if err := goBuild(ctx, filepath.Join(s.root, b[0]), filepath.Join(work, "bin", b[1])); err != nil {
			return err
		}
	}
	for _, r := range releases {
		if err := releaseBuild(ctx, s.root, work, r); err != nil {
			return err
		}
	}
	images, err := build(ctx, s, work, releases, debs)
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
		_, rest, _ := strings.Cut(ref, "/") // the published name minus the host
		tag, err := name.ParseReference(reg+"/"+rest, name.Insecure)
		if err == nil {
			err = remote.Write(tag, images[ref], remote.WithContext(ctx))
		}
		var d v1.Hash
		if err == nil {
			d, err = images[ref].Digest()
		}
		if err != nil {

			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		say("pushed %s", ref)
		list = append(list, ref+" "+d.String())
	}
	stopRegistry()
	return writeList(s.out, list)
}

// lockWait bounds the wait for another make images: a build that holds the lock longer is
// stuck, and this one fails saying so instead of waiting with it.
const lockWait = 30 * time.Minute

// waitLock takes the exclusive lock on f, trying every second until timeout.
func waitLock(ctx context.Context, f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("another make images has held %s for over %s", f.Name(), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// checkTools fails when a tool is missing, or when opm is not static (the opm image is FROM
// scratch; an older bin/tools/opm-* may predate hack/build-olm-tools.sh's static build).
func checkTools(s settings) error {
	tools := []string{s.grpcHealthProbe, s.opm, s.scorecardTest, s.registry, s.core}
	for _, b := range olmBins {
		tools = append(tools, filepath.Join(s.root, "bin", "tools", b+"-"+s.olmVersion))
	}
	missing := slices.DeleteFunc(tools, func(f string) bool { fi, err := os.Stat(f); return err == nil && fi.Mode()&0o111 != 0 })
	if len(missing) > 0 {
		return fmt.Errorf("missing %s (run make images, which builds them)", strings.Join(missing, ", "))
	}
	f, err := elf.Open(s.opm)
	if err != nil {
		return err
	}
	defer f.Close()
	if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		return fmt.Errorf("%s is not statically linked: remove it, make images builds it again (hack/build-olm-tools.sh)", s.opm)
	}
	return nil
}

// command runs name with args in dir and returns its output, trimmed; its error output is
// shown only when it fails.
func command(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env, cmd.Stderr = dir, append(os.Environ(), env...), &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// deb fetches a Debian package once into work/debs/PKG/ (apt-get download, nothing installed)
// and returns the directory it is unpacked into.
func deb(ctx context.Context, work, pkg string) (string, error) {
	dir := filepath.Join(work, "debs", pkg)
	debFile, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if len(debFile) != 1 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		// apt is bounded: a stalled mirror fails the build, naming apt.
		actx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if _, err := command(actx, "", nil, "apt-cache", "show", pkg); err != nil {
			if _, err := command(actx, "", nil, "apt-get", "update", "-qq"); err != nil {
				return "", err
			}
		}
		if _, err := command(actx, dir, nil, "apt-get", "download", "-qq", pkg); err != nil {
			return "", err
		}
		if debFile, _ = filepath.Glob(filepath.Join(dir, "*.deb")); len(debFile) != 1 {
			return "", fmt.Errorf("apt-get download %s: %d .deb files in %s", pkg, len(debFile), dir)
		}
	}
	unpacked := filepath.Join(dir, "root")
	_ = os.RemoveAll(unpacked)
	if _, err := command(ctx, "", nil, "dpkg-deb", "-x", debFile[0], unpacked); err != nil {
		return "", err
	}
	version, err := command(ctx, "", nil, "dpkg-deb", "-f", debFile[0], "Version")
	say("debian %s %s", pkg, version)
	return unpacked, err
}

// goBuild builds the main package in dir as the Dockerfiles' builder stages do: static,
// trimmed, no VCS stamp, linux/amd64.
func goBuild(ctx context.Context, dir, out string) error {
	_, err := command(ctx, dir, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"},
		"go", "build", "-buildvcs=false", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	return err
}

// releaseBuild builds the release's manager in a temporary worktree of its commit with the
// same command, and copies it, its Dockerfile, bundle.Dockerfile and LICENSE into
// work/release-vVERSION/.
func releaseBuild(ctx context.Context, root, work string, r release.Release) error {
	since := time.Now()
	dir, wt := filepath.Join(work, "release-v"+r.Version), filepath.Join(work, "worktree-v"+r.Version)
	if _, err := command(ctx, root, nil, "git", "cat-file", "-e", r.Commit+"^{commit}"); err != nil {
		return fmt.Errorf("release %s's commit %s is not in this clone (a shallow clone? git fetch --unshallow)", r.Version, r.Commit)
	}
	removeWorktree := func() {
		_, _ = command(context.Background(), root, nil, "git", "worktree", "remove", "--force", wt)
		_ = os.RemoveAll(wt)
		_, _ = command(context.Background(), root, nil, "git", "worktree", "prune")
	}
	removeWorktree()
	defer removeWorktree()
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := command(ctx, root, nil, "git", "worktree", "add", "--quiet", "--detach", wt, r.Commit); err != nil {
		return err
	}
	if err := goBuild(ctx, wt, filepath.Join(dir, "manager")); err != nil {
		return err
	}
	for _, f := range []string{"Dockerfile", "bundle.Dockerfile", "LICENSE"} {
		data, err := os.ReadFile(filepath.Join(wt, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), data, 0o644)
		}
		if err != nil && (f != "LICENSE" || !errors.Is(err, fs.ErrNotExist)) {
			return err
		}
	}
	say("built release %s's manager from %s in a temporary worktree (%ds)", r.Version, r.Commit[:12], int(time.Since(since).Seconds()))
	return nil
}

const passwdBase = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

// build makes every image, by published name: OCI images FROM scratch (or the opm image) with
// the layers of the given trees and local files, linux/amd64.
func build(ctx context.Context, s settings, work string, releases []release.Release, debs map[string]string) (map[string]v1.Image, error) {
	bin, license, im, tb := filepath.Join(work, "bin"), filepath.Join(s.root, "LICENSE"), s.images, s.tagBase
	busyboxBin := filepath.Join(debs["busybox-static"], "bin", "busybox")
	applets, err := command(ctx, "", nil, busyboxBin, "--list")
	if err != nil {
		return nil, err
	}
	distribution, err := command(ctx, filepath.Join(s.root, "hack", "tools", "registry"), nil,
		"go", "list", "-m", "-f", "{{.Dir}}", "github.com/distribution/distribution/v3")
	if err != nil {
		return nil, err
	}
	certs, err := caCertificates(filepath.Join(debs["ca-certificates"], "usr", "share", "ca-certificates"))
	if err != nil {
		return nil, err
	}

	images := map[string]v1.Image{}
	var errs []error
	// layer is t (nil: empty) with the local files (image path -> local path) added.
	layer := func(t tree, files map[string]string) v1.Layer {
		if t == nil {
			t = tree{}
		}
		for p, src := range files {
			errs = append(errs, t.file(p, src))
		}
		l, err := t.layer()
		errs = append(errs, err)
		return l
	}
	scratch := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	add := func(ref string, from v1.Image, c v1.Config, layers ...v1.Layer) v1.Image {
		img, err := mutate.AppendLayers(from, layers...)
		var cf *v1.ConfigFile
		if err == nil {
			cf, err = img.ConfigFile()
		}
		if err == nil {
			cf = cf.DeepCopy()
			cf.OS, cf.Architecture, cf.Config = "linux", "amd64", c
			img, err = mutate.ConfigFile(img, cf)
		}
		errs = append(errs, err)
		images[ref] = img
		return img
	}
	// bundle is bundle.Dockerfile's three COPYs of dir (bundle/, or a frozen one in
	// hack/olm/bundles/) and its labels (the current one's, or a release's from its commit).
	bundle := func(ref, dir, dockerfile string) {
		t := tree{}
		for _, sub := range []string{"manifests", "metadata", "tests/scorecard"} {
			errs = append(errs, t.copyDir(sub, filepath.Join(s.root, dir, sub), false))
		}
		df, err := parseDockerfile(dockerfile)
		if errs = append(errs, err); err == nil {
			add(ref, scratch, v1.Config{Labels: stageConfig(df.final(), nil).Labels}, layer(t, nil))
		}
	}

	// base: what gcr.io/distroless/static:nonroot gives the manager: root, nobody and nonroot
	// (65532) users, CA certificates (Debian's, concatenated as update-ca-certificates does),
	// nsswitch.conf, /tmp 1777, /root 0700 and /home/nonroot 0700 owned by 65532.
	t := tree{}
	t.data("etc/passwd", passwdBase)
	t.data("etc/group", "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n")
	t.data("etc/nsswitch.conf", "hosts: files dns\n")
	t.data("etc/ssl/certs/ca-certificates.crt", certs)
	t.dir("tmp", 0o1777)
	t.dir("root", 0o700)
	nonroot := t.dir("home/nonroot", 0o700)
	nonroot.Uid, nonroot.Gid = 65532, 65532
	base := layer(t, nil)
	// Debian's static busybox, every applet (sh, cp, tar, gzip, wget, id, ...) a symlink to it.
	t = tree{}
	for _, a := range strings.Fields(applets) {
		if a != "busybox" {
			t.symlink("bin/"+a, "busybox")
		}
	}
	busybox := layer(t, map[string]string{"bin/busybox": busyboxBin})

	// Upstream's opm image (static opm, grpc_health_probe) has a shell (distroless:debug's
	// busybox): `operator-sdk run bundle` starts its catalog pod with `sh -c` in it.
	opm := v1.Config{Entrypoint: []string{"/bin/opm"}, User: "1001", Env: []string{pathEnv}}
	opmImg := add(im["OPM_IMG"], scratch, opm, base, busybox, layer(nil, map[string]string{"bin/opm": s.opm, "bin/grpc_health_probe": s.grpcHealthProbe}))
	// catalog.Dockerfile: ADD catalog /configs and the builder stage's serve cache.
	configs := tree{}
	errs = append(errs, configs.copyDir("configs", filepath.Join(s.root, "catalog"), false))
	cache, err := catalogCache(ctx, s, work, configs)
	errs = append(errs, err)
	catalog := opm
	df, err := parseDockerfile(filepath.Join(s.root, "catalog.Dockerfile"))
	if errs = append(errs, err); err == nil {
		catalog.Cmd, catalog.Labels = []string{"serve", "/configs", "--cache-dir=/tmp/cache"}, stageConfig(df.final(), nil).Labels
		add(im["CATALOG_IMG"], opmImg, catalog, layer(configs, nil), cache)
	}
	emptyIndex := opm
	emptyIndex.Cmd, emptyIndex.Labels = []string{"serve", "/configs"}, map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"}
	t = tree{}

	t.dir("configs", 0o755)
	add(im["EMPTY_INDEX_IMG"], opmImg, emptyIndex, layer(t, nil))

	// The Dockerfiles' COPY LICENSE /licenses/LICENSE and COPY --from=builder /workspace/<binary> .
	manager := v1.Config{Entrypoint: []string{"/manager"}, User: "65532:65532", WorkingDir: "/", Env: []string{pathEnv, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}}
	add(im["IMG"], scratch, manager, base, layer(nil, map[string]string{"licenses/LICENSE": license, "manager": filepath.Join(bin, "manager")}))
	mirror := manager
	mirror.Entrypoint, mirror.ExposedPorts = []string{"/mirror-registry"}, map[string]struct{}{"5000/tcp": {}}
	add(im["MIRROR_REGISTRY_IMG"], scratch, mirror, base, layer(nil, map[string]string{"licenses/LICENSE": license, "mirror-registry": filepath.Join(bin, "mirror-registry")}))
	bundle(im["BUNDLE_IMG"], "bundle", filepath.Join(s.root, "bundle.Dockerfile"))
	// A release's manager as its Dockerfile copies it (/licenses/LICENSE only if it has the COPY).
	for _, r := range releases {
		dir := filepath.Join(work, "release-v"+r.Version)
		df, err := parseDockerfile(filepath.Join(dir, "Dockerfile"))
		if errs = append(errs, err); err != nil {
			continue
		}
		files := map[string]string{"manager": filepath.Join(dir, "manager")}
		if slices.ContainsFunc(df.final().Commands, func(c instructions.Command) bool {
			cp, ok := c.(*instructions.CopyCommand)
			return ok && cp.From == "" && slices.Equal(cp.SourcePaths, []string{"LICENSE"}) && cp.DestPath == "/licenses/LICENSE"
		}) {
			files["licenses/LICENSE"] = filepath.Join(dir, "LICENSE")
		}
		add(tb+":v"+r.Version, scratch, manager, base, layer(nil, files))
		bundle(tb+"-bundle:v"+r.Version, "hack/olm/bundles/quartet.v"+r.Version, filepath.Join(dir, "bundle.Dockerfile"))
	}
	// v0.1.0: the oldest release's operator image, and the reconstructed bundle with its labels.
	images[tb+":v0.1.0"] = images[tb+":v"+releases[0].Version]
	bundle(tb+"-bundle:v0.1.0", "hack/olm/bundles/quartet.v0.1.0", filepath.Join(work, "release-v"+releases[0].Version, "bundle.Dockerfile"))

	// OLM's Dockerfile: its five binaries in /bin (and /bin/cp from busybox).
	files := map[string]string{}
	for _, b := range olmBins {
		files["bin/"+b] = filepath.Join(s.root, "bin", "tools", b+"-"+s.olmVersion)
	}
	add(im["OLM_IMG"], scratch, v1.Config{Entrypoint: []string{"/bin/olm"}, User: "1001", WorkingDir: "/", ExposedPorts: map[string]struct{}{"8080/tcp": {}, "5443/tcp": {}},
		Labels: map[string]string{"stage": "olm"}, Env: []string{pathEnv}}, base, busybox, layer(nil, files))
	// The distribution registry and the distribution module's example configuration.
	t = tree{}
	t.dir("var/lib/registry", 0o755)
	add(im["REGISTRY_IMG"], scratch, v1.Config{Entrypoint: []string{"registry"}, Cmd: []string{"serve", "/etc/distribution/config.yml"},
		ExposedPorts: map[string]struct{}{"5000/tcp": {}}, Env: []string{pathEnv}}, base,
		layer(t, map[string]string{"bin/registry": s.registry, "etc/distribution/config.yml": filepath.Join(distribution, "cmd", "registry", "config-example.yml")}))
	add(im["PAUSE_IMG"], scratch, v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}, layer(nil, map[string]string{"pause": filepath.Join(bin, "pause")}))
	// scorecard-test and scorecard-untar: their Dockerfiles append a user line to /etc/passwd
	// and create WORKDIR ${HOME}.
	scorecard := func(sc string, c v1.Config, files map[string]string) (v1.Config, v1.Layer) {
		t := tree{}
		t.data("etc/passwd", passwdBase+sc+":x:1001:0:"+sc+" user:/opt/"+sc+":/sbin/nologin\n")
		t.dir("opt/"+sc, 0o755)
		c.User, c.WorkingDir, c.Env = "1001", "/opt/"+sc, []string{pathEnv, "HOME=/opt/" + sc, "USER_NAME=" + sc, "USER_UID=1001"}
		return c, layer(t, files)
	}
	c, l := scorecard("scorecard-test", v1.Config{Entrypoint: []string{"/usr/local/bin/scorecard-test"}}, map[string]string{"usr/local/bin/scorecard-test": s.scorecardTest})
	add(im["SCORECARD_TEST_IMG"], scratch, c, base, l)
	c, l = scorecard("scorecard-untar", v1.Config{Cmd: []string{"sh"}}, nil)
	add(im["SCORECARD_UNTAR_IMG"], scratch, c, base, busybox, l)

	// e2e: fakerates and httpget (busybox's static wget crashes) next to busybox.
	add(im["E2E_IMG"], scratch, v1.Config{Cmd: []string{"sh"}, User: "65532:65532", WorkingDir: "/", Env: []string{pathEnv}}, base, busybox,
		layer(nil, map[string]string{"bin/fakerates": filepath.Join(bin, "fakerates"), "bin/httpget": filepath.Join(bin, "httpget")}))
	// coredns: the real node's cluster DNS (hack/build-node-tools.sh), as upstream's FROM scratch.
	add(im["COREDNS_IMG"], scratch, v1.Config{Entrypoint: []string{"/coredns"}, User: "65532:65532", ExposedPorts: map[string]struct{}{"53/udp": {}, "53/tcp": {}}},
		layer(nil, map[string]string{"coredns": s.core}))
	add(im["UBI_IMG"], scratch, v1.Config{Cmd: []string{"sh"}, Env: []string{pathEnv}}, base, busybox)
	return images, errors.Join(errs...)
}

// caCertificates concatenates the package's certificates, sorted by path, as
// update-ca-certificates does (each ending with a newline).
func caCertificates(dir string) (string, error) {
	var crts []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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

// catalogCache is the layer of catalog.Dockerfile's builder stage: the serve cache of opm serve
// --cache-only (the same static opm) under /tmp/cache. opm's pogreb cache is not reproducible
// (pogreb draws a random hash seed for each new database), so work/layers/catalog-cache.tar is
// reused while opm and /configs are the same.
func catalogCache(ctx context.Context, s settings, work string, configs tree) (v1.Layer, error) {
	file, keyFile := filepath.Join(work, "layers", "catalog-cache.tar"), filepath.Join(work, "catalog-cache.key")
	h := sha256.New()
	opm, err := os.ReadFile(s.opm)
	if err != nil {
		return nil, err
	}
	h.Write(opm)
	if err := configs.writeTar(h); err != nil {
		return nil, err
	}
	key := hex.EncodeToString(h.Sum(nil)) + "\n"
	_, statErr := os.Stat(file)
	if old, _ := os.ReadFile(keyFile); string(old) == key && statErr == nil {
		say("catalog serve cache: opm and /configs unchanged, reusing the previous one")
	} else if err := serveCache(ctx, s, work, file); err != nil {
		return nil, err
	} else if err := os.WriteFile(keyFile, []byte(key), 0o644); err != nil {
		return nil, err
	}
	return tarball.LayerFromFile(file, tarball.WithMediaType(types.OCILayer))
}

// serveCache writes the layer tar of opm's serve cache of catalog/.
func serveCache(ctx context.Context, s settings, work, file string) error {
	stage := filepath.Join(work, "stage")
	_ = os.RemoveAll(stage)
	defer os.RemoveAll(stage)
	// opm's cache digest covers the modes: /configs as the layer has it (0644, 0755 by umask).
	configs, cache := filepath.Join(stage, "configs"), filepath.Join(stage, "cache")
	if err := os.CopyFS(configs, os.DirFS(filepath.Join(s.root, "catalog"))); err != nil {
		return err
	}
	// On the host, opm serve would create /dev/termination-log and listen on localhost:6060
	// (pprof) by default: both are turned away.
	if _, err := command(ctx, "", nil, s.opm, "serve", configs, "--cache-dir="+cache, "--cache-only",
		"--termination-log="+filepath.Join(work, "opm-termination.log"), "--pprof-addr="); err != nil {
		return err
	}
	t := tree{}
	t.dir("tmp", 0o1777)
	if err := t.copyDir("tmp/cache", cache, true); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	return errors.Join(t.writeTar(f), f.Close())
}

// writeList writes images.txt (sorted) after comparing the digests with the previous list;
// with IMAGES_CHECK set, a changed digest fails.
func writeList(out string, list []string) error {
	file := filepath.Join(out, "images.txt")
	slices.Sort(list)
	prev, err := os.ReadFile(file)
	hadPrev, old, changed := err == nil, map[string]string{}, 0
	for line := range strings.Lines(string(prev)) {
		ref, dig, _ := strings.Cut(strings.TrimSpace(line), " ")
		old[ref] = dig
	}
	for _, line := range list {
		if ref, dig, _ := strings.Cut(line, " "); hadPrev && old[ref] != dig {
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
	switch {
	case os.Getenv("IMAGES_CHECK") == "":
	case !hadPrev:
		return fmt.Errorf("IMAGES_CHECK: no previous %s to compare with", file)
	case changed != 0:
		return fmt.Errorf("%d digests differ from the previous build: not reproducible, or its inputs changed", changed)
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
	log, err := os.Create(logFile)
	if err == nil {
		err = os.WriteFile(cfgFile, []byte(config), 0o644)
	}
	cmd := exec.Command(bin, "serve", cfgFile)
	cmd.Stdout, cmd.Stderr = log, log
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
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

// dockerfile is a Dockerfile's stages, parsed with BuildKit's own parser.
type dockerfile []instructions.Stage

func parseDockerfile(file string) (dockerfile, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	res, err := parser.Parse(bytes.NewReader(data))
	var stages []instructions.Stage
	if err == nil {
		stages, _, err = instructions.Parse(res.AST, linter.New(&linter.Config{}))
	}
	if err == nil && len(stages) == 0 {
		err = errors.New("no stages")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return stages, nil
}

func (d dockerfile) final() *instructions.Stage { return &d[len(d)-1] }

// stageConfig is the image config stage s defines on top of base (nil: FROM scratch, or a base
// whose fields the stage does not set are then not known).
func stageConfig(s *instructions.Stage, base *v1.Config) v1.Config {
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
