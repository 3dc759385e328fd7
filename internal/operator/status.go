package operator

import (
	"context"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WriteStatus is every controller's one status write. setStatus sets obj's status to what
// the pass computed; it must change nothing but the status, and must compute the status
// from the object it is given (its old status) and the pass's own findings, never from
// the object the pass read before: on a conflict it is called again with the object as
// the API server has it now.
//
//   - When setStatus leaves obj as it was (equality.Semantic), nothing is written.
//   - Otherwise the difference is written as a JSON merge patch of the status subresource
//     that carries obj's resourceVersion (an optimistic lock), so a write never replaces a
//     status it has not seen.
//   - On a conflict obj is read again through live (a reader that bypasses the cache: the
//     cache is what was stale) and setStatus applied to it again, retry.DefaultRetry's
//     number of attempts at most.
//
// On return obj is the object as last read or written. written is the resourceVersion the
// API server gave the write ("" when nothing was written), for StatusMemory.Wrote and
// CacheBehind. opts carry the field owner, when the controller names one. Errors are the
// API server's (NotFound included: the caller decides whether a deleted object matters).
func WriteStatus[T client.Object](ctx context.Context, c client.Client, live client.Reader, obj T,
	setStatus func(T), opts ...client.SubResourcePatchOption) (written string, err error) {
	current, reread := obj, false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			fresh := newLike(obj)
			if err := live.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
				return err
			}
			current = fresh
		}
		reread = true
		base, ok := current.DeepCopyObject().(T)
		if !ok {
			panic("DeepCopyObject returned another type")
		}
		setStatus(current)
		if equality.Semantic.DeepEqual(base, current) {
			return nil
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := c.Status().Patch(ctx, current, patch, opts...); err != nil {
			return err
		}
		written = current.GetResourceVersion()
		return nil
	})
	if any(current) != any(obj) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(current).Elem())
	}
	return written, err
}

// newLike returns a new, empty object of obj's type: reading into it leaves no field of an
// older read behind (decoding into a used object keeps what the new JSON leaves out).
func newLike[T client.Object](obj T) T {
	fresh, ok := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	if !ok {
		panic("client.Object is not a pointer to a struct")
	}
	return fresh
}

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

// StatusMemory remembers, per object, the object as the API server returned it from this
// process's last status write (WriteStatus). The pass that a status write (or a child's
// event just after it) starts often reads the object from a cache that does not show that
// write yet; computing and comparing the status against the older cached one would write
// the same status again, and its optimistic lock would conflict. Latest gives such a pass
// the written object instead, for exactly as long as the cache is behind by
// resourceVersion (CacheBehind), not for a guessed time.
//
// Written by the status write of each pass (Wrote), read by the next pass (Latest),
// dropped with the object (Forget). A restart or a leader change loses it: the new
// process trusts its cache, which at worst costs one conflicting write and a re-read.
// Speed only, never correctness: WriteStatus's optimistic lock refuses a write computed
// from an object older than the API server's.
type StatusMemory[T client.Object] struct {
	mu      sync.Mutex
	written map[types.NamespacedName]T
}

// Wrote notes obj, as the API server returned it from a status write.
func (m *StatusMemory[T]) Wrote(obj T) {
	copied, ok := obj.DeepCopyObject().(T)
	if !ok {
		panic("DeepCopyObject returned another type")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written == nil {
		m.written = map[types.NamespacedName]T{}
	}
	m.written[client.ObjectKeyFromObject(obj)] = copied
}

// Latest returns a copy of the object this process last wrote when cached (of the same
// UID) is older than that write, else cached itself.
func (m *StatusMemory[T]) Latest(cached T) T {
	m.mu.Lock()
	w, ok := m.written[client.ObjectKeyFromObject(cached)]
	m.mu.Unlock()
	if !ok || w.GetUID() != cached.GetUID() || !CacheBehind(cached.GetResourceVersion(), w.GetResourceVersion()) {
		return cached
	}
	copied, ok := w.DeepCopyObject().(T)
	if !ok {
		panic("DeepCopyObject returned another type")
	}
	return copied
}

// Forget drops a deleted object.
func (m *StatusMemory[T]) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.written, key)
}
