package registrymirror

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// memory is the Reconciler's per-mirror "In-memory state", dropped by forget.
type memory struct {
	mu      sync.Mutex
	mirrors map[types.NamespacedName]*mirrorMemory
}

type mirrorMemory struct {
	// hostPort is the port this process chose for the node agents (0: none), so that two
	// workers never choose one port before either's DaemonSet reaches the child cache.
	hostPort  int32
	heldSince time.Time // when a pass first held back a progress-only status change (zero: none)
	// The last upstream probe serves every mirror of its URL for upstreamCacheTTL, so that
	// many mirrors of one upstream, or frequent passes, do not multiply requests to it.
	probedURL string
	probeErr  error
	probedAt  time.Time
}

const upstreamCacheTTL = 20 * time.Second

// with runs f on key's entry, made if missing, under the lock.
func (mem *memory) with(key types.NamespacedName, f func(*mirrorMemory)) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	f(mem.entry(key))
}

// entry returns key's entry, made if missing; the caller holds mem.mu.
func (mem *memory) entry(key types.NamespacedName) *mirrorMemory {
	if mem.mirrors == nil {
		mem.mirrors = map[types.NamespacedName]*mirrorMemory{}
	}
	if mem.mirrors[key] == nil {
		mem.mirrors[key] = &mirrorMemory{}
	}
	return mem.mirrors[key]
}

func (mem *memory) forget(key types.NamespacedName) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	delete(mem.mirrors, key)
}

// assignPort picks and remembers key's host port; those chosen for others count as held.
func (mem *memory) assignPort(key types.NamespacedName, explicit *int32, current int32, held, requested map[int32]string) (int32, string, error) {
	mem.mu.Lock()
	defer mem.mu.Unlock()
	allHeld := make(map[int32]string, len(held)+len(mem.mirrors))
	maps.Copy(allHeld, held)
	for k, e := range mem.mirrors {
		if k != key && e.hostPort != 0 {
			allHeld[e.hostPort] = k.String()
		}
	}
	port, conflict := pickHostPort(explicit, current, allHeld, requested, hostPortMin, hostPortMax)
	if port == 0 {
		return 0, "", fmt.Errorf("no free host port in %d-%d; set spec.hostPort", hostPortMin, hostPortMax)
	}
	if conflict == "" {
		mem.entry(key).hostPort = port
	}
	return port, conflict, nil
}

// releasePort forgets the port of a mirror without node agents.
func (mem *memory) releasePort(key types.NamespacedName) {
	mem.with(key, func(e *mirrorMemory) { e.hostPort = 0 })
}

// hold notes that a progress-only change is held back, from now unless one already was.
func (mem *memory) hold(key types.NamespacedName, now time.Time) {
	mem.with(key, func(e *mirrorMemory) {
		if e.heldSince.IsZero() {
			e.heldSince = now
		}
	})
}

// heldFor is how long a progress-only change has been held back (0 when none is).
func (mem *memory) heldFor(key types.NamespacedName, now time.Time) (d time.Duration) {
	mem.with(key, func(e *mirrorMemory) {
		if !e.heldSince.IsZero() {
			d = now.Sub(e.heldSince)
		}
	})
	return d
}

func (mem *memory) release(key types.NamespacedName) {
	mem.with(key, func(e *mirrorMemory) { e.heldSince = time.Time{} })
}

// probeUpstream returns url's answer, one a mirror got within upstreamCacheTTL or probe's.
func (mem *memory) probeUpstream(ctx context.Context, key types.NamespacedName, url string, now time.Time,
	probe func(context.Context, string) error) error {
	mem.mu.Lock()
	for _, e := range mem.mirrors {
		if e.probedURL == url && now.Sub(e.probedAt) < upstreamCacheTTL {
			mem.mu.Unlock()
			return e.probeErr
		}
	}
	mem.mu.Unlock()
	err := probe(ctx, url)
	mem.with(key, func(e *mirrorMemory) { e.probedURL, e.probeErr, e.probedAt = url, err, now })
	return err
}
