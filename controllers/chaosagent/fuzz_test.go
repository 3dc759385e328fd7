package chaosagent

import (
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
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

// FuzzSchedule feeds arbitrary windows, zones and dates to the schedule: parsing must never
// panic, and a parsed schedule's next change must lie after the instant asked about and
// really change whether rounds may run.
func FuzzSchedule(f *testing.F) {
	f.Add("Europe/Berlin", "09:00", "17:00", "Mon", "2026-12-24", int64(1796000000))
	f.Add("America/New_York", "22:00", "02:00", "Fri", "2026-03-08", int64(1772900000))
	f.Add("Australia/Sydney", "02:30", "24:00", "Sun", "", int64(1791000000))
	f.Add("", "00:00", "00:01", "", "2026-02-30", int64(0))
	f.Add("Local", "24:00", "9:00", "Monday", "x", int64(-1))
	f.Fuzz(func(t *testing.T, zone, start, end, day, date string, unix int64) {
		in := &blackadderv1beta1.ChaosSchedule{TimeZone: zone, Windows: []blackadderv1beta1.TimeWindow{{Start: start, End: end}}}
		if day != "" {
			in.Windows[0].Days = []blackadderv1beta1.Weekday{blackadderv1beta1.Weekday(day)}
		}
		if date != "" {
			in.ExcludedDates = []blackadderv1beta1.Date{blackadderv1beta1.Date(date)}
		}
		s, err := parseSchedule(in)
		if err != nil {
			return
		}
		from := time.Unix(unix%(1<<33), 0)
		next, ok := s.nextChange(from)
		if !ok {
			return
		}
		if !next.After(from) {
			t.Fatalf("next change %s is not after %s", next, from)
		}
		if s.open(next) == s.open(from) {
			t.Fatalf("open(%s) = open(%s) = %v", next, from, s.open(from))
		}
		if s.open(next.Add(-time.Second)) != s.open(from) {
			t.Fatalf("a change before %s", next)
		}
	})
}
