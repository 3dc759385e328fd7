// Package realnode is the shared plumbing of the end-to-end tests that run on the local
// cluster's real node (test/localcluster with NodeReal): start and stop it, deploy OLM
// from its own release manifests with the images `make images` built, install Quartet
// through a CatalogSource and a Subscription, and say clearly why an install is stuck.
// The tests using it need root, `make node-deps node-tools images olm-tools`; only one
// real node runs at a time, so their packages run with `go test -p 1`.
package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/testenv"
)

// FieldOwner is the server-side apply field manager of everything the tests apply.
const FieldOwner = "quartet-e2e"

// Scheme has the built-in kinds, CRDs, OLM's API and every Quartet API.
func Scheme() *runtime.Scheme {
	s := testenv.Scheme()
	utilruntime.Must(operatorsv1alpha1.AddToScheme(s))
	utilruntime.Must(operatorsv1.AddToScheme(s))
	return s
}

// Env is a running real-node cluster.
type Env struct {
	Cluster   *localcluster.Cluster
	Client    client.Client
	Clientset kubernetes.Interface
	// Root is the repository root.
	Root string
	// Dir holds the cluster (logs in Dir/logs).
	Dir  string
	Logf func(format string, args ...any)
}

// Enabled reports whether the real-node tests were asked for (QUARTET_REAL_NODE=1, set
// by the make targets that run them).
func Enabled() bool { return os.Getenv("QUARTET_REAL_NODE") != "" }

// Start starts a real-node cluster in a fresh folder under /tmp (short: containerd's
// socket path must stay under the unix socket limit).
func Start(ctx context.Context, logf func(string, ...any)) (*Env, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	binDir, kwokDir, err := localcluster.DefaultBinDirs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "qn-")
	if err != nil {
		return nil, err
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, BinDir: binDir, KwokDir: kwokDir, Node: localcluster.NodeReal, Log: logf})
	if err != nil {
		return nil, fmt.Errorf("real node (logs in %s/logs): %w", dir, err)
	}
	cfg := c.RestConfig()
	cl, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return &Env{Cluster: c, Client: cl, Clientset: cs, Root: root, Dir: dir, Logf: logf}, nil
}

// PauseIfAsked waits before a failed run's teardown when QUARTET_E2E_PAUSE_ON_FAILURE is
// a duration (say 10m), so a developer can look at the cluster (the printed KUBECONFIG);
// removing the printed file ends the pause early.
func (e *Env) PauseIfAsked() {
	d, err := time.ParseDuration(os.Getenv("QUARTET_E2E_PAUSE_ON_FAILURE"))
	if err != nil || d <= 0 {
		return
	}
	marker := filepath.Join(e.Dir, "paused")
	_ = os.WriteFile(marker, nil, 0o644)
	e.Logf("PAUSED for %s before teardown: KUBECONFIG=%s kubectl ...; rm %s to continue", d, e.Cluster.Kubeconfig, marker)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(marker); err != nil {
			return
		}
		time.Sleep(time.Second)
	}
}

// Stop stops the cluster and restores the host; the folder is removed unless keep.
func (e *Env) Stop(keep bool) error {
	err := e.Cluster.Stop()
	if keep || err != nil {
		e.Logf("real node folder kept: %s (logs in logs/)", e.Dir)
		return err
	}
	return os.RemoveAll(e.Dir)
}

// ApplyYAML server-side applies every object of a multi-document YAML stream; mutate, when
// set, may change an object or return false to skip it.
func (e *Env) ApplyYAML(ctx context.Context, data []byte, mutate func(*unstructured.Unstructured) bool) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if mutate != nil && !mutate(u) {
			continue
		}
		if err := e.Apply(ctx, u); err != nil {
			return err
		}
	}
}

// Apply server-side applies one object, taking ownership of every field it sets.
func (e *Env) Apply(ctx context.Context, u *unstructured.Unstructured) error {
	if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
	}
	return nil
}

// Failed is returned by a condition that knows waiting longer cannot help.
type Failed struct{ Reason string }

func (f Failed) Error() string { return f.Reason }

// WaitFor polls cond every 200 ms until it reports done, returns an error, or the timeout
// passes; the error then names what was awaited and cond's last detail. A condition
// returns a Failed error to stop waiting at once. (Every half second, the real-node runs
// lost a quarter second on average per wait, and they wait hundreds of times.)
func WaitFor(ctx context.Context, what string, timeout time.Duration, cond func(ctx context.Context) (done bool, detail string, err error)) error {
	var detail, lastErr string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		done, d, err := cond(ctx)
		if _, failed := err.(Failed); failed {
			return false, err
		}
		if d != "" {
			detail = d
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
			return false, nil
		}
		return done, nil
	})
	if lastErr != "" {
		detail = strings.TrimSpace(detail + " (last error: " + lastErr + ")")
	}
	if err == nil {
		return nil
	}
	if f, ok := err.(Failed); ok {
		return fmt.Errorf("%s failed: %s", what, f.Reason)
	}
	return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, detail)
}
