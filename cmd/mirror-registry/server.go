package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/health"
	"github.com/distribution/distribution/v3/registry/handlers"
	gorhandlers "github.com/gorilla/handlers"
	"github.com/sirupsen/logrus"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/coalesce"
	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// cachePath serves the cache's report (cacheReport as JSON) for the operator, outside /v2/.
const cachePath = "/quartet/cache"

// cacheReport is what GET cachePath answers: the last warm pass, the storage volume's fill
// at the last eviction pass (zero before the first), and the traffic since the start.
type cacheReport struct {
	retention.WarmStatus
	DiskUsedBytes     uint64 `json:"diskUsedBytes"`
	DiskCapacityBytes uint64 `json:"diskCapacityBytes"`
	// The blob pulls served since the registry started, hits and misses.
	retention.TrafficReport
	// The fetches behind the misses since the registry started: each blob fetched once
	// however many requests waited for it.
	coalesce.Stats
}

// cacheHandler answers GET cachePath; c may be nil (no coalescing counts then).
func cacheHandler(w *retention.Warmer, k *retention.Keeper, c *coalesce.Coalescer) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rw.Header().Set("Allow", "GET, HEAD")
			http.Error(rw, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		disk := k.LastDisk()
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Cache-Control", "no-cache")
		rep := cacheReport{WarmStatus: w.Status(), DiskUsedBytes: disk.UsedBytes, DiskCapacityBytes: disk.CapacityBytes}
		if t := k.Records().Traffic(); t != nil {
			rep.TrafficReport = t.Report()
		}
		if c != nil {
			rep.Stats = c.Stats()
		}
		_ = json.NewEncoder(rw).Encode(rep)
	})
}

// defaultRootDirectory is the filesystem driver's own default (storage/driver/filesystem).
const defaultRootDirectory = "/var/lib/registry"

// loadConfig reads the registry configuration as distribution does (REGISTRY_* variables override the file).
func loadConfig(path string) (*configuration.Configuration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := configuration.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return cfg, nil
}

// rootDirectory is where the filesystem storage keeps the cache.
func rootDirectory(cfg *configuration.Configuration) (string, error) {
	if t := cfg.Storage.Type(); t != "filesystem" {
		return "", fmt.Errorf("storage is %q: mirror-registry measures and evicts a filesystem storage only", t)
	}
	if root, ok := cfg.Storage.Parameters()["rootdirectory"]; ok {
		return fmt.Sprint(root), nil
	}
	return defaultRootDirectory, nil
}

// defaultStateFile sits on the cache volume, beside distribution's docker/ tree.
func defaultStateFile(root string) string { return filepath.Join(root, "quartet", "last-use") }

// defaultCoalesceDir holds the blobs being fetched, on the cache volume, sized for blobs.
func defaultCoalesceDir(root string) string { return filepath.Join(root, "quartet", "inflight") }

// prepareConfig turns a proxy-mode configuration into one with use-aware retention and
// returns what it changed, for the log:
//   - proxy.ttl 0: distribution v3.0.0 then creates no expiry scheduler at all (a TTL not
//     positive means "never expire": proxyregistry.go), so only the retention deletes;
//   - the coalescing repository middleware (when coalescer is not nil), then the recording
//     one, outermost: it sees each request as before, and a coalesced miss as a miss;
//   - no storage.cache: the retention deletes through its own storage namespace, and a
//     blob descriptor cache in the served one would keep describing deleted content.
func prepareConfig(cfg *configuration.Configuration, records *retention.Records, coalescer *coalesce.Coalescer) ([]string, error) {
	if cfg.Proxy.RemoteURL == "" {
		return nil, errors.New("proxy.remoteurl is empty: mirror-registry runs a pull-through cache")
	}
	if cfg.HTTP.TLS.Certificate != "" || cfg.HTTP.TLS.LetsEncrypt.CacheFile != "" {
		return nil, errors.New("http.tls is set: mirror-registry serves plain HTTP; terminate TLS in front of it")
	}
	if _, err := rootDirectory(cfg); err != nil {
		return nil, err
	}
	var changed []string
	if cfg.Proxy.TTL == nil || *cfg.Proxy.TTL != 0 {
		was := "unset (7 days)"
		if cfg.Proxy.TTL != nil {
			was = cfg.Proxy.TTL.String()
		}
		changed = append(changed, "proxy.ttl "+was+" -> 0 (expiry by --retention instead)")
	}
	cfg.Proxy.TTL = new(time.Duration)
	if _, ok := cfg.Storage["cache"]; ok {
		delete(cfg.Storage, "cache")
		changed = append(changed, "storage.cache removed")
	}
	if cfg.Middleware == nil {
		cfg.Middleware = map[string][]configuration.Middleware{}
	}
	if coalescer != nil {
		cfg.Middleware["repository"] = append(cfg.Middleware["repository"], coalescer.Middleware())
	}
	cfg.Middleware["repository"] = append(cfg.Middleware["repository"], records.Middleware())
	return changed, nil
}

// newApp builds distribution's application; handlers.NewApp's panic on a bad configuration becomes an error.
func newApp(ctx context.Context, cfg *configuration.Configuration) (app *handlers.App, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("configuring the registry: %v", r)
		}
	}()
	return handlers.NewApp(ctx, cfg), nil
}

// newHandler wraps the app as distribution's registry.NewRegistry does: "/" answers 200
// unless a health check fails, panics become 500s, requests are logged; report answers at
// cachePath. (NewRegistry hides its http.Server, and its Shutdown calls App.Shutdown,
// which dereferences the proxy's nil scheduler when proxy.ttl is 0: proxyregistry.go, Close.)
func newHandler(app *handlers.App, cfg *configuration.Configuration, report http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(cachePath, report)
	mux.Handle("/", app)
	h := panicHandler(health.Handler(alive("/", mux)))
	if !cfg.Log.AccessLog.Disabled {
		h = gorhandlers.CombinedLoggingHandler(os.Stdout, h)
	}
	return h
}

// selfURL is how the registry reaches itself at the listener's address: an unspecified
// address (":5000", "0.0.0.0:5000") is dialled on loopback.
func selfURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

func alive(path string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == path {
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func panicHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if err := recover(); err != nil {
				if err == http.ErrAbortHandler { //nolint:errorlint // compared as net/http does
					panic(err) // a stream broken on purpose (coalesce): net/http closes the connection
				}
				logrus.WithField("panic", fmt.Sprint(err)).Error("Recovered from a panic while serving a request")
				http.Error(w, "internal server error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// configureLogging applies the configuration's log level, format and fields to logrus (distribution's and ours).
func configureLogging(cfg *configuration.Configuration) (logrus.FieldLogger, error) {
	level, err := logrus.ParseLevel(string(cfg.Log.Level))
	if err != nil {
		level = logrus.InfoLevel
	}
	logrus.SetLevel(level)
	switch cfg.Log.Formatter {
	case "", "text":
		logrus.SetFormatter(&logrus.TextFormatter{TimestampFormat: time.RFC3339Nano})
	case "json":
		logrus.SetFormatter(&logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano, DisableHTMLEscape: true})
	default:
		return nil, fmt.Errorf("log.formatter %q: mirror-registry logs as text or json", cfg.Log.Formatter)
	}
	fields := logrus.Fields{"component": "retention"}
	maps.Copy(fields, cfg.Log.Fields)
	return logrus.WithFields(fields), nil
}
