package retention

import (
	"context"
	"fmt"
	"net/http"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/configuration"
	repositorymiddleware "github.com/distribution/distribution/v3/registry/middleware/repository"
	"github.com/opencontainers/go-digest"
)

// MiddlewareName is the repository middleware that records uses: the one hook that sees
// proxy-mode pulls, cache hits included, as the registry wraps every request's (proxying)
// repository with it (registry/handlers/app.go, dispatcher, applyRepoMiddleware). Registry
// middleware wraps only the local storage under the proxy; storage middleware sees driver
// paths, not digests; notifications leave the process.
const MiddlewareName = "quartet-retention"

// recordsOption carries the *Records itself through the middleware's options (built in Go, never YAML).
const recordsOption = "records"

func init() {
	if err := repositorymiddleware.Register(MiddlewareName, newRecordingRepository); err != nil {
		panic(err) // registered once, at init: cannot collide
	}
}

// Middleware is the configuration entry that makes a registry record its uses in r.
func (r *Records) Middleware() configuration.Middleware {
	return configuration.Middleware{Name: MiddlewareName, Options: configuration.Parameters{recordsOption: r}}
}

func newRecordingRepository(_ context.Context, repo distribution.Repository, options map[string]interface{}) (distribution.Repository, error) {
	records, ok := options[recordsOption].(*Records)
	if !ok {
		return nil, fmt.Errorf("%s middleware: option %q is %T, not *Records", MiddlewareName, recordsOption, options[recordsOption])
	}
	return &recordingRepository{Repository: repo, records: records}, nil
}

// recordingRepository records every manifest and blob served successfully. A manifest
// pulled by tag is recorded by digest: the handler resolves the tag, then gets the digest.
type recordingRepository struct {
	distribution.Repository
	records *Records
}

func (r *recordingRepository) Manifests(ctx context.Context, options ...distribution.ManifestServiceOption) (distribution.ManifestService, error) {
	ms, err := r.Repository.Manifests(ctx, options...)
	if err != nil {
		return nil, err
	}
	return &recordingManifests{ManifestService: ms, repo: r.Named().Name(), records: r.records}, nil
}

func (r *recordingRepository) Blobs(ctx context.Context) distribution.BlobStore {
	return &recordingBlobs{BlobStore: r.Repository.Blobs(ctx), repo: r.Named().Name(), records: r.records}
}

type recordingManifests struct {
	distribution.ManifestService
	repo    string
	records *Records
}

func (m *recordingManifests) Get(ctx context.Context, d digest.Digest, options ...distribution.ManifestServiceOption) (distribution.Manifest, error) {
	manifest, err := m.ManifestService.Get(ctx, d, options...)
	if err == nil {
		m.records.UsedManifest(m.repo, d, func() []digest.Digest { return refDigests(manifest.References()) })
	}
	return manifest, err
}

type recordingBlobs struct {
	distribution.BlobStore
	repo    string
	records *Records
}

func (b *recordingBlobs) ServeBlob(ctx context.Context, w http.ResponseWriter, r *http.Request, d digest.Digest) error {
	t := b.records.Traffic()
	if t == nil || r == nil || r.Method != http.MethodGet || r.UserAgent() == WarmerUserAgent {
		err := b.BlobStore.ServeBlob(ctx, w, r, d)
		if err == nil {
			b.records.UsedBlob(b.repo, d)
		}
		return err
	}
	hit := t.stored(ctx, d)
	cw := &countingResponseWriter{ResponseWriter: w}
	err := b.BlobStore.ServeBlob(ctx, cw, r, d)
	if err == nil {
		b.records.UsedBlob(b.repo, d)
		t.served(hit, cw.n)
	}
	return err
}

func (b *recordingBlobs) Get(ctx context.Context, d digest.Digest) ([]byte, error) {
	p, err := b.BlobStore.Get(ctx, d)
	if err == nil {
		b.records.UsedBlob(b.repo, d)
	}
	return p, err
}
