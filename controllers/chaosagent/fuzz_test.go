package chaosagent

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzRestoreAnnotations feeds arbitrary undo annotations (anyone who can edit a Deployment
// or ConfigMap can write them) to the restore builders: they must never panic, must always
// remove the marks, and must only restore what parses.
func FuzzRestoreAnnotations(f *testing.F) {
	for _, seed := range []string{`{"a":"b"}`, `{}`, `3`, `-1`, `{"a":1}`, `[]`, ``, `null`, `{"k":"v","x":"\u0000"}`, `2147483648`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n", ResourceVersion: "7",
			Labels: map[string]string{LabelAgent: "a"}, Annotations: map[string]string{AnnotationOriginalData: raw}}}
		patch, err := restoreConfigMapPatch(cm)
		var decoded map[string]any
		if jerr := json.Unmarshal(patch, &decoded); jerr != nil {
			t.Fatalf("patch is not JSON: %v", jerr)
		}
		md := decoded["metadata"].(map[string]any)
		if md["labels"].(map[string]any)[LabelAgent] != nil || md["annotations"].(map[string]any)[AnnotationOriginalData] != nil {
			t.Fatalf("patch keeps the marks: %s", patch)
		}
		var original map[string]string
		if err == nil && json.Unmarshal([]byte(raw), &original) != nil {
			t.Fatalf("no error for an unreadable original %q", raw)
		}
		if err != nil && decoded["data"] != nil {
			t.Fatalf("patch restores data from an unreadable original %q", raw)
		}

		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n",
			Labels: map[string]string{LabelAgent: "a"}, Annotations: map[string]string{AnnotationOriginalReplicas: raw}}}
		out, err := restoreDeployment(dep)
		if out.Labels[LabelAgent] != "" || out.Annotations[AnnotationOriginalReplicas] != "" {
			t.Fatalf("restored Deployment keeps the marks")
		}
		if err == nil && (out.Spec.Replicas == nil || *out.Spec.Replicas < 0) {
			t.Fatalf("restored replicas %v from %q", out.Spec.Replicas, raw)
		}
	})
}
