// Command mirror-registry is CNCF distribution v3.0.0 in proxy mode with retention by use:
// content pulled within --retention stays however long ago it was first fetched, pinned
// digests stay always, and above --max-disk-percent the least recently pulled goes first
// (nothing pulled within --disk-eviction-min-age). See README.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // on the debug address only, as distribution's registry command
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/distribution/distribution/v3/registry/listener"
	"github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	"github.com/docker/go-metrics"
	"github.com/sirupsen/logrus"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/coalesce"
	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// defaultDrainTimeout bounds the graceful shutdown when http.draintimeout is not set;
// it stays under Kubernetes' default 30 s grace period so the state file is saved.
const defaultDrainTimeout = 20 * time.Second

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "mirror-registry:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	opts, err := parseOptions(args, os.Stderr)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(opts.configPath)
	if err != nil {
		return err
	}
	log, err := configureLogging(cfg)
	if err != nil {
		return err
	}
	root, err := rootDirectory(cfg)
	if err != nil {
		return err
	}
	opts.stateFile = cmp.Or(opts.stateFile, defaultStateFile(root))

	driver, err := filesystem.FromParameters(cfg.Storage.Parameters())
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	keeper, err := retention.New(context.Background(), driver, retention.Options{
		Retention:          opts.retention,
		MaxDiskPercent:     opts.maxDiskPercent,
		DiskEvictionMinAge: opts.diskMinAge,
		PinnedFile:         opts.pinnedFile,
		StateFile:          opts.stateFile,
		Clock:              retention.RealClock{},
		DiskUsage:          func() (retention.DiskUsage, error) { return retention.StatFS(root) },
		Log:                log,
	})
	if err != nil {
		return err
	}
	coalescer, err := coalesce.New(context.Background(), coalesce.Options{Driver: driver, TempDir: defaultCoalesceDir(root), Log: log})
	if err != nil {
		return err
	}
	changed, err := prepareConfig(cfg, keeper.Records(), coalescer)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		log.WithField("changes", strings.Join(changed, "; ")).Info("Adapted the registry configuration for retention by use")
	}
	app, err := newApp(context.Background(), cfg)
	if err != nil {
		return err
	}
	app.RegisterHealthChecks()
	serveDebug(cfg, log)
	return serve(cfg, opts, app, keeper, coalescer, log)
}

// serve serves the mirror beside the keeper and the warmer (the coalescer's counts in the
// cache report); on SIGINT or SIGTERM it drains connections (http.drainTimeout) before it
// stops them.
func serve(cfg *configuration.Configuration, opts options, app *handlers.App, keeper *retention.Keeper, coalescer *coalesce.Coalescer, log logrus.FieldLogger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := listener.NewListener(cfg.HTTP.Net, cfg.HTTP.Addr)
	if err != nil {
		return err
	}
	warmer := &retention.Warmer{BaseURL: selfURL(ln.Addr()), Client: &http.Client{}, Platforms: opts.warmPlatforms,
		Keeper: keeper, Clock: retention.RealClock{}, Log: log}
	srv := &http.Server{Handler: newHandler(app, cfg, cacheHandler(warmer, keeper, coalescer)), ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.WithFields(logrus.Fields{"addr": ln.Addr().String(), "upstream": cfg.Proxy.RemoteURL, "retention": opts.retention.String(),
		"maxDiskPercent": opts.maxDiskPercent, "diskEvictionMinAge": opts.diskMinAge.String(), "pinnedFile": opts.pinnedFile, "stateFile": opts.stateFile,
		"warmInterval": opts.warmInterval.String()}).Info("Serving the mirror")

	// The warmer stops before the keeper, whose last save then holds the warmer's uses.
	var keeperDone, warmerDone sync.WaitGroup
	keeperCtx, stopKeeper := context.WithCancel(context.Background())
	keeperDone.Go(func() { keeper.Run(keeperCtx, opts.evictionInterval, opts.saveInterval) })
	warmCtx, stopWarmer := context.WithCancel(context.Background())
	if opts.warmInterval > 0 && opts.pinnedFile != "" {
		warmerDone.Go(func() { warmer.Run(warmCtx, opts.warmInterval) })
	}

	select {
	case err = <-served:
	case <-ctx.Done():
		stopWarmer() // its requests would hold the drain
		drain := cmp.Or(cfg.HTTP.DrainTimeout, defaultDrainTimeout)
		log.WithField("drainTimeout", drain.String()).Info("Stopping: draining connections")
		shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
		err = srv.Shutdown(shutdownCtx)
		cancel()
	}
	// App.Shutdown is not called: it would dereference a nil scheduler (see newHandler).
	stopWarmer()
	warmerDone.Wait()
	stopKeeper()
	keeperDone.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// serveDebug serves distribution's debug endpoints (/debug/health, /debug/vars, metrics) as its registry command does.
func serveDebug(cfg *configuration.Configuration, log logrus.FieldLogger) {
	if cfg.HTTP.Debug.Addr == "" {
		return
	}
	if cfg.HTTP.Debug.Prometheus.Enabled {
		http.Handle(cmp.Or(cfg.HTTP.Debug.Prometheus.Path, "/metrics"), metrics.Handler())
	}
	go func() {
		log.WithField("addr", cfg.HTTP.Debug.Addr).Info("Serving debug endpoints")
		srv := &http.Server{Addr: cfg.HTTP.Debug.Addr, ReadHeaderTimeout: time.Minute}
		if err := srv.ListenAndServe(); err != nil {
			log.WithError(err).Error("Debug server stopped")
		}
	}()
}
