// Package status is how every controller ends a pass: one deferred status write (Writer),
// conditions stamped with the pass's generation and time (Conditions), the transitions an
// Event is sent for (Began), and the gauge an alert selects a condition by (SetGauge).
// Cluster API's patch helper with WithStatusObservedGeneration is the model.
package status

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Writer ends the passes of one controller. Make it with NewWriter in Setup; Finish is
// the only status write a controller makes (TestOnlyTheWriterWritesStatus).
type Writer[T client.Object] struct {
	client    client.Client
	apiReader client.Reader
	// observedGeneration and memory: NewWriter and WithMemory.
	observedGeneration func(T) *int64
	memory             *Memory[T]
}

// Option configures a Writer.
type Option[T client.Object] func(*Writer[T])

// WithMemory makes the Writer remember each object it wrote (Memory) and start a pass
// whose cache does not show that write yet from the written object: for controllers whose
// own events start a pass right after a status write.
func WithMemory[T client.Object]() Option[T] {
	return func(w *Writer[T]) { w.memory = &Memory[T]{} }
}

// NewWriter returns the Writer of a controller: c writes the status subresource (under the
// controller's field owner), apiReader reads an object again past the cache after a
// conflict, observedGeneration points at the kind's status.observedGeneration.
func NewWriter[T client.Object](c client.Client, apiReader client.Reader, observedGeneration func(T) *int64, opts ...Option[T]) *Writer[T] {
	w := &Writer[T]{client: c, apiReader: apiReader, observedGeneration: observedGeneration}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Latest is obj, or the object this Writer last wrote when the cache that gave obj does
// not show that write yet (only WithMemory; see Memory).
func (w *Writer[T]) Latest(obj T) T {
	if w.memory == nil {
		return obj
	}
	return w.memory.Latest(obj)
}

// Forget drops what the Writer remembers of a deleted object.
func (w *Writer[T]) Forget(key types.NamespacedName) {
	if w.memory != nil {
		w.memory.Forget(key)
	}
}

// Finish ends a pass over obj, from the pass's deferred function:
//
//   - derive sets the status from the status of the object it is given and the pass's own
//     findings. It runs once, and again only after a write conflict, on the object read
//     again past the cache; it must change nothing but the status (and, at most, a gauge
//     that mirrors the derived status, set idempotently, so that it reads the same as the
//     status from the moment the status can be read), and stamp the conditions it sets
//     through Conditions.
//   - When acted is true (the pass acted on the spec fully: by default, it returned no
//     error), status.observedGeneration becomes the generation the pass read, obj's
//     generation now, also when a conflict re-read a newer one (the next pass, woken by
//     the spec change, writes that).
//   - An unchanged status is not written; a changed one is a JSON merge patch of the
//     status subresource carrying the resourceVersion it was computed from (an optimistic
//     lock): a write never replaces a status it has not seen.
//   - An object deleted meanwhile is not an error: nothing is left to report on.
//
// The pass starts from Latest(obj). On return obj holds the status as derived (and written),
// and prev is a copy of the object the status was derived from: comparing the two tells
// what changed (Began), for the pass's Events and metrics.
func (w *Writer[T]) Finish(ctx context.Context, obj T, acted bool, derive func(T)) (prev T, err error) {
	generation := obj.GetGeneration()
	if latest := w.Latest(obj); any(latest) != any(obj) {
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(latest).Elem())
	}
	prev = deepCopy(obj)
	written, err := write(ctx, w.client, w.apiReader, obj, func(x T) {
		prev = deepCopy(x)
		derive(x)
		if acted {
			*w.observedGeneration(x) = generation
		}
	})
	switch {
	case apierrors.IsNotFound(err):
		w.Forget(client.ObjectKeyFromObject(obj))
		return prev, nil
	case err != nil:
		return prev, err
	case written != "" && w.memory != nil:
		w.memory.Wrote(obj)
	}
	return prev, nil
}

// write sets obj's status with setStatus and writes it when it changed, as Finish says; a
// conflict reads obj again through live (past the cache, which was stale) and sets it again,
// retry.DefaultRetry's number of attempts at most. On return obj is the object as last read
// or written; written is the write's resourceVersion ("" when none). Errors are the API
// server's, NotFound included.
func write[T client.Object](ctx context.Context, c client.Client, live client.Reader, obj T,
	setStatus func(T)) (written string, err error) {
	current, reread := obj, false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			// A new object: decoding into a used one keeps what the new JSON leaves out.
			fresh := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
			if err := live.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
				return err
			}
			current = fresh
		}
		reread = true
		base := deepCopy(current)
		setStatus(current)
		if equality.Semantic.DeepEqual(base, current) {
			return nil
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := c.Status().Patch(ctx, current, patch); err != nil {
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

// deepCopy is obj.DeepCopyObject as a T.
func deepCopy[T client.Object](obj T) T { return obj.DeepCopyObject().(T) }
