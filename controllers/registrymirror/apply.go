package registrymirror

import (
	"context"
	"encoding/json"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// fieldOwner is the Server-Side Apply field manager of everything this controller writes.
const fieldOwner = "registrymirror"

// applyChild server-side applies child c's desired fields under the controller's field
// manager, taking them over from other managers. The server's response is written into
// c.desired (see roundTrip); an error is the API server's, for classifyApplyError.
func (r *Reconciler) applyChild(ctx context.Context, c child) error {
	return r.Apply(ctx, c.desired, client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// patchStatus writes status as the mirror's status (a merge patch of the difference).
func (r *Reconciler) patchStatus(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, status mirrorsv1alpha1.RegistryMirrorStatus) error {
	patch := client.MergeFrom(m.DeepCopy())
	m.Status = status
	return r.Status().Patch(ctx, m, patch)
}

// roundTrip copies an apply configuration filled from the server's response into a
// typed object, replacing whatever the object held.
func roundTrip(from any, into client.Object) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(into).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(b, into)
}
