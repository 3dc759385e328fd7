package registrymirror

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// legacyFieldOwner is the field manager of the children before FieldOwner.
const legacyFieldOwner = "registrymirror"

// ownedByLegacy reports whether legacyFieldOwner manages fields of obj.
func ownedByLegacy(obj metav1.Object) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == legacyFieldOwner })
}

// adoptLegacyFields gives FieldOwner the fields legacyFieldOwner owns on obj, read afresh:
// a forced apply would share a field both set alike, left behind when no longer set.
func (r *Reconciler) adoptLegacyFields(ctx context.Context, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.APIReader.Get(ctx, key, obj); err != nil {
			return err
		}
		entries, legacy, err := adoptLegacyEntries(obj.GetManagedFields())
		if err != nil || !legacy {
			return err
		}
		base := obj.DeepCopyObject().(client.Object)
		obj.SetManagedFields(entries)
		return r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// adoptLegacyEntries gives legacyFieldOwner's entries to FieldOwner (joined or renamed).
func adoptLegacyEntries(entries []metav1.ManagedFieldsEntry) (out []metav1.ManagedFieldsEntry, legacy bool, err error) {
	out = make([]metav1.ManagedFieldsEntry, 0, len(entries))
	for _, e := range entries {
		if e.Manager != legacyFieldOwner {
			out = append(out, *e.DeepCopy())
		}
	}
	for _, e := range entries {
		if e.Manager != legacyFieldOwner {
			continue
		}
		legacy = true
		i := slices.IndexFunc(out, func(o metav1.ManagedFieldsEntry) bool {
			return o.Manager == FieldOwner && o.Operation == e.Operation && o.Subresource == e.Subresource && o.APIVersion == e.APIVersion
		})
		if i < 0 {
			renamed := *e.DeepCopy()
			renamed.Manager = FieldOwner
			out = append(out, renamed)
			continue
		}
		if out[i].FieldsV1, err = unionFields(out[i].FieldsV1, e.FieldsV1); err != nil {
			return nil, false, fmt.Errorf("merging the fields of %s %s: %w", e.Manager, e.Operation, err)
		}
	}
	return out, legacy, nil
}

// unionFields is the set of fields in a or b.
func unionFields(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	union := &fieldpath.Set{}
	for _, f := range []*metav1.FieldsV1{a, b} {
		s := &fieldpath.Set{}
		if f != nil && len(f.GetRawBytes()) > 0 {
			if err := s.FromJSON(bytes.NewReader(f.GetRawBytes())); err != nil {
				return nil, err
			}
		}
		union = union.Union(s)
	}
	raw, err := union.ToJSON()
	if err != nil {
		return nil, err
	}
	return metav1.NewFieldsV1(string(raw)), nil
}
