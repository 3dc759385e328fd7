package olm

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/realnode"
)

const csvFile = "manifests/quartet.clusterserviceversion.yaml"

// brokenBundle is bundle/ with changes, published as image (in the node's scratch
// registry) and served by a one-bundle catalog.
type brokenBundle struct {
	// image is where the bundle image is (or, for a missing image, is not) pushed.
	image string
	// files replace or add bundle files (path -> content); nil content deletes the file.
	files map[string][]byte
	// push says whether the bundle image is pushed at all.
	push bool
	// renderWhole renders the catalog entry from the unchanged bundle and then drops the
	// deleted files' objects from it (opm validates what it renders).
	renderWhole bool
}

// TestBadInputsNameTheProblem installs three broken bundles, each from its own catalog,
// and checks that OLM's own status names the problem and that the harness reports it
// promptly (not a silent timeout): a bundle image that does not exist, a bundle whose
// CSV owns a CRD it does not contain, and a manager image that crashes.
func TestBadInputsNameTheProblem(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	require.NoError(t, env.DeleteQuartetCRDs(ctx), "the CRD left out below must not be in the cluster already")

	t.Run("bundle image that does not exist", func(t *testing.T) {
		missing := localcluster.ScratchRegistry + "/quartet-operator/quartet-bundle:v0.3.0-missing"
		ns := installBroken(t, "bad-missing-image", brokenBundle{image: missing}, map[string]string{
			// OLM's own verdict comes when the unpack Job's deadline passes (10 minutes by
			// default). The harness must see the pull fail before that: at 45 s, on a machine
			// under a load of 13 to 40, the Job was removed first and the harness had no pod
			// to name; 60 s leaves it a minute for a pull that fails within seconds.
			"operatorframework.io/bundle-unpack-timeout": "60s",
		})
		err := env.WaitCSVSucceeded(ctx, ns, realnode.NewCSV, 3*time.Minute)
		require.Error(t, err)
		t.Logf("harness: %v", err)
		require.Contains(t, err.Error(), missing, "the harness names the image")
		require.Regexp(t, "ErrImagePull|ImagePullBackOff", err.Error())
		requireOLMSays(t, ns, 2*time.Minute, "BundleUnpackFailed")
	})

	t.Run("bundle that lacks a CRD its CSV owns", func(t *testing.T) {
		// opm refuses to render such a bundle, so the catalog entry is rendered from the
		// whole bundle and the CRD dropped from it, as from the image.
		ns := installBroken(t, "bad-no-crd", brokenBundle{
			image: localcluster.ScratchRegistry + "/quartet-operator/quartet-bundle:v0.3.0-no-crd", push: true,
			files: map[string][]byte{"manifests/flant.com_copyrators.yaml": nil}, renderWhole: true,
		}, nil)
		err := env.WaitCSVSucceeded(ctx, ns, realnode.NewCSV, 3*time.Minute)
		require.Error(t, err)
		t.Logf("harness: %v", err)
		require.Contains(t, err.Error(), "RequirementsNotMet")
		require.Contains(t, err.Error(), "CustomResourceDefinition copyrators.flant.com: NotPresent")
		requireOLMSays(t, ns, time.Minute, "copyrators.flant.com")
	})

	t.Run("manager image that crashes", func(t *testing.T) {
		crashing := localcluster.ScratchRegistry + "/quartet-operator/quartet:crash"
		pushCrashingManager(t, crashing)
		csv := bundleCSV(t)
		ns := installBroken(t, "bad-crash", brokenBundle{
			image: localcluster.ScratchRegistry + "/quartet-operator/quartet-bundle:v0.3.0-crash", push: true,
			files: map[string][]byte{csvFile: []byte(strings.ReplaceAll(string(csv), realnode.OperatorImage, crashing))},
		}, nil)
		err := env.WaitCSVSucceeded(ctx, ns, realnode.NewCSV, 3*time.Minute)
		require.Error(t, err)
		t.Logf("harness: %v", err)
		require.Contains(t, err.Error(), "container manager")
		require.Regexp(t, "CrashLoopBackOff|RunContainerError|StartError|exited", err.Error())
		require.Contains(t, err.Error(), "exec format error", "the harness shows why it crashes")
		requireOLMSays(t, ns, time.Minute, "deployment quartet-controller-manager")
	})
}

// TestMissingPermissionFails proves the install test would notice a permission missing
// from the CSV: the same bundle without `create` on ConfigMaps installs and runs, and the
// sample check then fails naming the forbidden request.
func TestMissingPermissionFails(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	ns := installBroken(t, "bad-permission", brokenBundle{
		image: localcluster.ScratchRegistry + "/quartet-operator/quartet-bundle:v0.3.0-no-configmap-create", push: true,
		files: map[string][]byte{csvFile: withoutConfigMapCreate(t, bundleCSV(t))},
	}, nil)
	require.NoError(t, env.WaitCSVSucceeded(ctx, ns, realnode.NewCSV, 3*time.Minute), "a missing permission does not stop the install")
	requireManagerReady(t, ns, realnode.OperatorImage)
	rate := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Sample("operators_v1_exchangerate.yaml", rate, ns))
	require.NoError(t, env.Client.Create(ctx, rate))
	// First the controller's own verdict (it tries once the rate is fetched), then the
	// install test's sample check, which must fail on it: waiting for the failure to be
	// reported instead of for the check's whole timeout to pass.
	require.NoError(t, realnode.WaitFor(ctx, "ExchangeRate "+rate.Name+" reporting ConfigMapWriteFailed", 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			er := &operatorsv1.ExchangeRate{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rate), er); err != nil {
				return false, "", err
			}
			s := fmt.Sprint(er.Status.Conditions)
			return strings.Contains(s, "ConfigMapWriteFailed"), s, nil
		}))
	_, err := env.WaitExchangeRate(ctx, ns, rate.Name, 10*time.Second)
	require.Error(t, err, "the sample check must fail without the permission")
	t.Logf("sample check without `create configmaps`: %v", err)
	require.Contains(t, err.Error(), "forbidden")
	require.Contains(t, err.Error(), "ConfigMapWriteFailed")
}

// withoutConfigMapCreate takes `create` on ConfigMaps out of the CSV's permissions and
// cluster permissions (the namespaced rules live in permissions since the CSV grants only
// cluster-scoped resources cluster-wide), and nothing else: ConfigMaps get a rule of
// their own without it.
func withoutConfigMapCreate(t *testing.T, raw []byte) []byte {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	require.NoError(t, yaml.UnmarshalStrict(raw, csv))
	removed := false
	strip := func(perms []operatorsv1alpha1.StrategyDeploymentPermissions) {
		for i := range perms {
			var rules []rbacv1.PolicyRule
			for _, r := range perms[i].Rules {
				if slices.Contains(r.Resources, "configmaps") && slices.Contains(r.Verbs, "create") {
					removed = true
					others := slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == "configmaps" })
					if len(others) > 0 {
						kept := r.DeepCopy()
						kept.Resources = others
						rules = append(rules, *kept)
					}
					cm := r.DeepCopy()
					cm.Resources = []string{"configmaps"}
					cm.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(s string) bool { return s == "create" })
					rules = append(rules, *cm)
					continue
				}
				rules = append(rules, r)
			}
			perms[i].Rules = rules
		}
	}
	strip(csv.Spec.InstallStrategy.StrategySpec.Permissions)
	strip(csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions)
	require.True(t, removed, "the CSV grants no create on configmaps to take away")
	out, err := yaml.Marshal(csv)
	require.NoError(t, err)
	return out
}

// bundleCSV is bundle/'s CSV as generated.
func bundleCSV(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Root, "bundle", csvFile))
	require.NoError(t, err)
	return b
}

// requireOLMSays waits until OLM's statuses for ns (Subscription, InstallPlan, CSV, as
// DiagnoseInstall prints them) mention want.
func requireOLMSays(t *testing.T, ns string, timeout time.Duration, want string) {
	t.Helper()
	require.NoError(t, realnode.WaitFor(context.Background(), "OLM's status naming "+want, timeout, func(ctx context.Context) (bool, string, error) {
		d := env.DiagnoseInstall(ctx, ns)
		olmPart := d
		if i := strings.Index(d, "\npod "); i >= 0 {
			olmPart = d[:i] // only OLM's own objects, not the pods' problems the harness adds
		}
		return strings.Contains(olmPart, want), d, nil
	}))
	t.Logf("OLM's status in %s:\n%s", ns, env.DiagnoseInstall(context.Background(), ns))
}

// installBroken publishes the broken bundle, serves a catalog holding only it, and
// subscribes to it in a new namespace (OwnNamespace) named after the case. The install is
// removed when the test ends.
func installBroken(t *testing.T, name string, b brokenBundle, ogAnnotations map[string]string) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	bundleDir := filepath.Join(dir, "bundle")
	require.NoError(t, os.CopyFS(bundleDir, os.DirFS(filepath.Join(env.Root, "bundle"))))
	for f, content := range b.files {
		if content == nil {
			require.NoError(t, os.Remove(filepath.Join(bundleDir, f)))
		} else {
			require.NoError(t, os.WriteFile(filepath.Join(bundleDir, f), content, 0o644))
		}
	}
	if b.push {
		pushBundle(t, b.image, b.files)
	}
	catalogName := "catalog-" + name
	renderDir, drop := bundleDir, []string(nil)
	if b.renderWhole {
		renderDir = filepath.Join(env.Root, "bundle")
		for f, content := range b.files {
			if content == nil {
				drop = append(drop, filepath.Join(env.Root, "bundle", f))
			}
		}
	}
	serveCatalog(t, catalogName, renderDir, b.image, drop...)
	ns := name
	require.NoError(t, env.Subscribe(ctx, realnode.Install{Namespace: ns, Targets: []string{ns}, Catalog: catalogName,
		Config: managerConfig(), OperatorGroupAnnotations: ogAnnotations}))
	t.Cleanup(func() {
		if err := env.Uninstall(context.Background(), ns); err != nil {
			t.Logf("uninstalling %s: %v", ns, err)
		}
		_ = env.Client.Delete(context.Background(), &operatorsv1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Name: catalogName, Namespace: realnode.OLMNamespace}})
	})
	return ns
}

// pushBundle writes bundle/'s image with the changed files as a new layer (a deleted file
// as a whiteout) to ref in the node's scratch registry.
func pushBundle(t *testing.T, ref string, files map[string][]byte) {
	t.Helper()
	layerFiles := map[string][]byte{}
	for f, content := range files {
		if content == nil {
			layerFiles[filepath.Join(filepath.Dir(f), ".wh."+filepath.Base(f))] = []byte{}
		} else {
			layerFiles[f] = content
		}
	}
	appendAndPush(t, localcluster.ImageRegistry+"/quartet-operator/quartet-bundle:v0.3.0", ref, layerFiles)
}

// pushCrashingManager publishes the operator image with /manager replaced by a file
// that is not a program: the container fails at every start.
func pushCrashingManager(t *testing.T, ref string) {
	t.Helper()
	appendAndPush(t, localcluster.ImageRegistry+"/quartet-operator/quartet:v0.3.0", ref,
		map[string][]byte{"manager": []byte("this is not a program\n")}, "manager")
}

// tarLayer makes an image layer of files (mode 0644, or 0755 for programs) with GNU tar,
// as make images does; crane.Layer would write them with mode 0.
func tarLayer(t *testing.T, files map[string][]byte, programs ...string) v1.Layer {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for f, content := range files {
		p := filepath.Join(root, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		mode := os.FileMode(0o644)
		if slices.Contains(programs, f) {
			mode = 0o755
		}
		require.NoError(t, os.WriteFile(p, content, mode))
		require.NoError(t, os.Chmod(p, mode))
	}
	tarPath := filepath.Join(dir, "layer.tar")
	out, err := exec.Command("tar", "--format=gnu", "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
		"-C", root, "-cf", tarPath, ".").CombinedOutput()
	require.NoError(t, err, "tar: %s", out)
	layer, err := tarball.LayerFromFile(tarPath)
	require.NoError(t, err)
	return layer
}

func appendAndPush(t *testing.T, from, to string, files map[string][]byte, programs ...string) {
	t.Helper()
	tr, err := env.Cluster.RegistryTransport()
	require.NoError(t, err)
	fromRef, err := name.ParseReference(from)
	require.NoError(t, err)
	toRef, err := name.ParseReference(to)
	require.NoError(t, err)
	base, err := remote.Image(fromRef, remote.WithTransport(tr))
	require.NoError(t, err)
	img, err := mutate.AppendLayers(base, tarLayer(t, files, programs...))
	require.NoError(t, err)
	require.NoError(t, remote.Write(toRef, img, remote.WithTransport(tr)))
	t.Logf("pushed %s (%s plus %d changed files)", to, from, len(files))
}

// withoutBundleObject drops the olm.bundle.object property holding the object named name.
func withoutBundleObject(t *testing.T, props []any, name string) []any {
	t.Helper()
	var out []any
	found := false
	for _, p := range props {
		prop := p.(map[string]any)
		if prop["type"] == "olm.bundle.object" {
			data, err := base64.StdEncoding.DecodeString(prop["value"].(map[string]any)["data"].(string))
			require.NoError(t, err)
			var obj struct{ Metadata struct{ Name string } }
			require.NoError(t, yaml.Unmarshal(data, &obj))
			if obj.Metadata.Name == name {
				found = true
				continue
			}
		}
		out = append(out, p)
	}
	require.True(t, found, "no bundle object %s in the rendered bundle", name)
	return out
}

var catalogPort atomic.Int32

// serveCatalog renders a file-based catalog with the one bundle in bundleDir published as
// image (without the objects of the files drop names), serves it with opm inside the
// node's namespace and points a CatalogSource at it.
func serveCatalog(t *testing.T, name, bundleDir, image string, drop ...string) {
	t.Helper()
	opm := os.Getenv("OPM")
	if opm == "" {
		opm = filepath.Join(env.Root, "bin", "tools", "opm-v1.74.0")
	}
	configs := filepath.Join(t.TempDir(), "configs")
	pkgDir := filepath.Join(configs, realnode.Package)
	require.NoError(t, os.MkdirAll(pkgDir, 0o755))
	pkg, err := os.ReadFile(filepath.Join(env.Root, "catalog", realnode.Package, "package.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(pkgDir, "package.yaml"), pkg, 0o644))
	out, err := exec.Command(opm, "render", bundleDir, "--output=yaml").Output()
	require.NoError(t, err, "opm render %s", bundleDir)
	var bundle map[string]any
	require.NoError(t, yaml.Unmarshal(out, &bundle))
	bundle["image"] = image
	for _, f := range drop {
		dropped, err := os.ReadFile(f)
		require.NoError(t, err)
		var obj struct{ Metadata struct{ Name string } }
		require.NoError(t, yaml.Unmarshal(dropped, &obj))
		bundle["properties"] = withoutBundleObject(t, bundle["properties"].([]any), obj.Metadata.Name)
	}
	renderedBytes, err := yaml.Marshal(bundle)
	require.NoError(t, err)
	rendered := string(renderedBytes)
	var meta struct{ Name string }
	require.NoError(t, yaml.Unmarshal(renderedBytes, &meta))
	require.NoError(t, os.WriteFile(filepath.Join(pkgDir, "bundle.yaml"), []byte(rendered), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(pkgDir, "channel.yaml"), []byte(fmt.Sprintf(
		"schema: olm.channel\npackage: %s\nname: %s\nentries:\n- name: %s\n", realnode.Package, realnode.Channel, meta.Name)), 0o644))

	port := 51000 + int(catalogPort.Add(1))
	cmd := env.Cluster.NodeCommand(context.Background(), opm, "serve", configs, "-p", strconv.Itoa(port),
		"--pprof-addr=", "--termination-log="+filepath.Join(t.TempDir(), "termination.log"))
	logFile, err := os.Create(filepath.Join(t.TempDir(), "opm.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.NoError(t, env.Client.Create(context.Background(), &operatorsv1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: realnode.OLMNamespace},
		Spec: operatorsv1alpha1.CatalogSourceSpec{
			SourceType: operatorsv1alpha1.SourceTypeGrpc, DisplayName: name, Publisher: "Quartet e2e",
			Address: fmt.Sprintf("%s:%d", localcluster.RealNodeIP, port),
		},
	}))
	require.NoError(t, env.WaitCatalogReady(context.Background(), name))
}
