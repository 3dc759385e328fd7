package registrymirror

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// childAction is what a pass does with one child, given what the API server holds.
type childAction int

const (
	// childCreate: no object of the child's name exists; apply creates it.
	childCreate childAction = iota
	// childUpdate: the mirror's object differs from the desired one; apply updates it.
	childUpdate
	// childUpToDate: the mirror's object has every field the operator sets; no write.
	childUpToDate
	// childForeign: an object of the child's name exists that the mirror does not
	// control; it is reported and left alone.
	childForeign
	// childRevert: someone added to the mirror's object what an apply would keep but
	// what changes what its pods run or which pods its Services reach (see drift); the
	// part is replaced whole, then applied.
	childRevert
)

// decideChild chooses what to do with child c of mirror m; exists says whether c.live
// was read from the API server.
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

// drift names what others added to a live child that Server-Side Apply would keep (the
// operator does not set those fields) but that changes what the mirror serves: environment
// variables (the registry reads REGISTRY_* as configuration: an upstream of someone's
// choosing), host namespaces, another ServiceAccount in a pod template; extra selector
// labels on a Service (it would send the mirror's traffic to other pods). The operator's
// own pods set none of these.
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
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, ctr := range list {
			if len(ctr.Env) > 0 {
				out = append(out, fmt.Sprintf("env of container %s", ctr.Name))
			}
			if len(ctr.EnvFrom) > 0 {
				out = append(out, fmt.Sprintf("envFrom of container %s", ctr.Name))
			}
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
	// applyFailed: a failure that may pass (conflict, timeout, unavailable): reported
	// and retried with backoff.
	applyFailed applyFailure = iota
	// applyRefused: refused for good (a PVC that cannot grow, an immutable field):
	// retrying changes nothing until the spec or the cluster changes, which wakes the
	// controller anyway, so it is reported without a retry.
	applyRefused
	// applyNamespaceTerminating: the namespace is going, and the mirror with it:
	// nothing to report.
	applyNamespaceTerminating
)

// classifyApplyError says how to handle err, an error of an apply.
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

// Probe timing: while the registry does not answer yet (its Service may lag its pod's
// readiness by a moment), ask again soon; then keep an eye on the upstream.
const (
	probeSoon   = 3 * time.Second
	probeSteady = 30 * time.Second
)

// registryAddress is where the manager probes the registry: its Service's cluster IP,
// once the StatefulSet has a ready replica and the Service has an address.
func registryAddress(readyRegistries int32, service *corev1.Service) (string, bool) {
	if readyRegistries == 0 || service == nil || service.Spec.ClusterIP == "" {
		return "", false
	}
	return fmt.Sprintf("%s:%d", service.Spec.ClusterIP, RegistryPort), true
}

// cacheReportAddresses are where to ask for the cache reports: the Service's address
// (serviceAddr) for a single registry; for several, each ready replica's pod under the
// headless Service, by replica index (a replica that is not ready has no DNS name).
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

// mergeCacheReports is what the status says of several registry replicas' reports: the
// images every answering replica holds whole (the fewest; unknown, LastPass zero, while
// one has not ended a warm pass), the fullest volume, and the pulls and bytes summed. nil
// when none answered.
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
	}
	return &out
}

// fuller says whether a's volume is fuller than b's (a measured volume is fuller than an
// unmeasured one).
func fuller(a, b CacheReport) bool {
	switch {
	case a.DiskCapacityBytes == 0:
		return false
	case b.DiskCapacityBytes == 0:
		return true
	}
	// a.used/a.cap > b.used/b.cap, without division.
	return new(big.Int).Mul(new(big.Int).SetUint64(a.DiskUsedBytes), new(big.Int).SetUint64(b.DiskCapacityBytes)).Cmp(
		new(big.Int).Mul(new(big.Int).SetUint64(b.DiskUsedBytes), new(big.Int).SetUint64(a.DiskCapacityBytes))) > 0
}

// nextProbe is when to probe again after probes p: soon while the registry does not
// answer, else at the steady pace; never when probing is off.
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

// conflictRecheck is how often a mirror looks again at a child's name that someone else's
// object holds: such objects are not watched (the child cache holds the mirrors' own only).
const conflictRecheck = time.Minute

// pinsRefresh is how often a mirror with node access looks again at the images the
// cluster's pods run, when nothing else brings it back sooner (pods are not watched for
// it: the pinned list follows them within this).
const pinsRefresh = time.Minute

// nextPass is when to look at a mirror again: at the probes' pace (probeAfter, 0: never),
// within conflictRecheck while an object of someone else holds a child's name, and
// within pinsRefresh while it has node access (granted).
func nextPass(probeAfter time.Duration, problems []problem, granted bool) time.Duration {
	next := probeAfter
	sooner := func(d time.Duration) {
		if next == 0 || next > d {
			next = d
		}
	}
	for _, p := range problems {
		if p.Reason == mirrorsv1alpha1.ReasonObjectConflict {
			sooner(conflictRecheck)
		}
	}
	if granted {
		sooner(pinsRefresh)
	}
	return next
}

// progressHold is how long a status change that only reports progress (see
// progressOnly) is held back before it is written, so that the steps of a rollout that
// follow each other within it (volume bound, StatefulSet observed, pods scheduled, pods
// ready) make one write, not one each — like kube-controller-manager's
// --endpointslice-updates-batch-period. What automation and alerts act on (a condition's
// status, observedGeneration, an endpoint, a problem) is written at once, and it carries
// the progress held back with it. Five seconds covers the usual rollout of a new mirror
// (BenchmarkMirrorsToReady, 100 mirrors on the local cluster: 2.0 status writes per mirror
// from create to Ready, the least an honest status allows, against 2.5 with a 1 s hold);
// progress shows at most that late.
const progressHold = 5 * time.Second

// decideStatusWrite says whether to write the status next over stored. heldFor is how
// long a progress-only change has been held back (0 when none is). When it holds one
// back, after says when to look again, so the latest progress is written then.
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

// progressOnly reports whether next differs from stored only in how far the rollout has
// got: the Ready condition's reason and message and the replica and node counts. Every
// condition keeps its status (Ready's included), Degraded and UpstreamReachable keep their
// reasons and messages, and observedGeneration and the endpoints stay the same.
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

// needsApply reports whether applying desired would change live: whether some field the
// operator sets is missing from live or has another value there. Fields others added
// (defaults, other controllers) do not count — Server-Side Apply would keep them too. A
// field the operator stopped setting is caught by the applied-hash annotation, whose
// value then differs. Skipping no-op applies keeps a steady-state pass free of writes.
func needsApply(desired, live any) bool {
	d, err := toJSONMap(desired)
	if err != nil {
		return true
	}
	l, err := toJSONMap(live)
	if err != nil {
		return true
	}
	delete(d, "status")
	return !subset(d, l)
}

func toJSONMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not an object")
	}
	return m, nil
}

// subset reports whether every value in want is present and equal in have. Lists must
// have the same length and match element by element (the operator's lists — containers,
// ports, volumes, env — keep their order on the server).
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
