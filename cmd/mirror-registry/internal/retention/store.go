package retention

import (
	"context"
	"errors"
	"fmt"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/storage"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// contentStore reads and deletes cached content as distribution's proxy expiry does
// (proxyregistry.go, OnBlobExpire): through a storage namespace, links first, then the data (Vacuum).
// The namespace is our own, with deletion enabled, so the served registry keeps deletion
// disabled (clients cannot untag the cache). Neither has a blob descriptor cache (the
// caller strips storage.cache): a cached descriptor of deleted content would make the
// proxy serve an error instead of fetching it again from the upstream.
type contentStore struct {
	ns     distribution.Namespace
	vacuum storage.Vacuum
}

func newContentStore(ctx context.Context, driver storagedriver.StorageDriver) (*contentStore, error) {
	ns, err := storage.NewRegistry(ctx, driver, storage.EnableDelete)
	if err != nil {
		return nil, err
	}
	return &contentStore{ns: ns, vacuum: storage.NewVacuum(ctx, driver)}, nil
}

// scan lists every manifest and blob in storage: each repository's manifest revisions
// (with what they reference) and layer links, and every blob's data, linked or not.
func (s *contentStore) scan(ctx context.Context) ([]Found, error) {
	byDigest := map[digest.Digest]*Found{}
	get := func(d digest.Digest) *Found {
		f, ok := byDigest[d]
		if !ok {
			f = &Found{Digest: d}
			byDigest[d] = f
		}
		return f
	}
	err := s.ns.Blobs().Enumerate(ctx, func(d digest.Digest) error {
		get(d)
		return nil
	})
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("listing blobs: %w", err)
	}
	repos, ok := s.ns.(distribution.RepositoryEnumerator)
	if !ok {
		return nil, errors.New("storage cannot list repositories")
	}
	err = repos.Enumerate(ctx, func(name string) error {
		return s.scanRepository(ctx, name, get)
	})
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("listing repositories: %w", err)
	}
	out := make([]Found, 0, len(byDigest))
	for _, f := range byDigest {
		out = append(out, *f)
	}
	return out, nil
}

func (s *contentStore) scanRepository(ctx context.Context, name string, get func(digest.Digest) *Found) error {
	repo, err := s.repository(ctx, name)
	if err != nil {
		return err
	}
	manifests, err := repo.Manifests(ctx)
	if err != nil {
		return err
	}
	if en, ok := manifests.(distribution.ManifestEnumerator); ok {
		err := en.Enumerate(ctx, func(d digest.Digest) error {
			f := get(d)
			f.Kind = KindManifest
			f.Repos = append(f.Repos, name)
			if f.Refs == nil {
				// A manifest that cannot be read references nothing we know of; its
				// blobs then keep only their own last use.
				if m, err := manifests.Get(ctx, d); err == nil {
					f.Refs = refDigests(m.References())
				}
			}
			return nil
		})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("listing manifests of %s: %w", name, err)
		}
	}
	if en, ok := repo.Blobs(ctx).(distribution.BlobEnumerator); ok {
		err := en.Enumerate(ctx, func(d digest.Digest) error {
			f := get(d)
			f.Repos = append(f.Repos, name)
			return nil
		})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("listing layers of %s: %w", name, err)
		}
	}
	return nil
}

func (s *contentStore) repository(ctx context.Context, name string) (distribution.Repository, error) {
	named, err := reference.WithName(name)
	if err != nil {
		return nil, err
	}
	return s.ns.Repository(ctx, named)
}

func (s *contentStore) size(ctx context.Context, d digest.Digest) (int64, error) {
	desc, err := s.ns.BlobStatter().Stat(ctx, d)
	if err != nil {
		return 0, err
	}
	return desc.Size, nil
}

// cached says whether repo serves d without the upstream (a manifest linked in it, a blob
// linked as its layer); with no repo, whether the blob store holds d's data at all.
func (s *contentStore) cached(ctx context.Context, repo string, d digest.Digest, kind Kind) bool {
	if repo == "" {
		_, err := s.size(ctx, d)
		return err == nil
	}
	r, err := s.repository(ctx, repo)
	if err != nil {
		return false
	}
	if kind == KindManifest {
		ms, err := r.Manifests(ctx)
		if err != nil {
			return false
		}
		ok, err := ms.Exists(ctx, d)
		return err == nil && ok
	}
	_, err = r.Blobs(ctx).Stat(ctx, d)
	return err == nil
}

// taggedAs says whether repo's tag points at d in storage.
func (s *contentStore) taggedAs(ctx context.Context, repo, tag string, d digest.Digest) bool {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return false
	}
	desc, err := r.Tags(ctx).Get(ctx, tag)
	return err == nil && desc.Digest == d
}

// delete removes d from every repository that links it, then its data: tags before a
// manifest's revision link (a tag never points at a missing manifest), links before data
// (a request in between misses the link and fetches from the upstream, rather than finding
// a link to nothing). What is already gone is not an error.
func (s *contentStore) delete(ctx context.Context, e Entry) error {
	var errs []error
	for _, name := range e.Repos {
		if err := s.unlink(ctx, name, e.Digest, e.Kind); err != nil {
			errs = append(errs, fmt.Errorf("%s@%s: %w", name, e.Digest, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := s.vacuum.RemoveBlob(e.Digest.String()); err != nil && !isNotFound(err) {
		return fmt.Errorf("removing data of %s: %w", e.Digest, err)
	}
	return nil
}

func (s *contentStore) unlink(ctx context.Context, name string, d digest.Digest, kind Kind) error {
	repo, err := s.repository(ctx, name)
	if err != nil {
		return err
	}
	if kind == KindManifest {
		tags := repo.Tags(ctx)
		names, err := tags.Lookup(ctx, v1.Descriptor{Digest: d})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("looking up tags: %w", err)
		}
		for _, tag := range names {
			if err := tags.Untag(ctx, tag); err != nil && !isNotFound(err) {
				return fmt.Errorf("untagging %s: %w", tag, err)
			}
		}
		manifests, err := repo.Manifests(ctx)
		if err != nil {
			return err
		}
		if err := manifests.Delete(ctx, d); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting manifest revision: %w", err)
		}
		return nil
	}
	if err := repo.Blobs(ctx).Delete(ctx, d); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting layer link: %w", err)
	}
	return nil
}

func refDigests(descs []v1.Descriptor) []digest.Digest {
	out := make([]digest.Digest, 0, len(descs))
	for _, d := range descs {
		out = append(out, d.Digest)
	}
	return out
}

func isNotFound(err error) bool {
	var pathNotFound storagedriver.PathNotFoundError
	var unknownRevision distribution.ErrManifestUnknownRevision
	return errors.As(err, &pathNotFound) || errors.As(err, &unknownRevision) ||
		errors.Is(err, distribution.ErrBlobUnknown)
}
