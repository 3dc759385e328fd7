// Package testenv starts a real kube-apiserver for a controller package's test suite:
// envtest (etcd and kube-apiserver only; fast, no pods, no garbage collection) or the full
// local cluster (controller-manager, scheduler and kwok, so Deployments get pods that
// become Running and owner references are garbage-collected). Both use the binaries that
// `make controlplane` builds into bin/.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	quartetapi "github.com/quartet-operator/quartet/api"
	"github.com/quartet-operator/quartet/test/localcluster"
)

// Scheme returns a scheme with the built-in kinds and every Quartet API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(quartetapi.AddToScheme(s))
	return s
}

// Mode picks the control plane.
type Mode int

const (
	// Envtest runs etcd and kube-apiserver through controller-runtime's envtest.
	Envtest Mode = iota
	// Full runs the whole local cluster with kwok fake nodes.
	Full
)

// Env is a running API server with the Quartet CRDs installed.
type Env struct {
	Mode   Mode
	Config *rest.Config
	Scheme *runtime.Scheme
	// Client talks to the API server directly (no cache), for arranging and asserting.
	Client client.Client
	// Cluster is the full local cluster (nil in Envtest mode).
	Cluster *localcluster.Cluster
	// Err is why the environment could not start; tests call Require.
	Err  error
	stop func()
}

// SkipIntegration reports whether QUARTET_SKIP_INTEGRATION asks for unit tests only
// (`make test-unit`); `make test` and CI never set it.
func SkipIntegration() bool { return os.Getenv("QUARTET_SKIP_INTEGRATION") != "" }

// Require fails the test when the environment did not start (and skips it under
// QUARTET_SKIP_INTEGRATION).
func (e *Env) Require(t testing.TB) {
	t.Helper()
	if SkipIntegration() {
		t.Skip("QUARTET_SKIP_INTEGRATION set: integration test skipped")
	}
	if e == nil || e.Err != nil {
		t.Fatalf("test API server unavailable: %v", e.Err)
	}
}

// Start starts the requested control plane and installs the CRDs from config/crd/bases.
func Start(mode Mode) *Env {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	e := &Env{Mode: mode, Scheme: Scheme()}
	root, err := localcluster.RepoRoot()
	if err != nil {
		e.Err = err
		return e
	}
	crds := filepath.Join(root, "config", "crd", "bases")
	binDir, kwokDir, err := localcluster.DefaultBinDirs()
	if err != nil {
		e.Err = err
		return e
	}
	switch mode {
	case Envtest:
		te := &envtest.Environment{
			BinaryAssetsDirectory:    binDir,
			CRDDirectoryPaths:        []string{crds},
			ErrorIfCRDPathMissing:    true,
			ControlPlaneStartTimeout: 90 * time.Second,
		}
		cfg, err := te.Start()
		if err != nil {
			// Start may fail after etcd and kube-apiserver are up (installing the CRDs,
			// say): stop them, or they outlive the test binary.
			_ = te.Stop()
			e.Err = fmt.Errorf("envtest: %w", err)
			return e
		}
		e.Config = cfg
		e.stop = func() { _ = te.Stop() }
	case Full:
		dir, err := os.MkdirTemp("", "quartet-cluster-")
		if err != nil {
			e.Err = err
			return e
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		installCRDs := func(cfg *rest.Config) error {
			_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true})
			if err != nil {
				return fmt.Errorf("installing CRDs: %w", err)
			}
			return nil
		}
		c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, BinDir: binDir, KwokDir: kwokDir, Full: true,
			BeforeControllers: installCRDs,
			Log:               func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
		if err != nil {
			e.Err = err
			_ = os.RemoveAll(dir)
			return e
		}
		e.Cluster = c
		e.Config = c.RestConfig()
		e.stop = func() { _ = c.Stop(); _ = os.RemoveAll(dir) }
	}
	e.Config.QPS, e.Config.Burst = 500, 1000
	e.Client, e.Err = client.New(e.Config, client.Options{Scheme: e.Scheme})
	return e
}

// Stop stops the control plane.
func (e *Env) Stop() {
	if e != nil && e.stop != nil {
		e.stop()
	}
}

// RunSuite is the body of a package's TestMain: it starts the control plane, runs the
// tests and stops it, even when tests fail.
//
// A fuzz run starts none: `go test -fuzz` runs only the fuzz target, whose parsers need no
// API server, and re-executes the test binary (and so TestMain) once per fuzz worker; the
// workers are killed at the end of -fuzztime, with no chance to stop a control plane.
func RunSuite(m *testing.M, mode Mode, env **Env) int {
	flag.Parse()
	if fuzzing() {
		*env = &Env{Mode: mode, Err: fmt.Errorf("no control plane while fuzzing")}
		return m.Run()
	}
	if SkipIntegration() {
		*env = &Env{Mode: mode, Err: fmt.Errorf("QUARTET_SKIP_INTEGRATION set")}
		return m.Run()
	}
	*env = Start(mode)
	defer (*env).Stop()
	if (*env).Err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", (*env).Err)
	}
	return m.Run()
}

// fuzzing reports whether the test binary runs a fuzz target (-test.fuzz) or is one of
// its workers (-test.fuzzworker).
func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

// zapLevel keeps test output quiet unless QUARTET_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("QUARTET_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
