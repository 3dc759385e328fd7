// Package coalesce makes the proxy fetch each uncached blob from the upstream once, however
// many requests ask for it meanwhile, and streams it to all of them as it arrives.
//
// Distribution v3.0.0's proxy blob store fetches a blob once per concurrent request until the
// first download has been committed (registry/proxy/proxyblobstore.go, inflight: "Will return
// the blob from the remote store directly"), so N nodes pulling one uncached image cost the
// upstream up to N copies. Here the first request for a blob the storage does not hold starts
// one fetch, through the proxy blob store itself (so the blob is committed to the storage
// exactly as before), into a temporary file; that request and every later one until the fetch
// ends read the file behind the fetch.
package coalesce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/configuration"
	repositorymiddleware "github.com/distribution/distribution/v3/registry/middleware/repository"
	"github.com/distribution/distribution/v3/registry/storage"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/sirupsen/logrus"
)

// MiddlewareName is the repository middleware that coalesces. In proxy mode the registry
// wraps each request's proxying repository with the configured middlewares
// (registry/handlers/app.go, applyRepoMiddleware), so its Blobs are the proxy blob store.
const MiddlewareName = "quartet-coalesce"

// coalescerOption carries the *Coalescer through the middleware's options (built in Go, never YAML).
const coalescerOption = "coalescer"

// DefaultStallTimeout ends a fetch that received nothing for that long: a fetch outlives the
// requests that wait on it, so a hung upstream would otherwise hold the blob's waiters forever.
const DefaultStallTimeout = 2 * time.Minute

func init() {
	if err := repositorymiddleware.Register(MiddlewareName, newRepository); err != nil {
		panic(err) // registered once, at init: cannot collide
	}
}

// Options configure a Coalescer.
type Options struct {
	// Driver is the storage the proxy caches into: a blob it holds (linked in the repository)
	// is served by the proxy as before.
	Driver storagedriver.StorageDriver
	// TempDir holds the blobs being fetched; emptied by New.
	TempDir string
	// StallTimeout ends a fetch that received nothing for that long (DefaultStallTimeout if 0).
	StallTimeout time.Duration
	Log          logrus.FieldLogger
}

// Coalescer holds the fetches in flight, by repository and digest. A fetch is keyed by
// repository too: the proxy links the blob into the repository that fetched it, and the
// upstream may refuse a blob to one repository that it gives to another.
//
// Memory: flights only, each removed when its fetch ends; a restart loses nothing but the
// fetches in flight (their waiters see a broken stream, their files are removed by New).
type Coalescer struct {
	local        distribution.Namespace
	tempDir      string
	stallTimeout time.Duration
	log          logrus.FieldLogger
	stats        stats

	mu            sync.Mutex
	flights       map[flightKey]*flight
	manifestCalls map[manifestKey]*manifestCall
}

type flightKey struct {
	repo string
	dgst digest.Digest
}

// New returns a Coalescer; it empties opts.TempDir of files left by an earlier process.
func New(ctx context.Context, opts Options) (*Coalescer, error) {
	if opts.Driver == nil || opts.TempDir == "" {
		return nil, errors.New("coalesce: a storage driver and a temporary directory are required")
	}
	local, err := storage.NewRegistry(ctx, opts.Driver)
	if err != nil {
		return nil, fmt.Errorf("coalesce: %w", err)
	}
	if err := os.RemoveAll(opts.TempDir); err != nil {
		return nil, fmt.Errorf("coalesce: emptying %s: %w", opts.TempDir, err)
	}
	if err := os.MkdirAll(opts.TempDir, 0o700); err != nil {
		return nil, fmt.Errorf("coalesce: %w", err)
	}
	return &Coalescer{local: local, tempDir: opts.TempDir,
		stallTimeout: cmp.Or(opts.StallTimeout, DefaultStallTimeout),
		log:          cmp.Or[logrus.FieldLogger](opts.Log, logrus.StandardLogger()),
		flights:      map[flightKey]*flight{}, manifestCalls: map[manifestKey]*manifestCall{}}, nil
}

// Middleware is the configuration entry that makes a registry coalesce through c. It must
// come before the recording middleware (retention), which then sees each request as before.
func (c *Coalescer) Middleware() configuration.Middleware {
	return configuration.Middleware{Name: MiddlewareName, Options: configuration.Parameters{coalescerOption: c}}
}

func newRepository(_ context.Context, repo distribution.Repository, options map[string]interface{}) (distribution.Repository, error) {
	c, ok := options[coalescerOption].(*Coalescer)
	if !ok {
		return nil, fmt.Errorf("%s middleware: option %q is %T, not *Coalescer", MiddlewareName, coalescerOption, options[coalescerOption])
	}
	return &repository{Repository: repo, c: c}, nil
}

type repository struct {
	distribution.Repository
	c *Coalescer
}

func (r *repository) Blobs(ctx context.Context) distribution.BlobStore {
	return &blobs{BlobStore: r.Repository.Blobs(ctx), name: r.Named(), c: r.c}
}

// stored says whether the proxy would serve d from its storage: the blob is linked in the
// repository (the proxy blob store's serveLocal asks the same).
func (c *Coalescer) stored(ctx context.Context, name reference.Named, d digest.Digest) bool {
	repo, err := c.local.Repository(ctx, name)
	if err != nil {
		return false
	}
	_, err = repo.Blobs(ctx).Stat(ctx, d)
	return err == nil
}

// inFlight returns the fetch of d for name if there is one, acquired.
func (c *Coalescer) inFlight(name reference.Named, d digest.Digest) *flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.flights[flightKey{name.Name(), d}]
	if f != nil {
		f.acquire()
	}
	return f
}

// join returns the fetch of d for name, acquired, starting it through fetcher if there is
// none; joined says whether it was already running.
func (c *Coalescer) join(ctx context.Context, fetcher distribution.BlobStore, name reference.Named, d digest.Digest) (f *flight, joined bool, err error) {
	key := flightKey{name.Name(), d}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f = c.flights[key]; f != nil {
		f.acquire()
		return f, true, nil
	}
	file, err := os.CreateTemp(c.tempDir, d.Encoded()+"-*")
	if err != nil {
		return nil, false, err
	}
	f = newFlight(file)
	f.acquire()
	c.flights[key] = f
	go c.fetch(context.WithoutCancel(ctx), fetcher, key, f)
	return f, false, nil
}

// fetch serves the blob from the proxy blob store into f. It outlives the request that
// started it (ctx carries its values, not its cancellation): its waiters and the cache need
// it; only a stall ends it early. Whatever happens, the flight leaves the map before it is
// finished, so a request after a failure starts a new fetch.
func (c *Coalescer) fetch(ctx context.Context, fetcher distribution.BlobStore, key flightKey, f *flight) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stall := time.AfterFunc(c.stallTimeout, cancel)
	defer stall.Stop()
	c.stats.fetchStarted()
	w := &flightWriter{f: f, header: http.Header{}, stall: stall, limit: c.stallTimeout}
	var err error
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/v2/"+key.repo+"/blobs/"+key.dgst.String(), nil)
	if err == nil {
		err = fetcher.ServeBlob(ctx, w, req, key.dgst)
	}
	if err == nil && w.status != 0 && w.status != http.StatusOK {
		err = fmt.Errorf("the fetch answered %d, not 200", w.status)
	}
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("nothing received for %s: %w", c.stallTimeout, err)
	}
	c.mu.Lock()
	delete(c.flights, key)
	c.mu.Unlock()
	f.mu.Lock()
	written := f.written
	f.mu.Unlock()
	c.stats.fetchEnded(written, err != nil)
	log := c.log.WithFields(logrus.Fields{"repository": key.repo, "digest": key.dgst.String(), "bytes": written})
	if err != nil {
		log.WithError(err).Warn("Failed to fetch a blob from the upstream for its waiters")
	} else {
		log.Debug("Fetched a blob from the upstream for its waiters")
	}
	f.finish(err, w.header)
}

// Waiters returns how many requests are reading the fetch of d for repository, if one is in flight.
func (c *Coalescer) Waiters(repository string, d digest.Digest) int {
	c.mu.Lock()
	f := c.flights[flightKey{repository, d}]
	c.mu.Unlock()
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return f.refs
	}
	return f.refs - 1 // the fetch holds one
}
