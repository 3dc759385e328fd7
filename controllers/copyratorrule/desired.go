package copyratorrule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// Labels and annotations Copyrator puts on its copies, and the namespace opt-out label.
const (
	// LabelManagedBy marks every copy; only objects carrying it (with the rule labels below
	// naming the rule) are ever changed or deleted.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value on copies.
	ManagedByValue = "copyrator"
	// LabelRule names the rule that made a copy.
	LabelRule = "copyrator.flant.com/rule"
	// LabelRuleNamespace names the namespace of that rule (the source namespace).
	LabelRuleNamespace = "copyrator.flant.com/rule-namespace"
	// LabelIgnore on a namespace with value "true" opts the namespace out of every rule.
	LabelIgnore = "copyrator.flant.com/ignore"
	// LabelAcceptCopies on a protected namespace with value "true" lets it receive copies
	// (from rules whose ServiceAccount RBAC allows there). Only a cluster admin can label
	// namespaces.
	LabelAcceptCopies = "copyrator.flant.com/accept-copies"
	// AnnotationSource names the source object as namespace/name.
	AnnotationSource = "copyrator.flant.com/source"
	// AnnotationContentHash is the hash of the source content the copy was written from.
	AnnotationContentHash = "copyrator.flant.com/content-hash"
	// cachedHashAnnotation exists only on objects in the copy cache: the hash of the content
	// the copy really has (its body is dropped from the cache to keep memory low). It is
	// never written to the API server: copies are written from desired state only.
	cachedHashAnnotation = "copyrator.flant.com/cached-content-hash"
	// cachedSizeAnnotation, like cachedHashAnnotation, exists only in the caches: the bytes
	// of content the object carries (contentSize).
	cachedSizeAnnotation = "copyrator.flant.com/cached-content-size"

	// Finalizer lets a rule's copies be cleaned up (or released) before the rule goes.
	Finalizer = "copyrator.flant.com/cleanup"
	// FieldOwner is the field manager of every write.
	FieldOwner = "copyrator"
)

// Kinds of copied objects.
const (
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"
)

// ruleKind returns the Kind a rule copies.
func ruleKind(t flantv1.RuleType) string {
	if t.IsSecret() {
		return kindSecret
	}
	return kindConfigMap
}

// copyKey names one object of a copied kind.
type copyKey struct {
	Kind      string
	Namespace string
	Name      string
}

func (k copyKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// source is one object a rule copies, with the hash and size of its content.
type source struct {
	Name      string
	Hash      string
	Type      corev1.SecretType
	Immutable bool
	// Size is the bytes of content a copy carries (contentSize).
	Size int64
	// Object is the whole *corev1.ConfigMap or *corev1.Secret as read from the API server;
	// nil for a source whose content the pass knew already (sourceWatcher), until
	// loadBodies reads it.
	Object client.Object
}

// newSource wraps a whole source object and hashes its content.
func newSource(obj client.Object) source {
	s := sourceMeta(obj)
	s.Hash, s.Size, s.Object = contentHash(obj), contentSize(obj), obj
	return s
}

func sourceMeta(obj client.Object) source {
	s := source{Name: obj.GetName()}
	switch o := obj.(type) {
	case *corev1.Secret:
		s.Type, s.Immutable = o.Type, ptrTrue(o.Immutable)
	case *corev1.ConfigMap:
		s.Immutable = ptrTrue(o.Immutable)
	}
	return s
}

// contentSize is the bytes of content a copy of obj carries: its keys and values.
func contentSize(obj client.Object) int64 {
	var n int
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		for k, v := range o.Data {
			n += len(k) + len(v)
		}
		for k, v := range o.BinaryData {
			n += len(k) + len(v)
		}
	case *corev1.Secret:
		for k, v := range o.Data {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// contentHash hashes what a copy must reproduce: data, binary data, Secret type and
// immutability. Empty and missing maps hash alike.
func contentHash(obj client.Object) string {
	var v any
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		v = struct {
			Data       map[string]string `json:"d,omitempty"`
			BinaryData map[string][]byte `json:"b,omitempty"`
			Immutable  bool              `json:"i,omitempty"`
		}{o.Data, o.BinaryData, ptrTrue(o.Immutable)}
	case *corev1.Secret:
		v = struct {
			Type      corev1.SecretType `json:"t,omitempty"`
			Data      map[string][]byte `json:"d,omitempty"`
			Immutable bool              `json:"i,omitempty"`
		}{o.Type, o.Data, ptrTrue(o.Immutable)}
	default:
		panic(fmt.Sprintf("contentHash: unexpected %T", obj))
	}
	b, err := json.Marshal(v) // map keys are sorted: the encoding is canonical
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// copyLabels are the labels of every copy made by the rule.
func copyLabels(rule types.NamespacedName) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelRule: rule.Name, LabelRuleNamespace: rule.Namespace}
}

// copyAnnotations name the source of a copy and the hash of the content it was written from.
func copyAnnotations(rule types.NamespacedName, src source) map[string]string {
	return map[string]string{AnnotationSource: rule.Namespace + "/" + src.Name, AnnotationContentHash: src.Hash}
}

// desiredCopy builds the copy of src in namespace ns: the source's content under the
// source's name, with Copyrator's labels and annotations. The source's own labels and
// annotations are not copied, so a copy never matches a rule's selector by accident and
// tool annotations (kubectl, Helm) stay with the source.
func desiredCopy(rule types.NamespacedName, src source, ns string) client.Object {
	meta := metav1.ObjectMeta{
		Name:        src.Name,
		Namespace:   ns,
		Labels:      copyLabels(rule),
		Annotations: copyAnnotations(rule, src),
	}
	switch o := src.Object.(type) {
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: meta, Type: o.Type, Data: o.Data, Immutable: immutablePtr(o.Immutable)}
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: meta, Data: o.Data, BinaryData: o.BinaryData, Immutable: immutablePtr(o.Immutable)}
	default:
		panic(fmt.Sprintf("desiredCopy: unexpected %T", src.Object))
	}
}

// immutablePtr keeps only a true immutability flag, so copies of mutable sources carry no field.
func immutablePtr(b *bool) *bool {
	if ptrTrue(b) {
		t := true
		return &t
	}
	return nil
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// pointer escapes a map key for a JSON pointer (RFC 6901).
func pointer(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

// ownershipTests are JSON patch tests that make a patch fail unless the object still
// carries the rule's labels: a copy taken over (or replaced) by someone else in the
// meantime is never written.
func ownershipTests(rule types.NamespacedName) []jsonPatchOp {
	return []jsonPatchOp{
		{Op: "test", Path: pointer("metadata", "labels", LabelManagedBy), Value: ManagedByValue},
		{Op: "test", Path: pointer("metadata", "labels", LabelRule), Value: rule.Name},
		{Op: "test", Path: pointer("metadata", "labels", LabelRuleNamespace), Value: rule.Namespace},
	}
}

// updatePatch is the JSON patch that brings an existing copy back to the desired copy:
// it replaces data and binary data whole (so keys removed from the source, or added by a
// person, go away), sets the annotations and immutability, and leaves every other label
// and annotation alone. hasAnnotations says whether the copy has an annotations map.
//
// Why not Server-Side Apply: a copy is created with POST (the only write that fails
// atomically when someone else's object already has the name), so its fields belong to an
// Update entry of the field manager; a later apply cannot remove keys it never applied, and
// keys a person adds belong to them. Replacing the maps with one guarded patch is exact.
func updatePatch(rule types.NamespacedName, desired client.Object, hasAnnotations bool) []byte {
	ops := ownershipTests(rule)
	if hasAnnotations {
		for _, k := range []string{AnnotationSource, AnnotationContentHash} {
			ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "annotations", k), Value: desired.GetAnnotations()[k]})
		}
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: desired.GetAnnotations()})
	}
	switch o := desired.(type) {
	case *corev1.Secret:
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/data", Value: nonNilBytes(o.Data)})
		if ptrTrue(o.Immutable) {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/immutable", Value: true})
		}
	case *corev1.ConfigMap:
		ops = append(ops,
			jsonPatchOp{Op: "add", Path: "/data", Value: nonNilStrings(o.Data)},
			jsonPatchOp{Op: "add", Path: "/binaryData", Value: nonNilBytes(o.BinaryData)})
		if ptrTrue(o.Immutable) {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/immutable", Value: true})
		}
	}
	return mustJSON(ops)
}

// releasePatch is the JSON patch that turns a copy into an ordinary object when its rule
// is deleted with deletionPolicy Retain: Copyrator's labels and its content hash go, the
// content stays, and so does AnnotationSource (set again in case someone removed it): a
// released copy still says where it came from. annotations are the copy's current ones.
func releasePatch(rule types.NamespacedName, annotations map[string]string, source string) []byte {
	ops := ownershipTests(rule)
	for _, k := range []string{LabelManagedBy, LabelRule, LabelRuleNamespace} {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: pointer("metadata", "labels", k)})
	}
	if _, ok := annotations[AnnotationContentHash]; ok {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: pointer("metadata", "annotations", AnnotationContentHash)})
	}
	if annotations == nil {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{AnnotationSource: source}})
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "annotations", AnnotationSource), Value: source})
	}
	return mustJSON(ops)
}

func nonNilBytes(m map[string][]byte) map[string][]byte {
	if m == nil {
		return map[string][]byte{}
	}
	return m
}

func nonNilStrings(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// notCopies selects objects that are not Copyrator's copies (a copy is never a source).
var notCopies = func() labels.Selector {
	r, err := labels.NewRequirement(LabelManagedBy, selection.NotEquals, []string{ManagedByValue})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}()

// sourceSelector picks a rule's sources: the rule's selector, excluding Copyrator's own copies.
func sourceSelector(rule *flantv1.CopyratorRule) (labels.Selector, error) {
	sel, err := labels.ValidatedSelectorFromSet(rule.Spec.SelectorLabels())
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	reqs, _ := notCopies.Requirements()
	return sel.Add(reqs...), nil
}
