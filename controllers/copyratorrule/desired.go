package copyratorrule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
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
	// AnnotationCarriedLabels and AnnotationCarriedAnnotations list (comma-separated) the
	// source labels and annotations a copy carries (spec.carryLabels, carryAnnotations),
	// so that those the source or the rule drops later are removed from the copy again,
	// and labels a person put on the copy are left alone.
	AnnotationCarriedLabels      = "copyrator.flant.com/carried-labels"
	AnnotationCarriedAnnotations = "copyrator.flant.com/carried-annotations"
	// cachedHashAnnotation exists only on objects in the copy cache: the hash of the content
	// the copy really has (its body is dropped from the cache to keep memory low). It is
	// never written to the API server: copies are written from desired state only. Its key
	// is not a valid annotation key (the ':'), so the API server never returns it: an object
	// that has it is one stripBody already transformed.
	cachedHashAnnotation = "copyrator.flant.com/cache:content-hash"
	// cachedSizeAnnotation, like cachedHashAnnotation, exists only in the caches: the bytes
	// of content the object carries (contentSize).
	cachedSizeAnnotation = "copyrator.flant.com/cache:content-size"

	// Finalizer lets a rule's copies be cleaned up (or released) before the rule goes.
	Finalizer = "copyrator.flant.com/cleanup"
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

// source is one object a rule copies as the rule's view sees it: the hash and size of the
// content its copies carry, and the labels and annotations they carry.
type source struct {
	Name string
	// UID and Version (resourceVersion) name the version of the source Hash is of.
	UID       types.UID
	Version   string
	Hash      string
	Type      corev1.SecretType
	Immutable bool
	// Size is the bytes of content a copy carries (contentSize).
	Size int64
	// Carried are the source's labels and annotations its copies carry.
	Carried carried
	// Object is the content a copy carries (view.content of the *corev1.ConfigMap or
	// *corev1.Secret read from the API server); nil for a source whose content the pass
	// knew already (sourceWatcher), until loadBodies reads it.
	Object client.Object
}

// view is how a rule sees its sources: the keys its copies carry (spec.keys; every key when
// empty) and the source labels and annotations they carry (spec.carryLabels,
// spec.carryAnnotations).
type view struct {
	keys        []flantv1.CopiedKey
	labels      []string
	annotations []string
	// id names the view's content (its keys) in the content cache: "" when copies carry
	// every key, so that the hash of an unfiltered source is contentHash of the source, as
	// before key filters existed, and no copy is rewritten on upgrade.
	id string
}

// viewOf returns the view of a rule's spec. Copyrator's own label and annotation keys are
// never carried, whatever an older CRD let through.
func viewOf(spec flantv1.CopyratorRuleSpec) view {
	v := view{keys: spec.Keys}
	for _, k := range spec.CarryLabels {
		if !ownMetadataKey(string(k)) {
			v.labels = append(v.labels, string(k))
		}
	}
	for _, k := range spec.CarryAnnotations {
		if !ownMetadataKey(string(k)) && string(k) != lastAppliedAnnotation {
			v.annotations = append(v.annotations, string(k))
		}
	}
	if len(v.keys) > 0 {
		parts := make([]string, 0, len(v.keys))
		for _, k := range v.keys {
			parts = append(parts, k.Key+"="+k.Target())
		}
		v.id = strings.Join(parts, ",")
	}
	return v
}

// lastAppliedAnnotation holds an object's whole last applied content: never carried.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// ownMetadataKey reports whether a label or annotation key is Copyrator's own.
func ownMetadataKey(k string) bool {
	return k == LabelManagedBy || strings.HasPrefix(k, "copyrator.flant.com/")
}

// source returns obj as the view sees it, its carried labels and annotations included.
func (v view) source(obj client.Object) source {
	c := v.content(obj)
	s := sourceMeta(c)
	s.Hash, s.Size, s.Object = contentHash(c), contentSize(c), c
	s.UID, s.Version = obj.GetUID(), obj.GetResourceVersion()
	s.Carried = v.carried(obj)
	return s
}

// content returns the content a copy of obj carries: obj itself when the view keeps every
// key; otherwise a new object with only the view's keys (renamed), whose Secret type is the
// source's only while the kept keys are those the type requires, Opaque otherwise.
func (v view) content(obj client.Object) client.Object {
	if len(v.keys) == 0 {
		return obj
	}
	switch o := obj.(type) {
	case *corev1.Secret:
		data := map[string][]byte{}
		for _, k := range v.keys {
			if b, ok := o.Data[k.Key]; ok {
				data[k.Target()] = b
			}
		}
		typ := o.Type
		if !secretTypeHolds(typ, data) {
			typ = corev1.SecretTypeOpaque
		}
		return &corev1.Secret{ObjectMeta: o.ObjectMeta, Type: typ, Data: data, Immutable: o.Immutable}
	case *corev1.ConfigMap:
		data, bin := map[string]string{}, map[string][]byte{}
		for _, k := range v.keys {
			if s, ok := o.Data[k.Key]; ok {
				data[k.Target()] = s
			}
			if b, ok := o.BinaryData[k.Key]; ok {
				bin[k.Target()] = b
			}
		}
		return &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: data, BinaryData: bin, Immutable: o.Immutable}
	default:
		panic(fmt.Sprintf("view.content: unexpected %T", obj))
	}
}

// secretTypeHolds reports whether a Secret of type t may have exactly these keys: the API
// server refuses a typed Secret without the keys its type requires.
func secretTypeHolds(t corev1.SecretType, data map[string][]byte) bool {
	in := func(k string) bool { _, ok := data[k]; return ok }
	switch t {
	case corev1.SecretTypeTLS:
		return in(corev1.TLSCertKey) && in(corev1.TLSPrivateKeyKey)
	case corev1.SecretTypeDockerConfigJson:
		return in(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeDockercfg:
		return in(corev1.DockerConfigKey)
	case corev1.SecretTypeBasicAuth:
		return in(corev1.BasicAuthUsernameKey) || in(corev1.BasicAuthPasswordKey)
	case corev1.SecretTypeSSHAuth:
		return in(corev1.SSHAuthPrivateKey)
	}
	return true
}

// carried is the labels and annotations of a source its copies carry.
type carried struct {
	Labels      map[string]string
	Annotations map[string]string
}

// carried returns the view's labels and annotations that m has.
func (v view) carried(m metav1.Object) carried {
	pick := func(from map[string]string, keys []string) map[string]string {
		var out map[string]string
		for _, k := range keys {
			if val, ok := from[k]; ok {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = val
			}
		}
		return out
	}
	return carried{Labels: pick(m.GetLabels(), v.labels), Annotations: pick(m.GetAnnotations(), v.annotations)}
}

// fingerprint identifies the carried labels and annotations: "" when there are none (as
// for every copy made without carried metadata).
func (c carried) fingerprint() string {
	if len(c.Labels) == 0 && len(c.Annotations) == 0 {
		return ""
	}
	return carriedFingerprint(c.Labels, c.Annotations, keysOf(c.Labels), keysOf(c.Annotations))
}

// copyCarriedFingerprint is the fingerprint of what a copy carries: the labels and
// annotations its record annotations name, with the values the copy has (a named key the
// copy lacks counts as missing: such a copy is not in sync with any source).
func copyCarriedFingerprint(labels, annotations map[string]string) string {
	lk, ak := recordedKeys(annotations[AnnotationCarriedLabels]), recordedKeys(annotations[AnnotationCarriedAnnotations])
	if len(lk) == 0 && len(ak) == 0 {
		return ""
	}
	return carriedFingerprint(labels, annotations, lk, ak)
}

func carriedFingerprint(labels, annotations map[string]string, lk, ak []string) string {
	h := sha256.New()
	write := func(kind string, m map[string]string, keys []string) {
		for _, k := range keys {
			if v, ok := m[k]; ok {
				fmt.Fprintf(h, "%s\x00%s\x00%d:%s\x00", kind, k, len(v), v)
			} else {
				fmt.Fprintf(h, "%s\x00%s\x01", kind, k)
			}
		}
	}
	write("l", labels, lk)
	write("a", annotations, ak)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// recordedKeys parses a record annotation: keys, comma-separated, returned sorted.
func recordedKeys(v string) []string {
	if v == "" {
		return nil
	}
	keys := strings.Split(v, ",")
	sort.Strings(keys)
	return keys
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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

// copyAnnotations name the source of a copy and the hash of the content it was written
// from, and list the carried labels and annotations (when there are any), besides the
// carried annotations themselves.
func copyAnnotations(rule types.NamespacedName, src source) map[string]string {
	ann := map[string]string{}
	for k, v := range src.Carried.Annotations {
		if !ownMetadataKey(k) {
			ann[k] = v
		}
	}
	ann[AnnotationSource], ann[AnnotationContentHash] = rule.Namespace+"/"+src.Name, src.Hash
	if len(src.Carried.Labels) > 0 {
		ann[AnnotationCarriedLabels] = strings.Join(keysOf(src.Carried.Labels), ",")
	}
	if len(src.Carried.Annotations) > 0 {
		ann[AnnotationCarriedAnnotations] = strings.Join(keysOf(src.Carried.Annotations), ",")
	}
	return ann
}

// desiredCopy builds the copy of src in namespace ns: the content the rule's view keeps
// under the source's name, with Copyrator's labels and annotations. Of the source's own
// labels and annotations a copy carries only those the rule names (carryLabels,
// carryAnnotations); a copy is never a source (it is labelled managed-by copyrator), and
// tool annotations (kubectl, Helm) stay with the source.
func desiredCopy(rule types.NamespacedName, src source, ns string) client.Object {
	labels := copyLabels(rule)
	for k, v := range src.Carried.Labels {
		if !ownMetadataKey(k) {
			labels[k] = v
		}
	}
	meta := metav1.ObjectMeta{
		Name:        src.Name,
		Namespace:   ns,
		Labels:      labels,
		Annotations: copyAnnotations(rule, src),
	}
	// The maps are the copy's own: the client decodes the API server's answer into the
	// object it wrote, and a source's body is shared by the copies written in parallel and
	// remembered for later passes (sourceContents). The byte slices are only read.
	switch o := src.Object.(type) {
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: meta, Type: o.Type, Data: maps.Clone(o.Data), Immutable: immutablePtr(o.Immutable)}
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: meta, Data: maps.Clone(o.Data), BinaryData: maps.Clone(o.BinaryData),
			Immutable: immutablePtr(o.Immutable)}
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

// pointerEscaper escapes a map key for a JSON pointer (RFC 6901). Built once: a Replacer
// builds its tables on first use, which cost more than the patch's other work.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer joins map keys into a JSON pointer (RFC 6901), escaping each.
func pointer(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(pointerEscaper.Replace(p))
	}
	return b.String()
}

// The paths of the ownership tests, the same for every copy.
var (
	pathManagedBy     = pointer("metadata", "labels", LabelManagedBy)
	pathRule          = pointer("metadata", "labels", LabelRule)
	pathRuleNamespace = pointer("metadata", "labels", LabelRuleNamespace)
)

// ownershipTests are JSON patch tests that make a patch fail unless the object still
// carries the rule's labels: a copy taken over (or replaced) by someone else in the
// meantime is never written.
func ownershipTests(rule types.NamespacedName) []jsonPatchOp {
	return []jsonPatchOp{
		{Op: "test", Path: pathManagedBy, Value: ManagedByValue},
		{Op: "test", Path: pathRule, Value: rule.Name},
		{Op: "test", Path: pathRuleNamespace, Value: rule.Namespace},
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
//
// Carried labels and annotations are set; those the copy's record annotations name and
// the desired copy no longer carries are removed (with the record annotations when
// nothing is carried any more). existing is the copy as the cache has it.
func updatePatch(rule types.NamespacedName, desired client.Object, existing *copyState) []byte {
	ops := ownershipTests(rule)
	want := desired.GetAnnotations()
	if existing.HasAnnotations {
		have := existing.Annotations
		for _, k := range keysOf(want) {
			ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "annotations", k), Value: want[k]})
		}
		for _, k := range recordedKeys(have[AnnotationCarriedAnnotations]) {
			if !has(want, k) && has(have, k) && !ownMetadataKey(k) {
				ops = append(ops, jsonPatchOp{Op: "remove", Path: pointer("metadata", "annotations", k)})
			}
		}
		for _, k := range []string{AnnotationCarriedLabels, AnnotationCarriedAnnotations} {
			if !has(want, k) && has(have, k) {
				ops = append(ops, jsonPatchOp{Op: "remove", Path: pointer("metadata", "annotations", k)})
			}
		}
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: want})
	}
	wantLabels := desired.GetLabels()
	for _, k := range keysOf(wantLabels) {
		if !ownMetadataKey(k) && (!has(existing.Labels, k) || existing.Labels[k] != wantLabels[k]) {
			ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "labels", k), Value: wantLabels[k]})
		}
	}
	for _, k := range recordedKeys(existing.Annotations[AnnotationCarriedLabels]) {
		if !has(wantLabels, k) && has(existing.Labels, k) && !ownMetadataKey(k) {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: pointer("metadata", "labels", k)})
		}
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
	for _, k := range []string{AnnotationContentHash, AnnotationCarriedLabels, AnnotationCarriedAnnotations} {
		if has(annotations, k) {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: pointer("metadata", "annotations", k)})
		}
	}
	if annotations == nil {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{AnnotationSource: source}})
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "annotations", AnnotationSource), Value: source})
	}
	return mustJSON(ops)
}

func has(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
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
