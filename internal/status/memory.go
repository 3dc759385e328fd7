package status

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheBehind reports whether cached, an object read from the manager's cache, is older
// than this process's write that the API server answered with resourceVersion written:
// the comparison of Cluster API's WaitForCacheToBeUpToDate (k8s.io/apimachinery's
// resourceversion.CompareResourceVersion; the API server promises that resourceVersions
// of one resource grow). A resourceVersion that does not compare (empty, or not the
// API server's integer form) is never behind: the cache is trusted.
func CacheBehind(cached, written string) bool {
	cmp, err := resourceversion.CompareResourceVersion(cached, written)
	return err == nil && cmp < 0
}

// Memory remembers, per object, the object as the API server returned it from this
// process's last status write. The pass that a status write (or a child's event just after
// it) starts often reads the object from a cache that does not show that write yet;
// computing and comparing the status against the older cached one would write the same
// status again, and its optimistic lock would conflict. Latest gives such a pass the
// written object instead, for exactly as long as the cache is behind by resourceVersion
// (CacheBehind), not for a guessed time.
//
// Written by Writer.Finish (Wrote), read by the next pass's Finish (Latest), dropped with
// the object (Forget). A restart or a leader change loses it: the new process trusts its
// cache, which at worst costs one conflicting write and a re-read. Speed only, never
// correctness: the write's optimistic lock refuses a status computed from an object older
// than the API server's.
type Memory[T client.Object] struct {
	mu      sync.Mutex
	written map[types.NamespacedName]T
}

// Wrote notes obj, as the API server returned it from a status write.
func (m *Memory[T]) Wrote(obj T) {
	copied := deepCopy(obj)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written == nil {
		m.written = map[types.NamespacedName]T{}
	}
	m.written[client.ObjectKeyFromObject(obj)] = copied
}

// Latest returns a copy of the object this process last wrote when cached (of the same
// UID) is older than that write, else cached itself.
func (m *Memory[T]) Latest(cached T) T {
	m.mu.Lock()
	w, ok := m.written[client.ObjectKeyFromObject(cached)]
	m.mu.Unlock()
	if !ok || w.GetUID() != cached.GetUID() || !CacheBehind(cached.GetResourceVersion(), w.GetResourceVersion()) {
		return cached
	}
	return deepCopy(w)
}

// Forget drops a deleted object.
func (m *Memory[T]) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.written, key)
}
