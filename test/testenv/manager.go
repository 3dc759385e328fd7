package testenv

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quartet-operator/quartet/internal/manager"
	"github.com/quartet-operator/quartet/internal/scope"
)

// StartManager runs a manager configured like main.go (manager.Options: the same
// cache, WATCH_NAMESPACE scoping and uncached Secrets), with metrics and probes off, until
// the test ends; setup registers the controller under test. modify, when given, adjusts the
// options first (a test of a cache broader than the watch, say). It returns an idempotent
// stop function that fails the test if the manager stopped with an error.
func StartManager(t testing.TB, cfg *rest.Config, shared scope.Namespaces,
	setup func(ctrl.Manager, scope.Namespaces) error, modify ...func(*ctrl.Options)) (stop func()) {
	t.Helper()
	opts := manager.Options(Scheme(), shared)
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	// Tests start several managers with the same controller names in one process.
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	for _, m := range modify {
		m(&opts)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	if err := setup(mgr, shared); err != nil {
		t.Fatalf("setting up the controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager stopped with an error: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatalf("manager caches did not sync")
	}
	return stop
}
