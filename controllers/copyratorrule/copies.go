package copyratorrule

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ruleIndex is the copy cache index from a copy to its rule ("namespace/name").
const ruleIndex = "copyrator.rule"

// stripBody is the transform of the copy cache: it records the hash and the size of the
// object's content in annotations that exist only in the cache and drops the body and
// managed fields, so memory follows the number of objects, not their size. It is
// idempotent, as client-go asks of a transform: an object it already stripped (it carries
// cachedHashAnnotation, which no object from the API server can) is returned as it is.
// (Without that, a second call hashed the stripped, empty body, and every copy looked out
// of sync to the first pass after a manager start: TestRestartWritesNothing.)
func stripBody(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil // a tombstone
	}
	if _, done := obj.GetAnnotations()[cachedHashAnnotation]; done {
		return obj, nil
	}
	hash, size := contentHash(obj), contentSize(obj)
	obj.SetManagedFields(nil)
	ann := make(map[string]string, len(obj.GetAnnotations())+2)
	for k, v := range obj.GetAnnotations() {
		ann[k] = v
	}
	ann[cachedHashAnnotation] = hash
	ann[cachedSizeAnnotation] = strconv.FormatInt(size, 10)
	obj.SetAnnotations(ann)
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	}
	return obj, nil
}

// indexByRule indexes a copy by the rule its labels name.
func indexByRule(obj client.Object) []string {
	if rule, ok := ruleOfCopy(obj); ok {
		return []string{rule.String()}
	}
	return nil
}

// ruleOfCopy returns the rule a copy's labels name.
func ruleOfCopy(obj client.Object) (types.NamespacedName, bool) {
	l := obj.GetLabels()
	if l[LabelManagedBy] != ManagedByValue || l[LabelRule] == "" || l[LabelRuleNamespace] == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: l[LabelRuleNamespace], Name: l[LabelRule]}, true
}

// stateOf turns a cached (stripped) copy into a copyState.
func stateOf(obj client.Object) copyState {
	s := copyState{
		Key:             copyKey{Namespace: obj.GetNamespace(), Name: obj.GetName()},
		UID:             obj.GetUID(),
		ResourceVersion: obj.GetResourceVersion(),
		Source:          obj.GetAnnotations()[AnnotationSource],
		WrittenAs:       obj.GetAnnotations()[AnnotationContentHash],
		Hash:            obj.GetAnnotations()[cachedHashAnnotation],
		HasAnnotations:  hasAnnotationsBesides(obj.GetAnnotations(), cachedHashAnnotation, cachedSizeAnnotation),
		Carried:         copyCarriedFingerprint(obj.GetLabels(), obj.GetAnnotations()),
		Labels:          obj.GetLabels(),
		Annotations:     obj.GetAnnotations(),
	}
	s.Rule, _ = ruleOfCopy(obj)
	s.Size, _ = strconv.ParseInt(obj.GetAnnotations()[cachedSizeAnnotation], 10, 64)
	switch o := obj.(type) {
	case *corev1.Secret:
		s.Key.Kind, s.Type, s.Immutable = kindSecret, o.Type, ptrTrue(o.Immutable)
	case *corev1.ConfigMap:
		s.Key.Kind, s.Immutable = kindConfigMap, ptrTrue(o.Immutable)
	}
	return s
}

// hasAnnotationsBesides reports whether ann has a key other than the cache-only keys.
func hasAnnotationsBesides(ann map[string]string, cacheOnly ...string) bool {
	n := len(ann)
	for _, k := range cacheOnly {
		if _, has := ann[k]; has {
			n--
		}
	}
	return n > 0
}

// copyReader reads copies from the copy cache.
type copyReader struct {
	cache cache.Cache
}

// owned returns the copies labelled with the rule, of both kinds, in the namespaces in
// scope: listed namespace by namespace when the scope names them, otherwise all listed and
// filtered. The cached copies are read in place, not copied: stateOf only reads them.
func (r copyReader) owned(ctx context.Context, rule types.NamespacedName, s scope) ([]copyState, error) {
	var out []copyState
	list := func(opts ...client.ListOption) error {
		opts = append(opts, client.MatchingFields{ruleIndex: rule.String()}, client.UnsafeDisableDeepCopy)
		var secrets corev1.SecretList
		if err := r.cache.List(ctx, &secrets, opts...); err != nil {
			return fmt.Errorf("listing Secret copies: %w", err)
		}
		for i := range secrets.Items {
			if s.covers(secrets.Items[i].Namespace) {
				out = append(out, stateOf(&secrets.Items[i]))
			}
		}
		var cms corev1.ConfigMapList
		if err := r.cache.List(ctx, &cms, opts...); err != nil {
			return fmt.Errorf("listing ConfigMap copies: %w", err)
		}
		for i := range cms.Items {
			if s.covers(cms.Items[i].Namespace) {
				out = append(out, stateOf(&cms.Items[i]))
			}
		}
		return nil
	}
	if s.rest {
		return out, list()
	}
	for ns := range s.namespaces {
		if err := list(client.InNamespace(ns)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// occupied returns the copies of other rules at the keys the rule wants and does not own.
func (r copyReader) occupied(ctx context.Context, rule types.NamespacedName, kind string, targets []string, sources []source, owned []copyState) (map[copyKey]copyState, error) {
	have := make(map[copyKey]bool, len(owned))
	for _, c := range owned {
		have[c.Key] = true
	}
	out := map[copyKey]copyState{}
	for _, ns := range targets {
		for _, src := range sources {
			key := copyKey{Kind: kind, Namespace: ns, Name: src.Name}
			if have[key] {
				continue
			}
			obj := newObject(kind)
			err := r.cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.Name}, obj)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("reading %s from the copy cache: %w", key, err)
			}
			if st := stateOf(obj); st.Rule != rule {
				out[key] = st
			}
		}
	}
	return out, nil
}

// newObject returns an empty object of a copied kind.
func newObject(kind string) client.Object {
	if kind == kindSecret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}
