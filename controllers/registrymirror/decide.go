package registrymirror

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// childAction is what a pass does with one child, given what the API server holds.
type childAction int

const (
	childCreate   childAction = iota // no object of the name: apply creates it
	childUpdate                      // the mirror's object differs: apply updates it
	childUpToDate                    // it has every field the operator sets: no write
	childForeign                     // the mirror does not control it: reported, left alone
	childRevert                      // others changed what it runs or reaches (drift): replaced, then applied
)

// decideChild chooses what to do with child c of mirror m; exists: c.live was read.
func decideChild(m *mirrorsv1alpha1.RegistryMirror, c child, exists bool) childAction {
	switch {
	case !exists:
		return childCreate
	case !metav1.IsControlledBy(c.live, m):
		return childForeign
	case len(drift(c)) > 0:
		return childRevert
	case !needsApply(c.desired, c.live):
		return childUpToDate
	default:
		return childUpdate
	}
}

// drift names what others added to a live child that an apply would keep but that changes
// what it serves: a pod template's environment (REGISTRY_*), host namespaces, a selector.
func drift(c child) []string {
	var out []string
	var template *corev1.PodTemplateSpec
	switch live := c.live.(type) {
	case *appsv1.StatefulSet:
		template = &live.Spec.Template
	case *appsv1.DaemonSet:
		template = &live.Spec.Template
	case *corev1.Service:
		want := &corev1.Service{}
		if err := roundTrip(c.desired, want); err == nil && !equality.Semantic.DeepEqual(want.Spec.Selector, live.Spec.Selector) {
			out = append(out, "spec.selector")
		}
		return out
	default:
		return nil
	}
	spec := &template.Spec
	for _, ctr := range slices.Concat(spec.InitContainers, spec.Containers) {
		if len(ctr.Env) > 0 {
			out = append(out, fmt.Sprintf("env of container %s", ctr.Name))
		}
		if len(ctr.EnvFrom) > 0 {
			out = append(out, fmt.Sprintf("envFrom of container %s", ctr.Name))
		}
	}
	if len(spec.EphemeralContainers) > 0 {
		out = append(out, "ephemeralContainers")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		out = append(out, "host namespaces")
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace {
		out = append(out, "shareProcessNamespace")
	}
	if spec.ServiceAccountName != "" && spec.ServiceAccountName != "default" {
		out = append(out, "serviceAccountName")
	}
	return out
}

// applyFailure is how an apply the API server refused is handled.
type applyFailure int

const (
	applyFailed               applyFailure = iota // may pass (a conflict, a timeout): reported, retried
	applyRefused                                  // for good (a PVC that cannot grow): reported, not retried
	applyNamespaceTerminating                     // the namespace is going, and the mirror with it
)

func classifyApplyError(err error) applyFailure {
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return applyNamespaceTerminating
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		return applyRefused
	default:
		return applyFailed
	}
}

// Probe timing: soon while the registry does not answer (its Service may lag its pod).
const (
	probeSoon   = 3 * time.Second
	probeSteady = 30 * time.Second
)

// registryAddress is the Service's cluster IP, once a replica is ready.
func registryAddress(readyRegistries int32, service *corev1.Service) (string, bool) {
	if readyRegistries == 0 || service == nil || service.Spec.ClusterIP == "" {
		return "", false
	}
	return fmt.Sprintf("%s:%d", service.Spec.ClusterIP, RegistryPort), true
}

// cacheReportAddresses: the Service for one registry, else each ready replica's pod.
func cacheReportAddresses(m *mirrorsv1alpha1.RegistryMirror, w workloads, serviceAddr string) []string {
	if len(w.registries) <= 1 {
		return []string{serviceAddr}
	}
	var out []string
	for i, r := range w.registries {
		if r.statefulSet != nil && r.statefulSet.Status.ReadyReplicas > 0 {
			out = append(out, replicaPodAddress(m, int32(i)))
		}
	}
	return out
}

// mergeCacheReports: the images all hold, the fullest volume, pulls summed (nil: none).
func mergeCacheReports(reps []CacheReport) *CacheReport {
	if len(reps) == 0 {
		return nil
	}
	out := reps[0]
	for _, r := range reps[1:] {
		out.Pinned = max(out.Pinned, r.Pinned)
		out.Cached = min(out.Cached, r.Cached)
		if r.LastPass.IsZero() || (!out.LastPass.IsZero() && r.LastPass.Before(&out.LastPass)) {
			out.LastPass = r.LastPass
		}
		if fuller(r, out) {
			out.DiskUsedBytes, out.DiskCapacityBytes = r.DiskUsedBytes, r.DiskCapacityBytes
		}
		out.BlobHits += r.BlobHits
		out.BlobMisses += r.BlobMisses
		out.BytesFromCache += r.BytesFromCache
		out.BytesFromUpstream += r.BytesFromUpstream
		out.UpstreamFetches += r.UpstreamFetches
		out.UpstreamFetchFailures += r.UpstreamFetchFailures
		out.UpstreamFetchedBytes += r.UpstreamFetchedBytes
		out.CoalescedWaiters += r.CoalescedWaiters
		out.CoalescedManifestWaiters += r.CoalescedManifestWaiters
	}
	return &out
}

// fuller says whether a's volume is fuller than b's (a measured one than an unmeasured one).
func fuller(a, b CacheReport) bool {
	if a.DiskCapacityBytes == 0 || b.DiskCapacityBytes == 0 {
		return a.DiskCapacityBytes != 0
	}
	// a.used/a.cap > b.used/b.cap, in 128 bits, without division.
	ah, al := bits.Mul64(a.DiskUsedBytes, b.DiskCapacityBytes)
	bh, bl := bits.Mul64(b.DiskUsedBytes, a.DiskCapacityBytes)
	return ah > bh || (ah == bh && al > bl)
}

// nextProbe is when to probe again after probes p (0: never, probing is off).
func nextProbe(p probeResults) time.Duration {
	switch {
	case p.off:
		return 0
	case p.registryProbed && p.registryErr != nil:
		return probeSoon
	default:
		return probeSteady
	}
}

// Not watched, looked at again: someone else's object of a child's name, and the pods whose
// images a mirror with node access pins.
const (
	conflictRecheck = time.Minute
	pinsRefresh     = time.Minute
)

// nextPass is when to look at a mirror again (0: never).
func nextPass(probeAfter time.Duration, problems []problem, granted bool) time.Duration {
	next := probeAfter
	sooner := func(d time.Duration) {
		if next == 0 || next > d {
			next = d
		}
	}
	if slices.ContainsFunc(problems, func(p problem) bool { return p.Reason == mirrorsv1alpha1.ReasonObjectConflict }) {
		sooner(conflictRecheck)
	}
	if granted {
		sooner(pinsRefresh)
	}
	return next
}

// progressHold is how long a status change that only reports progress (progressOnly) is
// held back, so that the steps of a rollout within it make one write, not one each (like
// kube-controller-manager's --endpointslice-updates-batch-period); what automation acts on
// is written at once. Five seconds covers the usual rollout of a new mirror
// (BenchmarkMirrorsToReady: 2.0 status writes per mirror from create to Ready, the least
// an honest status allows, against 2.5 with a 1 s hold).
const progressHold = 5 * time.Second

// decideStatusWrite says whether to write next over stored; after: when to look again.
func decideStatusWrite(stored, next mirrorsv1alpha1.RegistryMirrorStatus, heldFor time.Duration) (write bool, after time.Duration) {
	switch {
	case equality.Semantic.DeepEqual(stored, next):
		return false, 0
	case !progressOnly(stored, next) || heldFor >= progressHold:
		return true, 0
	default:
		return false, progressHold - heldFor
	}
}

// progressOnly: next differs from stored only in Ready's reason and message, counts, fill.
func progressOnly(stored, next mirrorsv1alpha1.RegistryMirrorStatus) bool {
	strip := func(st mirrorsv1alpha1.RegistryMirrorStatus) mirrorsv1alpha1.RegistryMirrorStatus {
		st = *st.DeepCopy()
		st.ReadyReplicas, st.NodesReady, st.NodesDesired = 0, 0, 0
		st.ImagesInUse, st.ImagesCached = nil, nil
		st.CacheUsedPercent, st.CacheCapacity = nil, nil
		if c := meta.FindStatusCondition(st.Conditions, mirrorsv1alpha1.ConditionReady); c != nil {
			c.Reason, c.Message = "", ""
		}
		return st
	}
	return equality.Semantic.DeepEqual(strip(stored), strip(next))
}

// needsApply reports whether a field the operator sets is missing from live or differs (one
// it stopped setting changes the applied-hash); others' fields do not count.
func needsApply(desired, live any) bool {
	var d, l map[string]any
	if toJSONMap(desired, &d) != nil || toJSONMap(live, &l) != nil || d == nil || l == nil {
		return true
	}
	delete(d, "status")
	return !subset(d, l)
}

func toJSONMap(v any, into *map[string]any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// subset reports whether want's values are in have; lists match element by element.
func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !subset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}

// extraReplicas are objs of the mirror's replicas ≥ spec.replicas, not being deleted yet.
func extraReplicas(m *mirrorsv1alpha1.RegistryMirror, objs []client.Object) []client.Object {
	var out []client.Object
	for _, o := range objs {
		// replicas(m) is at least 1: replica 0's objects are never extra.
		i, err := strconv.Atoi(o.GetLabels()[labelReplica])
		if err == nil && int64(i) >= int64(replicas(m)) && metav1.IsControlledBy(o, m) && o.GetDeletionTimestamp() == nil {
			out = append(out, o)
		}
	}
	return out
}
