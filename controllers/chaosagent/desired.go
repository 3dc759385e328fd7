package chaosagent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// The marks an agent leaves on what it changed, in the same request as the change so that a
// crash never loses an original: its name (restore finds its objects by it) and the original.
// Finalizer keeps a deleted agent until it has put back what it changed.
const (
	LabelAgent                 = "blackadder.io/agent"
	AnnotationOriginalReplicas = "blackadder.io/original-replicas"
	AnnotationOriginalData     = "blackadder.io/original-data"
	Finalizer                  = "blackadder.io/restore"
)

// Reasons an action was skipped (the part after "Skipped: ").
const (
	SkipDisruptionBudget = "DisruptionBudget"
	SkipGone             = "Gone"
	SkipImmutable        = "Immutable"
	SkipNoData           = "NoData"
	SkipOriginalTooLarge = "OriginalTooLarge"
	SkipAtLimit          = "AtLimit"
	SkipZeroReplicas     = "ZeroReplicas"
	// SkipOutOfScope is a restore left undone in a namespace the agent may not touch.
	SkipOutOfScope = "OutOfScope"
)

// markChanged records original under annotation and labels obj with the agent. The first
// original is the one to restore, whichever agent changed the object since; a lone original
// without its label (edited by hand) is labelled with this agent, so that someone restores it.
func markChanged(obj *metav1.ObjectMeta, agent, annotation, original string) {
	if _, kept := obj.Annotations[annotation]; !kept {
		metav1.SetMetaDataAnnotation(obj, annotation, original)
		metav1.SetMetaDataLabel(obj, LabelAgent, agent)
	} else if obj.Labels[LabelAgent] == "" {
		metav1.SetMetaDataLabel(obj, LabelAgent, agent)
	}
}

// cancerDeployment returns dep doubled with the original recorded, or why it cannot grow.
func cancerDeployment(dep *appsv1.Deployment, agent string) (out *appsv1.Deployment, from, to int32, skip string) {
	from = replicasOf(dep)
	if reason, _, refused := growable(from); refused {
		return nil, from, from, reason
	}
	to = doubled(from)
	out = dep.DeepCopy()
	markChanged(&out.ObjectMeta, agent, AnnotationOriginalReplicas, strconv.Itoa(int(from)))
	out.Spec.Replicas = &to
	return out, from, to, ""
}

// restoreDeployment returns dep with its original replicas back (if readable) and no marks.
func restoreDeployment(dep *appsv1.Deployment) (*appsv1.Deployment, error) {
	out := dep.DeepCopy()
	raw := out.Annotations[AnnotationOriginalReplicas]
	delete(out.Annotations, AnnotationOriginalReplicas) // the marks go
	delete(out.Labels, LabelAgent)
	n, err := strconv.ParseInt(raw, 10, 32)
	if err != nil || n < 0 {
		return out, fmt.Errorf("annotation %s=%q is not a replica count", AnnotationOriginalReplicas, raw)
	}
	out.Spec.Replicas = ptr.To(int32(n))
	return out, nil
}

// ipsumConfigMap returns cm with every value replaced by lorem ipsum and the original recorded,
// or a skip reason: immutable, no data, or an original too large for the annotations' 256 KiB.
func ipsumConfigMap(cm *corev1.ConfigMap, agent string, rng *rand.Rand) (*corev1.ConfigMap, string) {
	switch {
	case ptr.Deref(cm.Immutable, false):
		return nil, SkipImmutable
	case len(cm.Data) == 0:
		return nil, SkipNoData
	}
	out := cm.DeepCopy()
	var original []byte
	if _, kept := out.Annotations[AnnotationOriginalData]; !kept {
		var err error
		if original, err = json.Marshal(cm.Data); err != nil {
			return nil, SkipNoData
		}
	}
	markChanged(&out.ObjectMeta, agent, AnnotationOriginalData, string(original)) // keeps an existing original
	if apivalidation.ValidateAnnotationsSize(out.Annotations) != nil {
		return nil, SkipOriginalTooLarge
	}
	for _, k := range sets.List(sets.KeySet(out.Data)) { // map order is random; the seeded text must not be
		out.Data[k] = loremParagraph(rng)
	}
	return out, ""
}

// restoreConfigMapPatch returns a JSON merge patch, guarded by the resourceVersion read, that
// puts a ConfigMap's original data back and removes the marks; when the original cannot be read
// it only removes the marks, and an error says why.
func restoreConfigMapPatch(meta metav1.Object) ([]byte, error) {
	raw, has := meta.GetAnnotations()[AnnotationOriginalData]
	var original map[string]string
	var readErr error
	if !has {
		readErr = fmt.Errorf("annotation %s missing", AnnotationOriginalData)
	} else if err := json.Unmarshal([]byte(raw), &original); err != nil {
		readErr = fmt.Errorf("annotation %s is not a JSON object of strings: %w", AnnotationOriginalData, err)
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": meta.GetResourceVersion(),
			"labels":          map[string]any{LabelAgent: nil},
			"annotations":     map[string]any{AnnotationOriginalData: nil},
		},
	}
	if readErr == nil && len(original) > 0 {
		patch["data"] = original
	}
	b, err := json.Marshal(patch)
	return b, cmp.Or(err, readErr)
}

var loremWords = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod
tempor incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation
ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate
velit esse cillum eu fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt
culpa qui officia deserunt mollit anim id est laborum`)

// loremParagraph returns three to six sentences of lorem ipsum chosen with rng.
func loremParagraph(rng *rand.Rand) string {
	var b strings.Builder
	for s := range 3 + rng.IntN(4) {
		if s > 0 {
			b.WriteByte(' ')
		}
		for w := range 5 + rng.IntN(8) {
			word := loremWords[rng.IntN(len(loremWords))]
			if w == 0 {
				word = strings.ToUpper(word[:1]) + word[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(word)
		}
		b.WriteByte('.')
	}
	return b.String()
}
