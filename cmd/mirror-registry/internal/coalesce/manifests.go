package coalesce

import (
	"context"

	"github.com/distribution/distribution/v3"
	"github.com/opencontainers/go-digest"
)

// Manifests are small: concurrent Gets of one manifest share one call (singleflight), whose
// result every caller gets whole. Without it the proxy manifest store fetches a manifest it
// does not hold once per request (proxymanifeststore.go, Get).

func (r *repository) Manifests(ctx context.Context, options ...distribution.ManifestServiceOption) (distribution.ManifestService, error) {
	ms, err := r.Repository.Manifests(ctx, options...)
	if err != nil {
		return nil, err
	}
	return &manifests{ManifestService: ms, repo: r.Named().Name(), c: r.c}, nil
}

type manifests struct {
	distribution.ManifestService
	repo string
	c    *Coalescer
}

// manifestKey is one Get: by digest, and by tag when the handler resolved one (the proxy
// then asks the upstream for the tag).
type manifestKey struct {
	repo, tag string
	dgst      digest.Digest
}

// manifestCall is a Get in progress; done is closed when m and err are set.
type manifestCall struct {
	done chan struct{}
	m    distribution.Manifest
	err  error
}

// Get shares the Get of concurrent requests for the same manifest. The shared call runs
// detached from the request that started it (bounded by the stall timeout), so one client
// leaving does not fail the others. Options other than a tag are not shared.
func (m *manifests) Get(ctx context.Context, d digest.Digest, options ...distribution.ManifestServiceOption) (distribution.Manifest, error) {
	key := manifestKey{repo: m.repo, dgst: d}
	for _, o := range options {
		t, ok := o.(distribution.WithTagOption)
		if !ok || key.tag != "" {
			return m.ManifestService.Get(ctx, d, options...)
		}
		key.tag = t.Tag
	}
	m.c.mu.Lock()
	call, joined := m.c.manifestCalls[key]
	if !joined {
		call = &manifestCall{done: make(chan struct{})}
		m.c.manifestCalls[key] = call
		go func() {
			callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.stallTimeout)
			defer cancel()
			call.m, call.err = m.ManifestService.Get(callCtx, d, options...)
			m.c.mu.Lock()
			delete(m.c.manifestCalls, key)
			m.c.mu.Unlock()
			close(call.done)
		}()
	}
	m.c.mu.Unlock()
	if joined {
		m.c.stats.manifestWaiterJoined()
	}
	select {
	case <-call.done:
		return call.m, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
