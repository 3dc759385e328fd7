package copyratorrule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// Labels and annotations Copyrator puts on its copies (docs/copyratorrule.md, "What a copy
// is"), and those a namespace may carry.
const (
	// LabelManagedBy (ManagedByValue) and LabelRule, LabelRuleNamespace (the rule) mark every
	// copy; only objects carrying all three naming the rule are ever changed or deleted.
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByValue     = "copyrator"
	LabelRule          = "copyrator.flant.com/rule"
	LabelRuleNamespace = "copyrator.flant.com/rule-namespace"
	// LabelRuleUID is the UID of the rule that wrote the copy: a copy counts (limits, passes,
	// events) only while a rule of that name has that UID; anything else is a look-alike.
	LabelRuleUID = "copyrator.flant.com/rule-uid"
	// LabelIgnore "true" opts a namespace out of every rule; LabelAcceptCopies "true" lets a
	// protected namespace receive copies (only a cluster admin can label namespaces).
	LabelIgnore       = "copyrator.flant.com/ignore"
	LabelAcceptCopies = "copyrator.flant.com/accept-copies"
	// AnnotationSource names the source as namespace/name, AnnotationContentHash the hash of
	// the content the copy was written from.
	AnnotationSource      = "copyrator.flant.com/source"
	AnnotationContentHash = "copyrator.flant.com/content-hash"
	// AnnotationCarriedLabels and AnnotationCarriedAnnotations list the carried keys, so that
	// those dropped later are removed again and a person's own are left alone.
	AnnotationCarriedLabels      = "copyrator.flant.com/carried-labels"
	AnnotationCarriedAnnotations = "copyrator.flant.com/carried-annotations"
	// cachedHashAnnotation and cachedSizeAnnotation exist only in the copy cache (stripBody):
	// the hash and bytes of the content a copy has. The ':' makes the keys invalid: the API
	// server never returns them, and they are never written.
	cachedHashAnnotation = "copyrator.flant.com/cache:content-hash"
	cachedSizeAnnotation = "copyrator.flant.com/cache:content-size"
	// cachedOthersAnnotation "true": the copy has annotations the cache dropped (stripBody).
	cachedOthersAnnotation = "copyrator.flant.com/cache:other-annotations"
	// AnnotationCopiesCarryUID "true" on a rule: its copies carry LabelRuleUID (set when
	// it is created, or after the first full pass that adopted the copies written before
	// the label); from then on an object of its name without its UID is not its copy.
	AnnotationCopiesCarryUID = "copyrator.flant.com/copies-carry-uid"
	// Finalizer lets a rule's copies be cleaned up (or released) before the rule goes.
	Finalizer = "copyrator.flant.com/cleanup"
)

const kindConfigMap, kindSecret = "ConfigMap", "Secret"

func ruleKind(t flantv1.RuleType) string {
	if t.IsSecret() {
		return kindSecret
	}
	return kindConfigMap
}

type copyKey struct{ Kind, Namespace, Name string }

func (k copyKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// source is an object a rule copies, as its view sees it; Object is shared: never changed.
type source struct {
	Name      string
	Hash      string
	Type      corev1.SecretType
	Immutable bool
	Size      int64
	Carried   carried
	Object    client.Object
	Changed   time.Time // when the source last changed (lastChange), for quartet_copyrator_propagation_seconds
}

// lastChange is when obj last changed: its newest managedFields time, else its creation.
func lastChange(obj metav1.Object) time.Time {
	var newest time.Time
	for _, e := range obj.GetManagedFields() {
		if e.Time != nil && e.Time.After(newest) {
			newest = e.Time.Time
		}
	}
	if newest.IsZero() {
		return obj.GetCreationTimestamp().Time
	}
	return newest
}

// view is the keys (all when empty), labels and annotations a rule's copies carry.
type view struct {
	keys        []flantv1.CopiedKey
	labels      []string
	annotations []string
	// id names the view's content (its keys): "" when copies carry every key, so that the
	// hash of an unfiltered source is contentHash of the source, as before key filters
	// existed, and no copy is rewritten on upgrade.
	id string
}

// viewOf returns the view of a rule's spec; Copyrator's own keys are never carried.
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
	ids := make([]string, len(v.keys))
	for i, k := range v.keys {
		ids[i] = k.Key + "=" + k.Target()
	}
	v.id = strings.Join(ids, ",")
	return v
}

// lastAppliedAnnotation holds an object's whole last applied content: never carried.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

func ownMetadataKey(k string) bool {
	return k == LabelManagedBy || strings.HasPrefix(k, "copyrator.flant.com/")
}

func (v view) source(obj client.Object) source {
	c := v.content(obj)
	s := source{Name: obj.GetName(), Hash: contentHash(c), Size: contentSize(c), Object: c, Carried: v.carried(obj)}
	s.Type, s.Immutable = typeOf(c)
	return s
}

// content returns what a copy of obj carries: obj, or a new object with the view's keys
// (renamed), of the source's Secret type while the keys hold what it requires, else Opaque.
func (v view) content(obj client.Object) client.Object {
	if len(v.keys) == 0 {
		return obj
	}
	switch o := obj.(type) {
	case *corev1.Secret:
		data, typ := renamed(o.Data, v.keys), o.Type
		if !secretTypeHolds(typ, data) {
			typ = corev1.SecretTypeOpaque
		}
		return &corev1.Secret{ObjectMeta: o.ObjectMeta, Type: typ, Data: data, Immutable: o.Immutable}
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: o.ObjectMeta, Data: renamed(o.Data, v.keys), BinaryData: renamed(o.BinaryData, v.keys),
			Immutable: o.Immutable}
	default:
		panic(fmt.Sprintf("view.content: unexpected %T", obj))
	}
}

// renamed returns the entries of from that keys name, under their target names.
func renamed[V any](from map[string]V, keys []flantv1.CopiedKey) map[string]V {
	out := map[string]V{}
	for _, k := range keys {
		if v, ok := from[k.Key]; ok {
			out[k.Target()] = v
		}
	}
	return out
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

type carried struct {
	Labels      map[string]string
	Annotations map[string]string
}

func (v view) carried(m metav1.Object) carried {
	return carried{Labels: pick(m.GetLabels(), v.labels), Annotations: pick(m.GetAnnotations(), v.annotations)}
}

// pick returns the entries of from that keys name; nil when none.
func pick(from map[string]string, keys []string) map[string]string {
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

// fingerprint identifies the carried labels and annotations: "" when there are none.
func (c carried) fingerprint() string {
	if len(c.Labels) == 0 && len(c.Annotations) == 0 {
		return ""
	}
	return carriedFingerprint(c.Labels, c.Annotations, keysOf(c.Labels), keysOf(c.Annotations))
}

// copyCarriedFingerprint is the fingerprint of the keys a copy's record annotations name,
// with its values (one it lacks counts as missing: in sync with no source).
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
	slices.Sort(keys)
	return keys
}

func keysOf(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// typeOf returns the Secret type (none for a ConfigMap) and the immutability of obj.
func typeOf(obj client.Object) (corev1.SecretType, bool) {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o.Type, ptrTrue(o.Immutable)
	case *corev1.ConfigMap:
		return "", ptrTrue(o.Immutable)
	}
	return "", false
}

// contentSize is the bytes of content (keys and values) a copy of obj carries.
func contentSize(obj client.Object) int64 {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return int64(entryBytes(o.Data) + entryBytes(o.BinaryData))
	case *corev1.Secret:
		return int64(entryBytes(o.Data))
	}
	return 0
}

func entryBytes[V ~string | ~[]byte](m map[string]V) (n int) {
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
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
	sum := sha256.Sum256(mustJSON(v)) // map keys are sorted: the encoding is canonical
	return hex.EncodeToString(sum[:16])
}

// ruleID is a rule by name and UID: a rule deleted and created again under its name is another.
type ruleID struct {
	types.NamespacedName
	UID types.UID
}

func idOf(rule *flantv1.CopyratorRule) ruleID {
	return ruleID{NamespacedName: client.ObjectKeyFromObject(rule), UID: rule.UID}
}

// ruleLabels select every object labelled with the rule's name, whatever its UID label.
func ruleLabels(rule types.NamespacedName) map[string]string {
	return map[string]string{LabelManagedBy: ManagedByValue, LabelRule: rule.Name, LabelRuleNamespace: rule.Namespace}
}

// copyLabels are Copyrator's labels of the rule's copies: its name and UID.
func copyLabels(rule ruleID) map[string]string {
	l := ruleLabels(rule.NamespacedName)
	if rule.UID != "" {
		l[LabelRuleUID] = string(rule.UID)
	}
	return l
}

// copyAnnotations are Copyrator's annotations of a copy and the ones it carries.
func copyAnnotations(rule ruleID, src source) map[string]string {
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

// desiredCopy builds the copy of src in namespace ns: its content and carried metadata, and
// Copyrator's labels and annotations (so a copy never matches a selector by accident).
func desiredCopy(rule ruleID, src source, ns string) client.Object {
	labels := copyLabels(rule)
	for k, v := range src.Carried.Labels {
		if !ownMetadataKey(k) {
			labels[k] = v
		}
	}
	meta := metav1.ObjectMeta{Name: src.Name, Namespace: ns, Labels: labels, Annotations: copyAnnotations(rule, src)}
	// The maps are the copy's own: the client decodes the API server's answer into the
	// object it wrote, and a source's body is shared by the copies written in parallel and
	// held for later passes (sourceVersion). The byte slices are only read.
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
		return ptr.To(true)
	}
	return nil
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// pointerEscaper escapes a JSON pointer's parts (RFC 6901). Built once: a Replacer's first
// use builds tables that cost more than the rest of a patch.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

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

// ownershipTests make a patch fail unless the object still carries the rule's labels.
func ownershipTests(rule ruleID) []jsonPatchOp {
	return []jsonPatchOp{
		{Op: "test", Path: pathManagedBy, Value: ManagedByValue},
		{Op: "test", Path: pathRule, Value: rule.Name},
		{Op: "test", Path: pathRuleNamespace, Value: rule.Namespace},
	}
}

// updatePatch is the JSON patch that brings existing (the copy as the cache has it) back to
// the desired copy: it replaces data and binary data whole (keys removed from the source,
// or added by a person, go), sets the annotations, the carried labels and immutability,
// removes the carried keys the copy's record annotations name that desired no longer
// carries, and leaves every other label and annotation alone. (Why not Server-Side Apply:
// docs/copyratorrule.md, "How it stays lean and fast".)
func updatePatch(rule ruleID, desired client.Object, existing *copyState) []byte {
	ops := ownershipTests(rule)
	if existing.RuleUID != string(rule.UID) { // a copy written before rule UIDs, adopted
		ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "labels", LabelRuleUID), Value: string(rule.UID)})
	}
	want, have := desired.GetAnnotations(), existing.Annotations
	if existing.HasAnnotations {
		for _, k := range keysOf(want) {
			ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "annotations", k), Value: want[k]})
		}
		ops = append(ops, removals("annotations", carriedKeys(have[AnnotationCarriedAnnotations]), have, want)...)
		ops = append(ops, removals("annotations", []string{AnnotationCarriedLabels, AnnotationCarriedAnnotations}, have, want)...)
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: want})
	}
	wantLabels := desired.GetLabels()
	for _, k := range keysOf(wantLabels) {
		if !ownMetadataKey(k) && (!has(existing.Labels, k) || existing.Labels[k] != wantLabels[k]) {
			ops = append(ops, jsonPatchOp{Op: "add", Path: pointer("metadata", "labels", k), Value: wantLabels[k]})
		}
	}
	ops = append(ops, removals("labels", carriedKeys(have[AnnotationCarriedLabels]), existing.Labels, wantLabels)...)
	switch o := desired.(type) {
	case *corev1.Secret:
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/data", Value: nonNil(o.Data)})
	case *corev1.ConfigMap:
		ops = append(ops,
			jsonPatchOp{Op: "add", Path: "/data", Value: nonNil(o.Data)},
			jsonPatchOp{Op: "add", Path: "/binaryData", Value: nonNil(o.BinaryData)})
	}
	if _, immutable := typeOf(desired); immutable {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/immutable", Value: true})
	}
	return mustJSON(ops)
}

// carriedKeys are the keys a record annotation names, but Copyrator's own (never carried).
func carriedKeys(record string) []string {
	return slices.DeleteFunc(recordedKeys(record), ownMetadataKey)
}

// removals remove from metadata.<field> the keys that have has and want has not.
func removals(field string, keys []string, have, want map[string]string) (ops []jsonPatchOp) {
	for _, k := range keys {
		if has(have, k) && !has(want, k) {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: pointer("metadata", field, k)})
		}
	}
	return ops
}

// releasePatch turns a copy into an ordinary object (deletionPolicy Retain): Copyrator's
// labels and hash go; AnnotationSource is set again, to say where it came from.
func releasePatch(rule ruleID, labels, annotations map[string]string, source string) []byte {
	ownLabels, ownAnnotations := []string{LabelManagedBy, LabelRule, LabelRuleNamespace, LabelRuleUID},
		[]string{AnnotationContentHash, AnnotationCarriedLabels, AnnotationCarriedAnnotations}
	ops := append(ownershipTests(rule), removals("labels", ownLabels, labels, nil)...)
	ops = append(ops, removals("annotations", ownAnnotations, annotations, nil)...)
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

func nonNil[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
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
