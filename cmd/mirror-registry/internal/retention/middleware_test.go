package retention

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stubRepository serves every blob and one manifest, and fails the rest.
type stubRepository struct {
	distribution.Repository
	name reference.Named
}

func (r stubRepository) Named() reference.Named { return r.name }

func (r stubRepository) Blobs(context.Context) distribution.BlobStore { return stubBlobs{} }

func (r stubRepository) Manifests(context.Context, ...distribution.ManifestServiceOption) (distribution.ManifestService, error) {
	return stubManifests{}, nil
}

type stubBlobs struct{ distribution.BlobStore }

var missing = dg("missing")

func (stubBlobs) ServeBlob(_ context.Context, _ http.ResponseWriter, _ *http.Request, d digest.Digest) error {
	if d == missing {
		return distribution.ErrBlobUnknown
	}
	return nil
}

type stubManifests struct{ distribution.ManifestService }

type stubManifest struct{ distribution.Manifest }

func (stubManifest) References() []v1.Descriptor {
	return []v1.Descriptor{{Digest: dg("config")}, {Digest: dg("layer")}}
}

func (stubManifests) Get(_ context.Context, d digest.Digest, _ ...distribution.ManifestServiceOption) (distribution.Manifest, error) {
	if d != dg("manifest") {
		return nil, errors.New("manifest unknown")
	}
	return stubManifest{}, nil
}

func recordingStub(t testing.TB, records *Records) distribution.Repository {
	t.Helper()
	name, err := reference.WithName("library/app")
	require.NoError(t, err)
	mw := records.Middleware()
	repo, err := newRecordingRepository(context.Background(), stubRepository{name: name}, mw.Options)
	require.NoError(t, err)
	return repo
}

func TestMiddlewareRecordsWhatIsServed(t *testing.T) {
	records := NewRecords(NewFakeClock(at(5)))
	repo := recordingStub(t, records)
	ctx := context.Background()

	require.NoError(t, repo.Blobs(ctx).ServeBlob(ctx, httptest.NewRecorder(), nil, dg("layer")))
	require.Error(t, repo.Blobs(ctx).ServeBlob(ctx, httptest.NewRecorder(), nil, dg("missing")))
	ms, err := repo.Manifests(ctx)
	require.NoError(t, err)
	_, err = ms.Get(ctx, dg("manifest"))
	require.NoError(t, err)
	_, err = ms.Get(ctx, dg("unknown"))
	require.Error(t, err)

	assert.Equal(t, 2, records.Len(), "only what was served")
	m := entryOf(t, records, "manifest")
	assert.Equal(t, KindManifest, m.Kind)
	assert.Equal(t, []digest.Digest{dg("config"), dg("layer")}, m.Refs)
	assert.Equal(t, at(5), entryOf(t, records, "layer").LastUse)
}

func TestMiddlewareNeedsRecords(t *testing.T) {
	_, err := newRecordingRepository(context.Background(), stubRepository{}, map[string]interface{}{})
	assert.ErrorContains(t, err, "not *Records")
}

// BenchmarkMiddlewareServeBlob is what recording adds to one blob request as the registry
// makes it: wrap the request's repository, get its blob store, serve (a stub), record.
func BenchmarkMiddlewareServeBlob(b *testing.B) {
	records := NewRecords(NewFakeClock(t0))
	ds := fillRecords(records, 10000)
	name, err := reference.WithName("team-1/app-1")
	require.NoError(b, err)
	options := records.Middleware().Options
	ctx := context.Background()
	w := httptest.NewRecorder()
	b.ReportAllocs()
	i := 0
	var stub distribution.Repository = stubRepository{name: name}
	for b.Loop() {
		repo, _ := newRecordingRepository(ctx, stub, options)
		_ = repo.Blobs(ctx).ServeBlob(ctx, w, nil, ds[i%len(ds)])
		i++
	}
}
