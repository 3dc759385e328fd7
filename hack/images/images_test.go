package main

// The test of the images make images built: that they agree with the Dockerfiles they stand
// in for (Dockerfile, cmd/mirror-registry/Dockerfile, bundle.Dockerfile, catalog.Dockerfile,
// parsed with BuildKit's parser; a release's from its commit, with a manager built here from
// it in a temporary git worktree). Every image is read back with go-containerregistry from the
// store bin/images/registry (or $QUARTET_IMAGES_DIR/registry), served read-only by a registry
// the test starts. The expected configs and files come from the Dockerfiles and the sources,
// not from the builder's tables. It skips when images.txt does not exist.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"

	"github.com/quartet-operator/quartet/hack/olm/release"
)

const distroless = "gcr.io/distroless/static:nonroot"

// file is an entry of an image's flattened file system.
type file struct {
	hdr    *tar.Header
	sum    [32]byte
	data   []byte // regular files under /etc only
	isELF  bool
	static bool
}

type image struct {
	img    v1.Image
	cfg    *v1.ConfigFile
	layers []v1.Hash
	files  map[string]*file // absolute, cleaned paths
}

type fixture struct {
	root, reg string
	set       settings
	releases  []release.Release
	digests   map[string]string
	cache     map[string]*image
}

func TestImages(t *testing.T) {
	if os.Getenv("QUARTET_SKIP_INTEGRATION") != "" {
		t.Skip("QUARTET_SKIP_INTEGRATION set")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	must(t, err)
	f := &fixture{root: root, set: readSettings(root), digests: map[string]string{}, cache: map[string]*image{}}
	listPath := filepath.Join(f.set.out, "images.txt")
	list, err := os.ReadFile(listPath)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("skipping: %s does not exist; run make images to build the images this test checks", listPath)
	}
	must(t, err)
	f.releases, err = release.Read(root)
	must(t, err)
	for line := range strings.Lines(string(list)) {
		if ref, dig, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			f.digests[ref] = dig
		}
	}
	im, base := f.set.images, f.set.tagBase
	all := append(slices.Collect(maps.Values(im)), base+":v0.1.0", base+"-bundle:v0.1.0")
	for _, r := range f.releases {
		all = append(all, base+":v"+r.Version, base+"-bundle:v"+r.Version)
	}
	if got := slices.Sorted(maps.Keys(f.digests)); !slices.Equal(got, slices.Sorted(slices.Values(all))) {
		t.Fatalf("%s lists %q, want %q", listPath, got, slices.Sorted(slices.Values(all)))
	}
	reg, stop, err := startRegistry(filepath.Join(root, "bin", "registry", "v3.0.0", "registry"), filepath.Join(f.set.out, "registry"), t.TempDir(), true)
	must(t, err)
	t.Cleanup(stop)
	f.reg = reg

	t.Run("list", func(t *testing.T) {
		for _, n := range all {
			img := f.get(t, n)
			if img.cfg.OS != "linux" || img.cfg.Architecture != "amd64" {
				t.Errorf("%s: platform %s/%s, want linux/amd64", n, img.cfg.OS, img.cfg.Architecture)
			}
			for p, fl := range img.files { // no libc in any image
				if fl.isELF && !fl.static {
					t.Errorf("%s: %s is dynamically linked", n, p)
				}
			}
		}
		// v0.1.0 is a reconstruction of the oldest release: the same operator image. Each
		// release runs its own code, not the current one.
		if f.digests[base+":v0.1.0"] != f.digests[base+":v"+f.releases[0].Version] {
			t.Errorf("%s:v0.1.0 is not the oldest release's manager image", base)
		}
		for _, r := range f.releases {
			if f.digests[base+":v"+r.Version] == f.digests[im["IMG"]] {
				t.Errorf("%s:v%s is %s: a release's image must be built from its own commit", base, r.Version, im["IMG"])
			}
		}
	})

	// The operator and the RegistryMirror's registry from the working tree, each release's
	// operator from its commit; bundle images against their bundle.Dockerfile.
	type source struct{ image, dir, binary, license string } // dir: the Dockerfile's
	mirror := filepath.Join(root, "cmd", "mirror-registry")
	bin := t.TempDir()
	must(t, goBuild(t.Context(), root, filepath.Join(bin, "manager")))
	must(t, goBuild(t.Context(), mirror, filepath.Join(bin, "mirror-registry")))
	sources := []source{
		{im["IMG"], root, filepath.Join(bin, "manager"), filepath.Join(root, "LICENSE")},
		{im["MIRROR_REGISTRY_IMG"], mirror, filepath.Join(bin, "mirror-registry"), filepath.Join(root, "LICENSE")},
	}
	work := t.TempDir() // each release's Dockerfiles, LICENSE and manager, built from its commit
	for _, r := range f.releases {
		must(t, releaseBuild(t.Context(), root, work, r))
		dir := filepath.Join(work, "release-v"+r.Version)
		sources = append(sources, source{base + ":v" + r.Version, dir, filepath.Join(dir, "manager"), filepath.Join(dir, "LICENSE")})
	}
	for _, s := range sources {
		t.Run(s.image, func(t *testing.T) {
			f.testBinaryImage(t, s.image, filepath.Join(s.dir, "Dockerfile"), s.binary, s.license)
		})
	}
	// The licence where OpenShift's preflight (HasLicense) looks: a file under /licenses.
	if fl := f.get(t, im["IMG"]).files["/licenses/LICENSE"]; fl == nil || fl.sum != fileSum(t, filepath.Join(root, "LICENSE")) {
		t.Errorf("%s: /licenses/LICENSE is missing or is not the repository's LICENSE", im["IMG"])
	}
	bundles := map[string][2]string{ // image -> bundle directory, bundle.Dockerfile
		im["BUNDLE_IMG"]:        {"bundle", filepath.Join(root, "bundle.Dockerfile")},
		base + "-bundle:v0.1.0": {"hack/olm/bundles/quartet.v0.1.0", filepath.Join(work, "release-v"+f.releases[0].Version, "bundle.Dockerfile")},
	}
	for _, r := range f.releases {
		bundles[base+"-bundle:v"+r.Version] = [2]string{"hack/olm/bundles/quartet.v" + r.Version, filepath.Join(work, "release-v"+r.Version, "bundle.Dockerfile")}
	}
	for ref, b := range bundles {
		t.Run(ref, func(t *testing.T) { f.testBundle(t, ref, b[0], b[1]) })
	}
	t.Run("catalog.Dockerfile", f.testCatalog)
	t.Run("others", f.testOthers)
}

// testBinaryImage: the final stage of a Go program's Dockerfile (FROM distroless/static:nonroot,
// COPY LICENSE /licenses/LICENSE where it has it, COPY --from=builder the binary), with the
// binary built here as the builder stage's RUN line builds it, and the distroless stand-in.
func (f *fixture) testBinaryImage(t *testing.T, ref, dockerfile, binary, license string) {
	t.Helper()
	df, err := parseDockerfile(dockerfile)
	must(t, err)
	final := df.final()
	if final.BaseName != distroless {
		t.Fatalf("%s: final stage FROM %s; this test knows %s", dockerfile, final.BaseName, distroless)
	}
	run := ""
	for _, st := range df {
		for _, c := range st.Commands {
			if r, ok := c.(*instructions.RunCommand); ok && st.Name == "builder" && strings.Contains(strings.Join(r.CmdLine, " "), "go build") {
				run = strings.Join(r.CmdLine, " ")
			}
		}
	}
	for _, part := range []string{"CGO_ENABLED=0", "go build -trimpath", `-ldflags="-s -w"`, "-o " + filepath.Base(binary) + " ."} {
		if !strings.Contains(run, part) {
			t.Fatalf("%s: the builder's go build line %q lacks %q; update this test and hack/images", dockerfile, run, part)
		}
	}
	img := f.get(t, ref)
	want := stageConfig(final, &v1.Config{Env: []string{pathEnv, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}})
	if want.User == "" || want.User == "0" || strings.HasPrefix(want.User, "0:") || strings.HasPrefix(want.User, "root") {
		t.Errorf("%s: USER %q; the image must run as non-root", dockerfile, want.User)
	}
	checkConfig(t, ref, img.cfg.Config, want)

	// distroless/static:nonroot: CA certificates, /tmp, nonroot's home, passwd and group.
	checkFile(t, img, "/etc/ssl/certs/ca-certificates.crt", 0o644, 0)
	if fl := img.files["/etc/ssl/certs/ca-certificates.crt"]; fl != nil && fl.hdr.Size < 100_000 {
		t.Errorf("%s: ca-certificates.crt is only %d bytes", ref, fl.hdr.Size)
	}
	checkFile(t, img, "/tmp", fs.ModeDir|fs.ModeSticky|0o777, 0)
	checkFile(t, img, "/home/nonroot", fs.ModeDir|0o700, 65532)
	for file, line := range map[string]string{"/etc/passwd": "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin", "/etc/group": "nonroot:x:65532:"} {
		if fl := img.files[file]; fl == nil || !slices.Contains(strings.Split(string(fl.data), "\n"), line) {
			t.Errorf("%s: %s lacks the line %q", ref, file, line)
		}
	}
	sources := map[string]string{"builder:/workspace/" + filepath.Base(binary): binary, ":LICENSE": license}
	covered := checkCopies(t, ref, img, final, sources)
	for _, top := range []string{"/etc", "/home", "/root", "/tmp"} { // the base's
		markCovered(covered, img, top)
	}
	checkNothingElse(t, ref, img, covered)
	if fl := img.files["/"+filepath.Base(binary)]; fl == nil || fl.hdr.Mode&0o555 != 0o555 || !fl.isELF {
		t.Errorf("%s: /%s is not an executable any UID runs", ref, filepath.Base(binary))
	}
}

// testBundle: a bundle image against its bundle.Dockerfile (one FROM scratch stage, LABELs,
// COPYs of bundle/...) and bundle directory; the labels also equal metadata/annotations.yaml,
// which OLM reads from the bundle.
func (f *fixture) testBundle(t *testing.T, ref, dir, dockerfile string) {
	t.Helper()
	df, err := parseDockerfile(dockerfile)
	must(t, err)
	final := df.final()
	want := stageConfig(final, nil)
	if final.BaseName != "scratch" || len(df) != 1 || len(want.Labels) == 0 {
		t.Fatalf("%s: want one FROM scratch stage with LABELs", dockerfile)
	}
	img := f.get(t, ref)
	checkConfig(t, ref, img.cfg.Config, want)
	data, err := os.ReadFile(filepath.Join(f.root, dir, "metadata", "annotations.yaml"))
	must(t, err)
	ann := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && !strings.HasPrefix(k, "#") {
			ann[k] = strings.TrimSpace(v)
		}
	}
	if !maps.Equal(ann, img.cfg.Config.Labels) {
		t.Errorf("%s: labels %v differ from %s/metadata/annotations.yaml %v", ref, img.cfg.Config.Labels, dir, ann)
	}
	sources := map[string]string{}
	for _, c := range final.Commands {
		if cp, ok := c.(*instructions.CopyCommand); ok {
			for _, s := range cp.SourcePaths {
				rel, ok := strings.CutPrefix(path.Clean(s), "bundle")
				if !ok {
					t.Fatalf("%s: COPY source %s is not under bundle/", dockerfile, s)
				}
				sources[":"+s] = filepath.Join(f.root, dir, rel)
			}
		}
	}
	checkNothingElse(t, ref, img, checkCopies(t, ref, img, final, sources))
}

// testCatalog: catalog.Dockerfile: the opm image, /configs (catalog/) and the builder stage's
// serve cache, which must pass opm's own integrity check against /configs.
func (f *fixture) testCatalog(t *testing.T) {
	df, err := parseDockerfile(filepath.Join(f.root, "catalog.Dockerfile"))
	must(t, err)
	opmRef, ref := f.set.images["OPM_IMG"], f.set.images["CATALOG_IMG"]
	final, builder := df.final(), &df[0]
	var steps []string
	for _, c := range builder.Commands {
		switch x := c.(type) {
		case *instructions.AddCommand:
			steps = append(steps, "ADD "+strings.Join(append(x.SourcePaths, x.DestPath), " "))
		case *instructions.RunCommand:
			steps = append(steps, "RUN "+strings.Join(x.CmdLine, " "))
		default:
			steps = append(steps, c.Name())
		}
	}
	wantSteps := []string{"ADD catalog /configs", "RUN /bin/opm serve /configs --cache-dir=/tmp/cache --cache-only"}
	if final.BaseName != opmRef || builder.BaseName != opmRef || !slices.Equal(steps, wantSteps) {
		t.Fatalf("catalog.Dockerfile: builder FROM %s %q, final FROM %s; this test knows FROM %s %q", builder.BaseName, steps, final.BaseName, opmRef, wantSteps)
	}
	base, img := f.get(t, opmRef), f.get(t, ref)
	checkConfig(t, ref, img.cfg.Config, stageConfig(final, &base.cfg.Config))
	if len(img.layers) < len(base.layers) || !slices.Equal(img.layers[:len(base.layers)], base.layers) {
		t.Errorf("%s does not start with the layers of %s", ref, opmRef)
	}
	sources := map[string]string{"builder:/configs": filepath.Join(f.root, "catalog"), "builder:/tmp/cache": ""}
	checkCopies(t, ref, img, final, sources)

	// The image's own opm on its /configs and /tmp/cache: with --cache-enforce-integrity it
	// fails unless the cache was built from exactly these configs.
	dir := t.TempDir()
	img.extract(t, dir, "/configs", "/tmp/cache", "/bin/opm")
	if img.files["/tmp/cache/pogreb.v1/digest"] == nil {
		t.Errorf("%s: /tmp/cache has no pogreb.v1 cache", ref)
	}
	opm := exec.Command(filepath.Join(dir, "bin", "opm"), "serve", filepath.Join(dir, "configs"),
		"--cache-dir="+filepath.Join(dir, "tmp", "cache"), "--cache-only", "--cache-enforce-integrity",
		"--termination-log="+filepath.Join(dir, "termination-log"), "--pprof-addr=")
	if out, err := opm.CombinedOutput(); err != nil {
		t.Errorf("the image's opm rejects its own cache: %v\n%s", err, out)
	}
}

// testOthers: the images that stand in for upstream images (their Dockerfiles are not in this
// repository), against what the real node needs of them.
func (f *fixture) testOthers(t *testing.T) {
	tools := filepath.Join(f.root, "bin", "tools")
	im := f.set.images
	modDir, err := command(t.Context(), filepath.Join(f.root, "hack", "tools", "registry"), nil, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/distribution/distribution/v3")
	must(t, err)
	const elfFile = "(an ELF executable)"
	for _, c := range []struct {
		image string
		want  v1.Config
		files map[string]string // image path -> local file of the same content, elfFile or "" (exists)
		links []string          // image paths of symlinks to busybox
	}{{
		image: im["OPM_IMG"], want: v1.Config{Entrypoint: []string{"/bin/opm"}, User: "1001", Env: []string{pathEnv}},
		files: map[string]string{"/bin/opm": f.set.opm, "/bin/grpc_health_probe": f.set.grpcHealthProbe, "/bin/busybox": elfFile},
		links: []string{"/bin/sh"}, // operator-sdk run bundle runs sh -c in the index image
	}, {
		image: im["OLM_IMG"], want: v1.Config{Entrypoint: []string{"/bin/olm"}, User: "1001", WorkingDir: "/", Env: []string{pathEnv},
			Labels: map[string]string{"stage": "olm"}, ExposedPorts: map[string]struct{}{"8080/tcp": {}, "5443/tcp": {}}},
		files: map[string]string{"/bin/olm": filepath.Join(tools, "olm-v0.46.0"), "/bin/catalog": filepath.Join(tools, "catalog-v0.46.0"),
			"/bin/package-server": filepath.Join(tools, "package-server-v0.46.0"), "/bin/copy-content": filepath.Join(tools, "copy-content-v0.46.0"),
			"/bin/cpb": filepath.Join(tools, "cpb-v0.46.0"), "/bin/busybox": elfFile},
		links: []string{"/bin/cp"},
	}, {
		image: im["REGISTRY_IMG"], want: v1.Config{Entrypoint: []string{"registry"}, Cmd: []string{"serve", "/etc/distribution/config.yml"},
			Env: []string{pathEnv}, ExposedPorts: map[string]struct{}{"5000/tcp": {}}},
		files: map[string]string{"/bin/registry": f.set.registry, "/etc/ssl/certs/ca-certificates.crt": "",
			"/etc/distribution/config.yml": filepath.Join(modDir, "cmd", "registry", "config-example.yml")},
	}, {
		image: im["PAUSE_IMG"], want: v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}, files: map[string]string{"/pause": elfFile},
	}, {
		image: im["SCORECARD_TEST_IMG"], want: v1.Config{Entrypoint: []string{"/usr/local/bin/scorecard-test"}, User: "1001", WorkingDir: "/opt/scorecard-test",
			Env: []string{pathEnv, "HOME=/opt/scorecard-test", "USER_NAME=scorecard-test", "USER_UID=1001"}},
		files: map[string]string{"/usr/local/bin/scorecard-test": f.set.scorecardTest, "/opt/scorecard-test": ""},
	}, {
		image: im["SCORECARD_UNTAR_IMG"], want: v1.Config{Cmd: []string{"sh"}, User: "1001", WorkingDir: "/opt/scorecard-untar",
			Env: []string{pathEnv, "HOME=/opt/scorecard-untar", "USER_NAME=scorecard-untar", "USER_UID=1001"}},
		files: map[string]string{"/bin/busybox": elfFile, "/opt/scorecard-untar": ""},
		links: []string{"/bin/tar", "/bin/gzip", "/bin/sh"},
	}, {
		image: im["E2E_IMG"], want: v1.Config{Cmd: []string{"sh"}, User: "65532:65532", WorkingDir: "/", Env: []string{pathEnv}},
		files: map[string]string{"/bin/fakerates": elfFile, "/bin/httpget": elfFile, "/bin/busybox": elfFile},
		links: []string{"/bin/sh", "/bin/wget", "/bin/cat", "/bin/sleep", "/bin/id"},
	}, {
		image: im["COREDNS_IMG"], want: v1.Config{Entrypoint: []string{"/coredns"}, User: "65532:65532", ExposedPorts: map[string]struct{}{"53/udp": {}, "53/tcp": {}}},
		files: map[string]string{"/coredns": f.set.core},
	}, {
		// operator-sdk run bundle's catalog pod runs sh, cat and gzip in it.
		image: im["UBI_IMG"], want: v1.Config{Cmd: []string{"sh"}, Env: []string{pathEnv}},
		files: map[string]string{"/bin/busybox": elfFile}, links: []string{"/bin/sh", "/bin/gzip", "/bin/cat"},
	}, {
		image: im["EMPTY_INDEX_IMG"], want: v1.Config{Entrypoint: []string{"/bin/opm"}, Cmd: []string{"serve", "/configs"}, User: "1001", Env: []string{pathEnv},
			Labels: map[string]string{"operators.operatorframework.io.index.configs.v1": "/configs"}},
		files: map[string]string{"/bin/opm": f.set.opm, "/configs": ""},
	}} {
		t.Run(c.image, func(t *testing.T) {
			img := f.get(t, c.image)
			checkConfig(t, c.image, img.cfg.Config, c.want)
			for p, local := range c.files {
				switch fl := img.files[p]; {
				case fl == nil:
					t.Errorf("%s: no %s", c.image, p)
				case local == elfFile && !fl.isELF:
					t.Errorf("%s: %s is not an ELF executable", c.image, p)
				case local != elfFile && local != "" && fl.sum != fileSum(t, local):
					t.Errorf("%s: %s differs from %s", c.image, p, local)
				}
			}
			for _, p := range c.links {
				if fl := img.files[p]; fl == nil || fl.hdr.Typeflag != tar.TypeSymlink || fl.hdr.Linkname != "busybox" {
					t.Errorf("%s: %s is not a symlink to busybox", c.image, p)
				}
			}
		})
	}
}

// checkConfig compares the fields the Dockerfile (or the brief) sets. Env is compared as a
// set; labels and ports exactly where want has them (or the image has labels).
func checkConfig(t *testing.T, ref string, got, want v1.Config) {
	t.Helper()
	if !slices.Equal(got.Entrypoint, want.Entrypoint) || !slices.Equal(got.Cmd, want.Cmd) || got.User != want.User {
		t.Errorf("%s: Entrypoint %q Cmd %q User %q, want %q %q %q", ref, got.Entrypoint, got.Cmd, got.User, want.Entrypoint, want.Cmd, want.User)
	}
	if want.WorkingDir != "" && got.WorkingDir != want.WorkingDir {
		t.Errorf("%s: WorkingDir %q, want %q", ref, got.WorkingDir, want.WorkingDir)
	}
	if len(want.Labels)+len(got.Labels) > 0 && !maps.Equal(got.Labels, want.Labels) {
		t.Errorf("%s: Labels %v, want %v", ref, got.Labels, want.Labels)
	}
	for _, e := range want.Env {
		if !slices.Contains(got.Env, e) {
			t.Errorf("%s: Env %q lacks %q", ref, got.Env, e)
		}
	}
	if want.ExposedPorts != nil && !maps.Equal(got.ExposedPorts, want.ExposedPorts) {
		t.Errorf("%s: ExposedPorts %v, want %v", ref, got.ExposedPorts, want.ExposedPorts)
	}
}

// checkCopies checks every COPY/ADD of stage s: each destination exists in img with the
// content of its source. sources maps "stage:path" (":path" for the build context) to a local
// file or directory, or "" (existence only). It returns the image paths the copies cover.
func checkCopies(t *testing.T, ref string, img *image, s *instructions.Stage, sources map[string]string) map[string]bool {
	t.Helper()
	covered, wd := map[string]bool{}, "/"
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
				t.Errorf("%s: %s: --chown/--chmod: not handled by this test", ref, x)
			}
		case *instructions.AddCommand:
			sd = x.SourcesAndDest
		default:
			continue
		}
		for _, src := range sd.SourcePaths {
			dest := path.Join(wd, sd.DestPath)
			local, ok := sources[from+":"+src]
			if !ok {
				t.Errorf("%s: %s: this test does not know the source %s:%s", ref, cmd, from, src)
				continue
			}
			if local == "" {
				if img.files[dest] == nil {
					t.Errorf("%s: %s: %s missing", ref, cmd, dest)
				}
				markCovered(covered, img, dest)
				continue
			}
			fi, err := os.Stat(local)
			must(t, err)
			if !fi.IsDir() && (strings.HasSuffix(sd.DestPath, "/") || sd.DestPath == ".") {
				dest = path.Join(dest, path.Base(src))
			}
			// A directory's contents go into dest; a file is dest.
			must(t, filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
				rel, _ := filepath.Rel(local, p)
				ip := path.Join(dest, filepath.ToSlash(rel))
				covered[ip] = true
				if err == nil && !d.IsDir() {
					compareFile(t, ref, img, ip, p)
				} else if fl := img.files[ip]; err == nil && (fl == nil || fl.hdr.Typeflag != tar.TypeDir) {
					t.Errorf("%s: %s: directory %s missing", ref, cmd, ip)
				}
				return err
			}))
			for p := range img.files {
				if strings.HasPrefix(p, dest+"/") && !covered[p] {
					t.Errorf("%s: %s: %s is in the image but not in %s", ref, cmd, p, local)
				}
			}
		}
	}
	return covered
}

func markCovered(covered map[string]bool, img *image, dest string) {
	for p := range img.files {
		if p == dest || strings.HasPrefix(p, dest+"/") {
			covered[p] = true
		}
	}
}

// checkNothingElse: the image has nothing but the covered paths and their parent directories.
func checkNothingElse(t *testing.T, ref string, img *image, covered map[string]bool) {
	t.Helper()
	paths := slices.Collect(maps.Keys(covered))
	for p := range img.files {
		if p != "/" && !covered[p] && !slices.ContainsFunc(paths, func(c string) bool { return strings.HasPrefix(c, p+"/") }) {
			t.Errorf("%s: unexpected %s", ref, p)
		}
	}
}

// compareFile: same content, root-owned (COPY without --chown), and the executable bit of the
// source (modes are 0644/0755, as a checkout with umask 022 has them).
func compareFile(t *testing.T, ref string, img *image, ip, local string) {
	t.Helper()
	fl := img.files[ip]
	if fl == nil {
		t.Errorf("%s: %s missing (source %s)", ref, ip, local)
		return
	}
	fi, err := os.Stat(local)
	must(t, err)
	if fl.hdr.Typeflag != tar.TypeReg || fl.sum != fileSum(t, local) {
		t.Errorf("%s: %s differs from %s (changed since the last make images?)", ref, ip, local)
	}
	wantMode := int64(0o644)
	if fi.Mode()&0o100 != 0 {
		wantMode = 0o755
	}
	if fl.hdr.Mode != wantMode || fl.hdr.Uid != 0 || fl.hdr.Gid != 0 {
		t.Errorf("%s: %s: mode %o owner %d:%d, want %o 0:0", ref, ip, fl.hdr.Mode, fl.hdr.Uid, fl.hdr.Gid, wantMode)
	}
}

func checkFile(t *testing.T, img *image, p string, mode fs.FileMode, owner int) {
	t.Helper()
	fl := img.files[p]
	if fl == nil || fl.hdr.FileInfo().Mode() != mode || fl.hdr.Uid != owner || fl.hdr.Gid != owner {
		t.Errorf("%s: want mode %v owner %d:%d, have %+v", p, mode, owner, owner, fl)
	}
}

// get reads a published image from the test's registry (the host dropped from its name),
// checks its digest against images.txt and indexes its flattened file system.
func (f *fixture) get(t *testing.T, published string) *image {
	t.Helper()
	if img := f.cache[published]; img != nil {
		return img
	}
	_, rest, _ := strings.Cut(published, "/")
	ref, err := name.ParseReference(f.reg+"/"+rest, name.Insecure)
	must(t, err)
	ri, err := remote.Image(ref)
	must(t, err)
	if d, err := ri.Digest(); err != nil || d.String() != f.digests[published] {
		t.Errorf("%s: digest %v (%v) in the registry, %s in images.txt", published, d, err, f.digests[published])
	}
	img := &image{img: ri, files: map[string]*file{}}
	img.cfg, err = ri.ConfigFile()
	must(t, err)
	m, err := ri.Manifest()
	must(t, err)
	for _, l := range m.Layers {
		img.layers = append(img.layers, l.Digest)
	}
	must(t, walkImage(ri, func(h *tar.Header, p string, body io.Reader) error {
		fl := &file{hdr: h}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(body)
			if err != nil {
				return err
			}
			fl.sum = sha256.Sum256(data)
			if strings.HasPrefix(p, "/etc/") && len(data) < 64<<10 {
				fl.data = data
			}
			if e, err := elf.NewFile(bytes.NewReader(data)); err == nil {
				fl.isELF = true
				fl.static = !slices.ContainsFunc(e.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
			}
		}
		img.files[p] = fl
		return nil
	}))
	f.cache[published] = img
	return img
}

// walkImage calls fn for every entry of the image's flattened file system (whiteouts applied
// by mutate.Extract), with absolute, cleaned paths.
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

// extract writes the regular files and directories under the given image paths to dir.
func (img *image) extract(t *testing.T, dir string, prefixes ...string) {
	t.Helper()
	must(t, walkImage(img.img, func(h *tar.Header, p string, body io.Reader) error {
		if !slices.ContainsFunc(prefixes, func(pre string) bool { return p == pre || strings.HasPrefix(p, pre+"/") }) {
			return nil
		}
		target := filepath.Join(dir, filepath.FromSlash(p))
		switch h.Typeflag {
		case tar.TypeDir:
			return os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			data, err := io.ReadAll(body)
			if err == nil {
				err = os.MkdirAll(filepath.Dir(target), 0o755)
			}
			if err == nil {
				err = os.WriteFile(target, data, h.FileInfo().Mode().Perm()|0o600)
			}
			return err
		}
		return nil
	}))
}

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(p)
	must(t, err)
	return sha256.Sum256(data)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
