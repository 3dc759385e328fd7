// Package images tests the images that make images (hack/images/build.sh) builds without a
// container engine: that they agree with the Dockerfiles they stand in for. The repository's
// Dockerfile, cmd/mirror-registry/Dockerfile, bundle.Dockerfile and catalog.Dockerfile are
// parsed with BuildKit's own parser (github.com/moby/buildkit/frontend/dockerfile), and every
// image is read back with go-containerregistry from the registry store bin/images/registry
// (or $QUARTET_IMAGES_DIR/registry, as build.sh), served by a registry the test starts itself
// (read-only). It skips when bin/images/images.txt does not exist.
//
// The releases of hack/olm/releases are checked against their own commit: its Dockerfile and
// bundle.Dockerfile, and a manager built here from that commit's tree (`git archive`) with the
// same command; the clone needs that history.
package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// The published names, as the Makefile's defaults (IMG, BUNDLE_IMG, CATALOG_IMG, ...) and
// hack/images/build.sh give them.
const (
	imageTagBase        = "quay.io/quartet-operator/quartet"
	managerImage        = imageTagBase + ":v0.3.0"
	managerFirstImage   = imageTagBase + ":v0.1.0"
	mirrorRegistryImage = "quay.io/quartet-operator/mirror-registry:v0.3.0"
	bundleImage         = imageTagBase + "-bundle:v0.3.0"
	bundleFirstImage    = imageTagBase + "-bundle:v0.1.0"
	catalogImage        = imageTagBase + "-catalog:v0.3.0"
	opmImage            = "quay.io/operator-framework/opm:v1.74.0"
	olmImage            = "quay.io/operator-framework/olm:v0.46.0"
	registryImage       = "docker.io/library/registry:3.0.0"
	pauseImage          = "registry.k8s.io/pause:3.10"
	scorecardTestImage  = "quay.io/operator-framework/scorecard-test:v1.42.2"
	scorecardUntarImage = "quay.io/operator-framework/scorecard-untar:quartet"
	e2eImage            = "quay.io/quartet-operator/e2e:dev"
	corednsImage        = "registry.k8s.io/coredns/coredns:v1.12.4"
	ubiImage            = "registry.access.redhat.com/ubi9/ubi:9.7"
	emptyIndexImage     = "quay.io/quartet-operator/empty-index:v1.74.0"

	bundleFirstDir = "hack/olm/bundles/quartet.v0.1.0"
	releasesFile   = "hack/olm/releases"
	registryBin    = "bin/registry/v3.0.0/registry"

	isELF = "(an ELF executable)"
)

var allImages = []string{managerImage, managerFirstImage, mirrorRegistryImage, bundleImage, bundleFirstImage, catalogImage, opmImage,
	olmImage, registryImage, pauseImage, scorecardTestImage, scorecardUntarImage, e2eImage, corednsImage, ubiImage, emptyIndexImage}

// release is one line of hack/olm/releases: a version that shipped, and its commit.
type release struct {
	version, commit string
}

func (r release) managerImage() string { return imageTagBase + ":v" + r.version }
func (r release) bundleImage() string  { return imageTagBase + "-bundle:v" + r.version }
func (r release) bundleDir() string    { return "hack/olm/bundles/quartet.v" + r.version }

// readReleases reads hack/olm/releases, oldest first.
func readReleases(t *testing.T, root string) []release {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, releasesFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []release
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 {
			t.Fatalf("%s: malformed line %q", releasesFile, line)
		}
		out = append(out, release{version: f[0], commit: f[1]})
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no release", releasesFile)
	}
	return out
}

func TestImages(t *testing.T) {
	if os.Getenv("QUARTET_SKIP_INTEGRATION") != "" {
		t.Skip("QUARTET_SKIP_INTEGRATION set")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	imagesDir := filepath.Join(root, "bin", "images")
	if dir := os.Getenv("QUARTET_IMAGES_DIR"); dir != "" { // as hack/images/build.sh reads it
		imagesDir = dir
	}
	listPath := filepath.Join(imagesDir, "images.txt")
	list, err := os.ReadFile(listPath)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("skipping: %s does not exist; run make images to build the images this test checks", listPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	releases := readReleases(t, root)
	all := slices.Clone(allImages)
	for _, r := range releases {
		all = append(all, r.managerImage(), r.bundleImage())
	}
	digests := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("%s: malformed line %q", listPath, line)
		}
		digests[f[0]] = f[1]
	}
	for _, img := range all {
		if digests[img] == "" {
			t.Errorf("%s does not list %s", listPath, img)
		}
	}
	if len(digests) != len(all) {
		t.Errorf("%s lists %d images, want %d", listPath, len(digests), len(all))
	}
	if t.Failed() {
		t.FailNow()
	}

	reg := startRegistry(t, root, filepath.Join(imagesDir, "registry"))
	images := &imageReader{t: t, reg: reg, digests: digests, cache: map[string]*image{}}

	t.Run("list", func(t *testing.T) {
		for _, n := range all {
			img := images.get(t, n)
			if img.cfg.OS != "linux" || img.cfg.Architecture != "amd64" {
				t.Errorf("%s: platform %s/%s, want linux/amd64", n, img.cfg.OS, img.cfg.Architecture)
			}
			// The images have no libc: every ELF executable must be static.
			for p, f := range img.files {
				if f.elfInterp != "" {
					t.Errorf("%s: %s is dynamically linked (interpreter %s)", n, p, f.elfInterp)
				}
			}
		}
		// v0.1.0 is a reconstruction of the oldest release: the same operator image.
		if oldest := releases[0].managerImage(); digests[managerFirstImage] != digests[oldest] {
			t.Errorf("%s and %s differ; both tags name the oldest release's manager image", managerFirstImage, oldest)
		}
		// Each release runs its own code, not the current one.
		for _, r := range releases {
			if digests[r.managerImage()] == digests[managerImage] {
				t.Errorf("%s is %s: a release's image must be built from its own commit %s", r.managerImage(), managerImage, r.commit)
			}
		}
	})

	// The current version against the working tree, each release against its commit.
	sources := []managerSource{{image: managerImage, dir: root, current: true}}
	for _, r := range releases {
		sources = append(sources, managerSource{image: r.managerImage(), dir: checkout(t, root, r.commit)})
	}
	t.Run("Dockerfile", func(t *testing.T) {
		for _, m := range sources {
			t.Run(path2name(m.image), func(t *testing.T) { testManager(t, m, images) })
		}
	})
	t.Run("cmd/mirror-registry/Dockerfile", func(t *testing.T) { testMirrorRegistry(t, root, images) })
	t.Run("bundle.Dockerfile", func(t *testing.T) {
		bundles := []bundleSource{{image: bundleImage, dir: "bundle", dockerfile: filepath.Join(root, "bundle.Dockerfile")}}
		for i, r := range releases {
			bundles = append(bundles, bundleSource{image: r.bundleImage(), dir: r.bundleDir(), dockerfile: filepath.Join(sources[i+1].dir, "bundle.Dockerfile")})
		}
		// The reconstructed v0.1.0 carries the oldest release's labels.
		bundles = append(bundles, bundleSource{image: bundleFirstImage, dir: bundleFirstDir, dockerfile: bundles[1].dockerfile})
		testBundles(t, root, images, bundles)
	})
	t.Run("catalog.Dockerfile", func(t *testing.T) { testCatalog(t, root, images) })
	t.Run("others", func(t *testing.T) { testOthers(t, root, images) })
}

// managerSource is an operator image and the source tree it is built from: the working tree
// for the current version, a release's commit checked out for a release.
type managerSource struct {
	image, dir string
	current    bool
}

// checkout extracts commit's tree (`git archive`) into a temporary directory and returns it.
func checkout(t *testing.T, root, commit string) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = root
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	out, err := archive.Output()
	if err != nil {
		t.Fatalf("git archive %s: %v: %s (a shallow clone? git fetch --unshallow)", commit, err, stderr.String())
	}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(target, data, h.FileInfo().Mode().Perm())
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, target)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// testManager: the final stage of the source's Dockerfile (distroless/static:nonroot, its COPYs:
// /licenses and /manager today), with the binary built here from the source exactly as the
// builder stage's RUN line builds it.
func testManager(t *testing.T, src managerSource, images *imageReader) {
	t.Helper()
	managerImage := src.image
	df := parseDockerfile(t, filepath.Join(src.dir, "Dockerfile"))
	final := df.final()
	if final.BaseName != "gcr.io/distroless/static:nonroot" {
		t.Fatalf("Dockerfile: final stage FROM %s; this test knows gcr.io/distroless/static:nonroot", final.BaseName)
	}
	img := images.get(t, managerImage)
	want := df.config(final, nil)
	checkConfig(t, managerImage, img.cfg.Config, want)

	checkDistrolessBase(t, managerImage, img)

	// The builder stage's build command, run here (same flags; the Dockerfile's COPYs take
	// main.go, api/, controllers/, internal/ and go.mod/go.sum, all the main package needs).
	builderGoBuild(t, df, "CGO_ENABLED=0", "go build -trimpath", `-ldflags="-s -w"`, "-o manager .")
	manager := goBuild(t, src.dir, "manager")
	sources := map[string]string{"builder:/workspace/manager": manager, ":LICENSE": filepath.Join(src.dir, "LICENSE")}
	covered := checkCopies(t, managerImage, img, df, final, sources)
	// Nothing beyond the base's files and the Dockerfile's COPYs (a release's image has no
	// /licenses when its Dockerfile had none).
	for p := range img.files {
		if p != "/" && !covered[p] && !isParentOf(p, covered) && !slices.Contains(managerBaseTops, strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]) {
			t.Errorf("%s: unexpected %s", managerImage, p)
		}
	}

	if src.current {
		// The licence where OpenShift's preflight (HasLicense) looks: a file under /licenses.
		if f := img.files["/licenses/LICENSE"]; f == nil || f.sum != fileSum(t, filepath.Join(src.dir, "LICENSE")) {
			t.Errorf("%s: /licenses/LICENSE is missing or is not the repository's LICENSE", managerImage)
		}
	}
}

// checkDistrolessBase: what the distroless/static:nonroot stand-in provides and the manager
// and mirror-registry rely on.
func checkDistrolessBase(t *testing.T, name string, img *image) {
	t.Helper()
	checkFile(t, img, "/etc/ssl/certs/ca-certificates.crt", 0o644, 0, 0)
	if f := img.files["/etc/ssl/certs/ca-certificates.crt"]; f != nil && f.size < 100_000 {
		t.Errorf("%s: ca-certificates.crt is only %d bytes", name, f.size)
	}
	checkFile(t, img, "/tmp", fs.ModeDir|fs.ModeSticky|0o777, 0, 0)
	checkFile(t, img, "/home/nonroot", fs.ModeDir|0o700, 65532, 65532)
	for _, want := range []struct{ file, line string }{
		{"/etc/passwd", "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"},
		{"/etc/group", "nonroot:x:65532:"},
	} {
		if f := img.files[want.file]; f == nil || !slices.Contains(strings.Split(string(f.data), "\n"), want.line) {
			t.Errorf("%s: %s lacks the line %q", name, want.file, want.line)
		}
	}
}

// builderGoBuild returns the go build line of the Dockerfile's builder stage, and fails
// unless it has every one of parts (the flags hack/images/build.sh and this test use).
func builderGoBuild(t *testing.T, df *dockerfile, parts ...string) string {
	t.Helper()
	var run string
	for _, c := range df.stage(t, "builder").Commands {
		if r, ok := c.(*instructions.RunCommand); ok && strings.Contains(strings.Join(r.CmdLine, " "), "go build") {
			run = strings.Join(r.CmdLine, " ")
		}
	}
	for _, part := range parts {
		if !strings.Contains(run, part) {
			t.Fatalf("%s: the builder's go build line %q lacks %q; update this test and hack/images/build.sh", df.name, run, part)
		}
	}
	return run
}

// goBuild builds the main package in dir into a temporary file as hack/images/build.sh does
// (static, trimmed, no VCS stamp, linux/amd64) and returns its path.
func goBuild(t *testing.T, dir, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, b)
	}
	return out
}

// testMirrorRegistry: the RegistryMirror's registry image against cmd/mirror-registry/Dockerfile,
// the users' source of truth: its final stage (distroless/static:nonroot; USER, EXPOSE,
// ENTRYPOINT; COPY of /licenses/LICENSE and /mirror-registry), with the binary built here
// from cmd/mirror-registry (a module of its own) exactly as the builder stage's RUN line
// builds it. It runs with any UID: nothing in the image is written, and /mirror-registry
// is world-executable.
func testMirrorRegistry(t *testing.T, root string, images *imageReader) {
	t.Helper()
	dir := filepath.Join(root, "cmd", "mirror-registry")
	df := parseDockerfile(t, filepath.Join(dir, "Dockerfile"))
	final := df.final()
	if final.BaseName != "gcr.io/distroless/static:nonroot" {
		t.Fatalf("cmd/mirror-registry/Dockerfile: final stage FROM %s; this test knows gcr.io/distroless/static:nonroot", final.BaseName)
	}
	img := images.get(t, mirrorRegistryImage)
	want := df.config(final, nil)
	if want.User == "" || want.User == "0" || strings.HasPrefix(want.User, "0:") || strings.HasPrefix(want.User, "root") {
		t.Errorf("cmd/mirror-registry/Dockerfile: USER %q; the image must run as non-root", want.User)
	}
	checkConfig(t, mirrorRegistryImage, img.cfg.Config, want)
	checkDistrolessBase(t, mirrorRegistryImage, img)

	builderGoBuild(t, df, "CGO_ENABLED=0", "go build -trimpath", `-ldflags="-s -w"`, "-o mirror-registry .")
	sources := map[string]string{"builder:/workspace/mirror-registry": goBuild(t, dir, "mirror-registry"), ":LICENSE": filepath.Join(root, "LICENSE")}
	covered := checkCopies(t, mirrorRegistryImage, img, df, final, sources)
	for p := range img.files {
		if p != "/" && !covered[p] && !isParentOf(p, covered) && !slices.Contains(managerBaseTops, strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]) {
			t.Errorf("%s: unexpected %s", mirrorRegistryImage, p)
		}
	}
	if f := img.files["/mirror-registry"]; f == nil || f.mode.Perm() != 0o755 || !f.isELF || f.elfInterp != "" {
		t.Errorf("%s: /mirror-registry is not a static executable of mode 0755 (any UID runs it)", mirrorRegistryImage)
	}
}

// managerBaseTops are the top-level entries of the distroless/static:nonroot stand-in.
var managerBaseTops = []string{"etc", "home", "root", "tmp"}

// bundleSource is a bundle image, the bundle directory it holds and the bundle.Dockerfile it
// follows (a release's own, from its commit).
type bundleSource struct {
	image, dir, dockerfile string
}

// testBundles: each bundle image against its bundle.Dockerfile and directory: bundle/ (the
// current version), each release's frozen bundle and the reconstructed v0.1.0.
func testBundles(t *testing.T, root string, images *imageReader, bundles []bundleSource) {
	t.Helper()
	for _, b := range bundles {
		t.Run(b.dir, func(t *testing.T) {
			df := parseDockerfile(t, b.dockerfile)
			final := df.final()
			if final.BaseName != "scratch" || len(df.stages) != 1 {
				t.Fatalf("%s: want one FROM scratch stage", b.dockerfile)
			}
			want := df.config(final, nil)
			if len(want.Labels) == 0 {
				t.Fatalf("%s has no LABELs", b.dockerfile)
			}
			img := images.get(t, b.image)
			checkConfig(t, b.image, img.cfg.Config, want)
			// The labels mirror metadata/annotations.yaml, which OLM reads from the bundle.
			ann := readAnnotations(t, filepath.Join(root, b.dir, "metadata", "annotations.yaml"))
			if !mapsEqual(ann, img.cfg.Config.Labels) {
				t.Errorf("%s: labels %v differ from %s/metadata/annotations.yaml %v", b.image, img.cfg.Config.Labels, b.dir, ann)
			}
			sources := map[string]string{}
			for _, c := range final.Commands {
				if cp, ok := c.(*instructions.CopyCommand); ok {
					for _, s := range cp.SourcePaths {
						rel, ok := strings.CutPrefix(path.Clean(s), "bundle")
						if !ok {
							t.Fatalf("bundle.Dockerfile: COPY source %s is not under bundle/", s)
						}
						sources[":"+s] = filepath.Join(root, b.dir, rel)
					}
				}
			}
			covered := checkCopies(t, b.image, img, df, final, sources)
			// FROM scratch: nothing but the COPYs' files (and their parent directories).
			for p := range img.files {
				if !covered[p] && !isParentOf(p, covered) {
					t.Errorf("%s: unexpected %s", b.image, p)
				}
			}
		})
	}
}

// testCatalog: catalog.Dockerfile: the opm image + /configs (catalog/) + the builder stage's
// serve cache, which must pass opm's own integrity check against /configs.
func testCatalog(t *testing.T, root string, images *imageReader) {
	t.Helper()
	df := parseDockerfile(t, filepath.Join(root, "catalog.Dockerfile"))
	final := df.final()
	builder := df.stage(t, "builder")
	if final.BaseName != opmImage || builder.BaseName != opmImage {
		t.Fatalf("catalog.Dockerfile: stages FROM %s and %s; this test knows %s", builder.BaseName, final.BaseName, opmImage)
	}
	base := images.get(t, opmImage)
	img := images.get(t, catalogImage)
	want := df.config(final, &base.cfg.Config)
	checkConfig(t, catalogImage, img.cfg.Config, want)

	// FROM opm: the opm image's layers come first, unchanged.
	if len(img.layers) < len(base.layers) || !slices.Equal(img.layers[:len(base.layers)], base.layers) {
		t.Errorf("%s does not start with the layers of %s", catalogImage, opmImage)
	}
	for p, f := range base.files {
		if g := img.files[p]; g == nil || g.sum != f.sum || g.mode != f.mode {
			t.Errorf("%s: %s differs from %s", catalogImage, p, opmImage)
		}
	}

	// The builder stage: ADD catalog /configs, then RUN ["/bin/opm", "serve", "/configs",
	// "--cache-dir=/tmp/cache", "--cache-only"].
	var run []string
	for _, c := range builder.Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			run = r.CmdLine
		}
	}
	if !slices.Equal(run, []string{"/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"}) {
		t.Fatalf("catalog.Dockerfile: builder RUN %q; this test knows the opm serve --cache-only line", run)
	}
	sources := map[string]string{
		":catalog":           filepath.Join(root, "catalog"),
		"builder:/configs":   "stage:builder:/configs",
		"builder:/tmp/cache": "", // made by the RUN line: checked below
	}
	checkCopies(t, catalogImage, img, df, final, sources)

	// Run the image's own opm on its /configs and /tmp/cache: with --cache-enforce-integrity
	// it fails unless the cache was built from exactly these configs.
	dir := t.TempDir()
	if n := img.extract(t, dir, "/configs", "/tmp/cache", "/bin/opm"); n == 0 {
		t.Fatal("nothing extracted")
	}
	if f := img.files["/tmp/cache/pogreb.v1/digest"]; f == nil {
		t.Errorf("%s: /tmp/cache has no pogreb.v1 cache", catalogImage)
	}
	opm := exec.Command(filepath.Join(dir, "bin", "opm"), "serve", filepath.Join(dir, "configs"),
		"--cache-dir="+filepath.Join(dir, "tmp", "cache"), "--cache-only", "--cache-enforce-integrity",
		"--termination-log="+filepath.Join(dir, "termination-log"), "--pprof-addr=")
	if out, err := opm.CombinedOutput(); err != nil {
		t.Errorf("the image's opm rejects its own cache: %v\n%s", err, out)
	}
}

// testOthers: the images that stand in for upstream images, against the brief of
// hack/images/build.sh (their Dockerfiles are not in this repository).
func testOthers(t *testing.T, root string, images *imageReader) {
	t.Helper()
	pathEnv := "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	tools := filepath.Join(root, "bin", "tools")
	for _, c := range []struct {
		image string
		want  v1.Config
		files map[string]string // image path -> local file with the same content ("" = exists, isELF)
		links map[string]string // image path -> symlink target
	}{{
		image: opmImage,
		want:  v1.Config{Entrypoint: []string{"/bin/opm"}, User: "1001", Env: []string{pathEnv}},
		files: map[string]string{"/bin/opm": filepath.Join(tools, "opm-v1.74.0"), "/bin/grpc_health_probe": filepath.Join(tools, "grpc_health_probe-v0.4.40"), "/bin/busybox": isELF},
		// operator-sdk run bundle starts its catalog pod with sh -c in the index image.
		links: map[string]string{"/bin/sh": "busybox"},
	}, {
		image: olmImage,
		want: v1.Config{Entrypoint: []string{"/bin/olm"}, User: "1001", WorkingDir: "/", Env: []string{pathEnv},
			Labels: map[string]string{"stage": "olm"}, ExposedPorts: map[string]struct{}{"8080/tcp": {}, "5443/tcp": {}}},
		files: map[string]string{
			"/bin/olm": filepath.Join(tools, "olm-v0.46.0"), "/bin/catalog": filepath.Join(tools, "catalog-v0.46.0"),
			"/bin/package-server": filepath.Join(tools, "package-server-v0.46.0"), "/bin/copy-content": filepath.Join(tools, "copy-content-v0.46.0"),
			"/bin/cpb": filepath.Join(tools, "cpb-v0.46.0"), "/bin/busybox": isELF},
		links: map[string]string{"/bin/cp": "busybox"},
	}, {
		image: registryImage,
		want: v1.Config{Entrypoint: []string{"registry"}, Cmd: []string{"serve", "/etc/distribution/config.yml"}, Env: []string{pathEnv},
			ExposedPorts: map[string]struct{}{"5000/tcp": {}}},
		files: map[string]string{"/bin/registry": filepath.Join(root, registryBin), "/etc/distribution/config.yml": "", "/etc/ssl/certs/ca-certificates.crt": ""},
	}, {
		image: pauseImage,
		want:  v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		files: map[string]string{"/pause": ""},
	}, {
		image: scorecardTestImage,
		want: v1.Config{Entrypoint: []string{"/usr/local/bin/scorecard-test"}, User: "1001", WorkingDir: "/opt/scorecard-test",
			Env: []string{pathEnv, "HOME=/opt/scorecard-test", "USER_NAME=scorecard-test", "USER_UID=1001"}},
		files: map[string]string{"/usr/local/bin/scorecard-test": filepath.Join(tools, "scorecard-test-v1.42.2"), "/opt/scorecard-test": ""},
	}, {
		image: scorecardUntarImage,
		want: v1.Config{Cmd: []string{"sh"}, User: "1001", WorkingDir: "/opt/scorecard-untar",
			Env: []string{pathEnv, "HOME=/opt/scorecard-untar", "USER_NAME=scorecard-untar", "USER_UID=1001"}},
		files: map[string]string{"/bin/busybox": isELF, "/opt/scorecard-untar": ""},
		links: map[string]string{"/bin/tar": "busybox", "/bin/gzip": "busybox", "/bin/sh": "busybox"},
	}, {
		image: e2eImage,
		want:  v1.Config{Cmd: []string{"sh"}, User: "65532:65532", WorkingDir: "/", Env: []string{pathEnv}},
		files: map[string]string{"/bin/fakerates": "", "/bin/httpget": isELF, "/bin/busybox": isELF},
		links: map[string]string{"/bin/sh": "busybox", "/bin/wget": "busybox", "/bin/cat": "busybox", "/bin/sleep": "busybox", "/bin/id": "busybox"},
	}, {
		image: corednsImage,
		want:  v1.Config{Entrypoint: []string{"/coredns"}, User: "65532:65532", ExposedPorts: map[string]struct{}{"53/udp": {}, "53/tcp": {}}},
		files: map[string]string{"/coredns": filepath.Join(tools, "coredns-v1.12.4")},
	}, {
		// operator-sdk run bundle's catalog pod runs sh, cat and gzip in it.
		image: ubiImage,
		want:  v1.Config{Cmd: []string{"sh"}, Env: []string{pathEnv}},
		files: map[string]string{"/bin/busybox": isELF},
		links: map[string]string{"/bin/sh": "busybox", "/bin/gzip": "busybox", "/bin/cat": "busybox"},
	}, {
		image: emptyIndexImage,
		want: v1.Config{Entrypoint: []string{"/bin/opm"}, Cmd: []string{"serve", "/configs"}, User: "1001", Env: []string{pathEnv},
			Labels: map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"}},
		files: map[string]string{"/bin/opm": filepath.Join(tools, "opm-v1.74.0"), "/configs": ""},
	}} {
		t.Run(path2name(c.image), func(t *testing.T) {
			img := images.get(t, c.image)
			checkConfig(t, c.image, img.cfg.Config, c.want)
			for p, local := range c.files {
				f := img.files[p]
				if f == nil {
					t.Errorf("%s: no %s", c.image, p)
					continue
				}
				if local == isELF {
					if !f.isELF {
						t.Errorf("%s: %s is not an ELF executable", c.image, p)
					}
				} else if local != "" && f.sum != fileSum(t, local) {
					t.Errorf("%s: %s differs from %s", c.image, p, local)
				}
			}
			for p, target := range c.links {
				if f := img.files[p]; f == nil || f.typeflag != tar.TypeSymlink || f.linkname != target {
					t.Errorf("%s: %s is not a symlink to %s", c.image, p, target)
				}
			}
		})
	}
	// The registry's configuration is the distribution module's example.
	modDir := goListModDir(t, filepath.Join(root, "hack", "tools", "registry"), "github.com/distribution/distribution/v3")
	if modDir != "" {
		img := images.get(t, registryImage)
		if f := img.files["/etc/distribution/config.yml"]; f == nil || f.sum != fileSum(t, filepath.Join(modDir, "cmd", "registry", "config-example.yml")) {
			t.Errorf("%s: /etc/distribution/config.yml is not the module's cmd/registry/config-example.yml", registryImage)
		}
	}
}

// ---- Dockerfiles ------------------------------------------------------------------------

type dockerfile struct {
	name   string
	stages []instructions.Stage
}

func parseDockerfile(t *testing.T, file string) *dockerfile {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	stages, _, err := instructions.Parse(res.AST, linter.New(&linter.Config{}))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(stages) == 0 {
		t.Fatalf("%s: no stages", file)
	}
	return &dockerfile{name: filepath.Base(file), stages: stages}
}

func (d *dockerfile) final() *instructions.Stage { return &d.stages[len(d.stages)-1] }

func (d *dockerfile) stage(t *testing.T, name string) *instructions.Stage {
	t.Helper()
	for i := range d.stages {
		if strings.EqualFold(d.stages[i].Name, name) {
			return &d.stages[i]
		}
	}
	t.Fatalf("%s: no stage %q", d.name, name)
	return nil
}

// config is the image config a stage defines on top of base (nil: FROM scratch, or a base this
// test does not have, whose fields the stage does not set are then not checked).
func (d *dockerfile) config(s *instructions.Stage, base *v1.Config) v1.Config {
	var c v1.Config
	if base != nil {
		c = *base.DeepCopy()
	}
	for _, cmd := range s.Commands {
		switch x := cmd.(type) {
		case *instructions.EntrypointCommand:
			c.Entrypoint = x.CmdLine
			c.Cmd = nil
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
	if !path.IsAbs(p) {
		p = path.Join("/", cur, p)
	}
	return path.Clean(p)
}

// checkCopies checks every COPY/ADD of stage s: each destination exists in img with the
// content of its source. sources maps "stage:path" (":path" for the build context) to a local
// file or directory, to "stage:NAME:PATH" (resolved through that stage's COPY/ADD), or to ""
// (existence only). It returns the image paths the copies cover.
func checkCopies(t *testing.T, image string, img *image, df *dockerfile, s *instructions.Stage, sources map[string]string) map[string]bool {
	t.Helper()
	covered := map[string]bool{}
	wd := "/"
	for _, cmd := range s.Commands {
		var sd instructions.SourcesAndDest
		from := ""
		switch x := cmd.(type) {
		case *instructions.WorkdirCommand:
			wd = workdir(wd, x.Path)
			continue
		case *instructions.CopyCommand:
			sd, from = x.SourcesAndDest, x.From
			if x.Chown != "" || x.Chmod != "" {
				t.Errorf("%s: %s: --chown/--chmod: not handled by this test", df.name, x)
			}
		case *instructions.AddCommand:
			sd = x.SourcesAndDest
		default:
			continue
		}
		for _, src := range sd.SourcePaths {
			dest := sd.DestPath
			if !path.IsAbs(dest) {
				dest = path.Join(wd, dest)
			}
			key := from + ":" + src
			local, ok := sources[key]
			if !ok {
				t.Errorf("%s: %s %s: this test does not know the source %s", df.name, cmd, dest, key)
				continue
			}
			for strings.HasPrefix(local, "stage:") {
				// Resolve through the named stage's own COPY/ADD of that path.
				parts := strings.SplitN(local, ":", 3)
				local = resolveStageCopy(t, df, df.stage(t, parts[1]), parts[2], sources)
			}
			if local == "" {
				if img.files[path.Clean(dest)] == nil {
					t.Errorf("%s: %s: %s missing", image, cmd, dest)
				}
				markCovered(covered, img, path.Clean(dest))
				continue
			}
			fi, err := os.Stat(local)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.IsDir() {
				if strings.HasSuffix(sd.DestPath, "/") || sd.DestPath == "." {
					dest = path.Join(dest, path.Base(src))
				}
				compareFile(t, image, img, path.Clean(dest), local)
				covered[path.Clean(dest)] = true
				continue
			}
			// A directory source: its contents go into dest.
			want := map[string]bool{}
			err = filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(local, p)
				ip := path.Join(dest, filepath.ToSlash(rel))
				want[ip] = true
				if !d.IsDir() {
					compareFile(t, image, img, ip, p)
				} else if f := img.files[ip]; f == nil || !f.mode.IsDir() {
					t.Errorf("%s: %s: directory %s missing", image, cmd, ip)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for p := range img.files {
				if strings.HasPrefix(p, path.Clean(dest)+"/") && !want[p] {
					t.Errorf("%s: %s: %s is in the image but not in %s", image, cmd, p, local)
				}
			}
			for p := range want {
				covered[p] = true
			}
		}
	}
	return covered
}

func resolveStageCopy(t *testing.T, df *dockerfile, s *instructions.Stage, p string, sources map[string]string) string {
	t.Helper()
	for _, cmd := range s.Commands {
		var sd instructions.SourcesAndDest
		from := ""
		switch x := cmd.(type) {
		case *instructions.CopyCommand:
			sd, from = x.SourcesAndDest, x.From
		case *instructions.AddCommand:
			sd = x.SourcesAndDest
		default:
			continue
		}
		if path.Clean(sd.DestPath) == path.Clean(p) && len(sd.SourcePaths) == 1 {
			if local, ok := sources[from+":"+sd.SourcePaths[0]]; ok {
				return local
			}
		}
	}
	t.Fatalf("%s: stage %s does not COPY/ADD %s from a known source", df.name, s.Name, p)
	return ""
}

func markCovered(covered map[string]bool, img *image, dest string) {
	for p := range img.files {
		if p == dest || strings.HasPrefix(p, dest+"/") {
			covered[p] = true
		}
	}
}

func isParentOf(dir string, covered map[string]bool) bool {
	for p := range covered {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// compareFile: same content, root-owned (COPY without --chown), and the executable bit of the
// source (hack/images/build.sh normalises modes to 0644/0755, as a checkout with umask 022 has them).
func compareFile(t *testing.T, image string, img *image, ip, local string) {
	t.Helper()
	f := img.files[ip]
	if f == nil {
		t.Errorf("%s: %s missing (source %s)", image, ip, local)
		return
	}
	fi, err := os.Stat(local)
	if err != nil {
		t.Fatal(err)
	}
	if !f.mode.IsRegular() || f.sum != fileSum(t, local) {
		t.Errorf("%s: %s differs from %s (changed since the last make images?)", image, ip, local)
	}
	wantMode := fs.FileMode(0o644)
	if fi.Mode()&0o100 != 0 {
		wantMode = 0o755
	}
	if f.mode.Perm() != wantMode || f.uid != 0 || f.gid != 0 {
		t.Errorf("%s: %s: mode %v owner %d:%d, want %v 0:0", image, ip, f.mode.Perm(), f.uid, f.gid, wantMode)
	}
}

func checkFile(t *testing.T, img *image, p string, mode fs.FileMode, uid, gid int) {
	t.Helper()
	f := img.files[p]
	if f == nil {
		t.Errorf("%s: %s missing", img.name, p)
		return
	}
	if f.mode != mode || f.uid != uid || f.gid != gid {
		t.Errorf("%s: %s: mode %v owner %d:%d, want %v %d:%d", img.name, p, f.mode, f.uid, f.gid, mode, uid, gid)
	}
}

// checkConfig compares the fields the Dockerfile (or the brief) sets. Env is compared as a
// set; an image may carry more labels or env only when want has none of them.
func checkConfig(t *testing.T, image string, got, want v1.Config) {
	t.Helper()
	if !slices.Equal(got.Entrypoint, want.Entrypoint) {
		t.Errorf("%s: Entrypoint %q, want %q", image, got.Entrypoint, want.Entrypoint)
	}
	if !slices.Equal(got.Cmd, want.Cmd) {
		t.Errorf("%s: Cmd %q, want %q", image, got.Cmd, want.Cmd)
	}
	if got.User != want.User {
		t.Errorf("%s: User %q, want %q", image, got.User, want.User)
	}
	if want.WorkingDir != "" && got.WorkingDir != want.WorkingDir {
		t.Errorf("%s: WorkingDir %q, want %q", image, got.WorkingDir, want.WorkingDir)
	}
	if len(want.Labels)+len(got.Labels) > 0 && !mapsEqual(got.Labels, want.Labels) {
		t.Errorf("%s: Labels %v, want %v", image, got.Labels, want.Labels)
	}
	for _, e := range want.Env {
		if !slices.Contains(got.Env, e) {
			t.Errorf("%s: Env %q lacks %q", image, got.Env, e)
		}
	}
	if want.ExposedPorts != nil && !mapsEqual(got.ExposedPorts, want.ExposedPorts) {
		t.Errorf("%s: ExposedPorts %v, want %v", image, got.ExposedPorts, want.ExposedPorts)
	}
}

func mapsEqual[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// readAnnotations reads the flat "annotations:" map of a bundle's metadata/annotations.yaml.
func readAnnotations(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || line == "annotations:" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s: unexpected line %q", file, line)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}

// ---- images -----------------------------------------------------------------------------

type file struct {
	typeflag  byte
	mode      fs.FileMode
	uid, gid  int
	size      int64
	linkname  string
	sum       string
	data      []byte // small text files under /etc only
	isELF     bool
	elfInterp string
}

type image struct {
	name   string
	img    v1.Image
	cfg    *v1.ConfigFile
	layers []v1.Hash
	files  map[string]*file
}

type imageReader struct {
	t       *testing.T
	reg     string
	digests map[string]string
	cache   map[string]*image
}

// get reads a published image from the test's registry (the host dropped from its name),
// checks its digest against images.txt and indexes its flattened filesystem.
func (r *imageReader) get(t *testing.T, published string) *image {
	t.Helper()
	if img := r.cache[published]; img != nil {
		return img
	}
	_, rest, _ := strings.Cut(published, "/")
	ref, err := name.ParseReference(r.reg+"/"+rest, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	ri, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("%s: %v", published, err)
	}
	d, err := ri.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if d.String() != r.digests[published] {
		t.Errorf("%s: digest %s in the registry, %s in images.txt", published, d, r.digests[published])
	}
	img := &image{name: published, img: ri, files: map[string]*file{}}
	if img.cfg, err = ri.ConfigFile(); err != nil {
		t.Fatal(err)
	}
	layers, err := ri.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		img.layers = append(img.layers, h)
	}
	err = walkImage(ri, func(h *tar.Header, p string, body io.Reader) error {
		f := &file{typeflag: h.Typeflag, mode: h.FileInfo().Mode(), uid: h.Uid, gid: h.Gid, size: h.Size, linkname: h.Linkname}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(body)
			if err != nil {
				return err
			}
			s := sha256.Sum256(data)
			f.sum = hex.EncodeToString(s[:])
			if strings.HasPrefix(p, "/etc/") && len(data) < 64<<10 {
				f.data = data
			}
			if e, err := elf.NewFile(bytes.NewReader(data)); err == nil {
				f.isELF = true
				for _, prog := range e.Progs {
					if prog.Type == elf.PT_INTERP {
						interp, _ := io.ReadAll(prog.Open())
						f.elfInterp = strings.TrimRight(string(interp), "\x00")
					}
				}
			}
		}
		img.files[p] = f
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", published, err)
	}
	r.cache[published] = img
	return img
}

// walkImage calls fn for every entry of the image's flattened filesystem (whiteouts applied by
// go-containerregistry's mutate.Extract), with absolute, cleaned paths.
func walkImage(img v1.Image, fn func(h *tar.Header, p string, body io.Reader) error) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, path.Clean("/"+h.Name), tr); err != nil {
			return err
		}
	}
}

// extract writes the regular files and directories under the given image paths to dir and
// returns how many it wrote.
func (img *image) extract(t *testing.T, dir string, prefixes ...string) int {
	t.Helper()
	n := 0
	err := walkImage(img.img, func(h *tar.Header, p string, body io.Reader) error {
		if !slices.ContainsFunc(prefixes, func(pre string) bool { return p == pre || strings.HasPrefix(p, pre+"/") }) {
			return nil
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		switch h.Typeflag {
		case tar.TypeDir:
			n++
			return os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			n++
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, h.FileInfo().Mode().Perm()|0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, body); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func path2name(image string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(image)
}

// goListModDir returns the directory of module mod as the tools module in dir resolves it
// ("" and a log line when the module is not in the module cache).
func goListModDir(t *testing.T, dir, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Logf("go list -m %s in %s: %v (not compared)", mod, dir, err)
		return ""
	}
	return strings.TrimSpace(string(out))
}

// ---- registry ---------------------------------------------------------------------------

var listening = regexp.MustCompile(`listening on (127\.0\.0\.1:[0-9]+)`)

// startRegistry serves store read-only on a free loopback port with the registry that make
// registry builds, until the test ends; it returns host:port.
func startRegistry(t *testing.T, root, store string) string {
	t.Helper()
	bin := filepath.Join(root, registryBin)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: run make registry (make images does)", err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	err := os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 0.1
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
      enabled: true
http:
  addr: 127.0.0.1:0
`, store)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(logFile.Name())
		if m := listening.FindSubmatch(data); m != nil {
			return string(m[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	data, _ := os.ReadFile(logFile.Name())
	t.Fatalf("the registry did not start:\n%s", data)
	return ""
}
