package registrymirror

import (
	"errors"
	"fmt"
	"math"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
)

// problem is one thing that kept a pass from applying everything.
type problem struct {
	Reason  string
	Message string
}

// workloads are the live children the status reports on (nil when absent or not this
// mirror's).
type workloads struct {
	// registries are the registry replicas, by index, spec.replicas of them.
	registries []registryReplica
	daemonSet  *appsv1.DaemonSet
}

// registryReplica is one registry replica's StatefulSet and cache volume.
type registryReplica struct {
	statefulSet *appsv1.StatefulSet
	pvc         *corev1.PersistentVolumeClaim
}

// readyRegistries is the number of ready registry pods over the replicas.
func (w workloads) readyRegistries() int32 {
	var n int32
	for _, r := range w.registries {
		if r.statefulSet != nil {
			n += r.statefulSet.Status.ReadyReplicas
		}
	}
	return n
}

// probeResults are what the manager's probes found (see Reconciler.probe).
type probeResults struct {
	// off: probing is disabled (--registrymirror-probes=false).
	off bool
	// upstreamProbed: the upstream was asked GET /v2/; upstreamErr is its answer.
	upstreamProbed bool
	upstreamErr    error
	// registryProbed: the registry was asked GET /v2/ at registryAddr, its Service (once
	// it had a ready replica); registryErr is its answer.
	registryProbed bool
	registryErr    error
	registryAddr   string
	// cache is the registry's report on its cache (asked when the registry answered); nil
	// when not asked or it did not answer.
	cache *CacheReport
}

// outcome is what one pass found and did, assembled by Reconcile from its phases'
// results: the input of computeStatus.
type outcome struct {
	// hostPort is the node agent's host port (0 when none could be chosen).
	hostPort int32
	// workloads are the live StatefulSet, DaemonSet and cache PVC.
	workloads workloads
	// probes are the answers of the registry and the upstream.
	probes probeResults
	// problems kept the pass from applying everything, in the order met.
	problems []problem
	// complete is true when every object was applied or found up to date.
	complete bool
	// failed is true when the pass returned an error (an API error, retried): it did not act
	// on the spec fully.
	failed bool
	// access is what the RegistryHostGrants allow the mirror on the nodes (Reason empty:
	// not decided, the upstream being invalid).
	access nodeAccess
	// wantsNodes is spec.configureNodes.
	wantsNodes bool
	// imagesInUse is the number of images the pods run from the mirror's host (nil: no
	// node access).
	imagesInUse *int32
}

// computeStatus returns the mirror's new status from the pass's outcome: endpoints,
// counts, and the UpstreamReachable, Ready and Degraded conditions, all three set on
// every pass (transition times from now); observedGeneration is m's generation unless
// the pass failed (o.failed). The result equals the old status when nothing changed, so
// the caller can skip the write.
func computeStatus(m *mirrorsv1alpha1.RegistryMirror, o outcome, now metav1.Time) mirrorsv1alpha1.RegistryMirrorStatus {
	st := *m.Status.DeepCopy()
	st.Endpoint = Endpoint(m)
	st.NodeEndpoint = ""
	if o.hostPort != 0 {
		st.NodeEndpoint = nodeEndpoint(o.hostPort)
	}
	st.ReadyReplicas = o.workloads.readyRegistries()
	st.NodesReady, st.NodesDesired = 0, 0
	if ds := o.workloads.daemonSet; ds != nil {
		st.NodesReady = ds.Status.NumberReady
		st.NodesDesired = ds.Status.DesiredNumberScheduled
	}

	st.ImagesInUse = o.imagesInUse
	switch rep := o.probes.cache; {
	case !o.access.Granted:
		st.ImagesCached = nil
	case rep != nil && !rep.LastPass.IsZero():
		st.ImagesCached = ptr.To(rep.Cached)
	}
	if rep := o.probes.cache; rep != nil && rep.DiskCapacityBytes > 0 {
		st.CacheCapacity = resource.NewQuantity(int64(min(rep.DiskCapacityBytes, math.MaxInt64)), resource.BinarySI)
		st.CacheUsedPercent = ptr.To(usedPercent(rep.DiskUsedBytes, rep.DiskCapacityBytes))
	}
	if rep := o.probes.cache; rep != nil && rep.BlobHits+rep.BlobMisses > 0 {
		st.CacheHitPercent = ptr.To(usedPercent(rep.BlobHits, rep.BlobHits+rep.BlobMisses))
	}

	upstream := upstreamCondition(m, o.probes)
	upstream.ObservedGeneration = m.Generation
	upstream.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, upstream)

	access := o.access.condition()
	if o.access.Reason == "" {
		access = metav1.Condition{Type: mirrorsv1alpha1.ConditionNodeAccess, Status: metav1.ConditionUnknown, Reason: mirrorsv1alpha1.ReasonInvalidUpstream,
			Message: "Not decided: the upstream is invalid"}
	}
	access.ObservedGeneration = m.Generation
	access.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, access)

	ready := readyCondition(o, upstream)
	ready.ObservedGeneration = m.Generation
	ready.LastTransitionTime = now
	meta.SetStatusCondition(&st.Conditions, ready)

	degraded := metav1.Condition{Type: mirrorsv1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: mirrorsv1alpha1.ReasonAsExpected,
		Message: "All objects are applied and owned by this mirror", ObservedGeneration: m.Generation, LastTransitionTime: now}
	if len(o.problems) > 0 {
		msgs := make([]string, len(o.problems))
		for i, p := range o.problems {
			msgs[i] = p.Message
		}
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, o.problems[0].Reason, strings.Join(msgs, "; ")
	}
	meta.SetStatusCondition(&st.Conditions, degraded)

	// observedGeneration claims only a spec the pass acted on fully: one that returned no
	// error (docs/STYLE.md, "Status writes and observedGeneration"). An invalid upstream, a
	// child someone else owns, a change the API server refuses or a host port that cannot
	// be had is no error of the pass (Degraded or Ready says so, and the pass waits for an
	// edit); an API error is, and the pass is retried.
	if !o.failed {
		st.ObservedGeneration = m.Generation
	}
	return st
}

// usedPercent is used of capacity in whole percent, rounded down (so the status changes
// once a percent, not with every pull), 0-100.
func usedPercent(used, capacity uint64) int32 {
	if capacity == 0 {
		return 0
	}
	return int32(min(used*100/capacity, 100))
}

// upstreamCondition says whether the upstream answers, and remembers (in the reason)
// whether it ever did: an upstream that answered once may have filled the cache. The
// message gives a fixed phrase for a failure (probeFailure), never the error's text.
func upstreamCondition(m *mirrorsv1alpha1.RegistryMirror, p probeResults) metav1.Condition {
	c := metav1.Condition{Type: mirrorsv1alpha1.ConditionUpstreamReachable}
	up := upstreamURL(m)
	switch {
	case p.off:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, mirrorsv1alpha1.ReasonNotProbed, "The manager does not probe upstreams (--registrymirror-probes=false)"
	case !p.upstreamProbed:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, mirrorsv1alpha1.ReasonNotProbed, "The upstream has not been probed yet"
	case p.upstreamErr == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable, fmt.Sprintf("%s answers GET /v2/", up)
	case errors.Is(p.upstreamErr, errAddressRefused):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, mirrorsv1alpha1.ReasonAddressRefused,
			fmt.Sprintf("%s is not probed: %s; a cluster admin can allow its range with --registrymirror-probe-allowed-cidrs", up, phraseAddressRefused)
	default:
		prev := meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable)
		reachedBefore := prev != nil && (prev.Status == metav1.ConditionTrue || prev.Reason == mirrorsv1alpha1.ReasonUnreachable)
		c.Status = metav1.ConditionFalse
		if reachedBefore {
			c.Reason, c.Message = mirrorsv1alpha1.ReasonUnreachable, fmt.Sprintf("%s does not answer (%s); the mirror serves what its cache holds", up, probeFailure(p.upstreamErr))
		} else {
			c.Reason, c.Message = mirrorsv1alpha1.ReasonNeverReached, fmt.Sprintf("%s has never answered (%s); the mirror has nothing to serve until it does", up, probeFailure(p.upstreamErr))
		}
	}
	return c
}

// replicaWaiting says what registry replica r still waits for; nil when it serves.
func replicaWaiting(r registryReplica) *problem {
	switch sts, pvc := r.statefulSet, r.pvc; {
	case sts == nil:
		return &problem{mirrorsv1alpha1.ReasonRegistryMissing, "the registry StatefulSet does not exist"}
	case pvc != nil && pvc.Status.Phase != corev1.ClaimBound:
		return &problem{mirrorsv1alpha1.ReasonCacheVolumePending,
			fmt.Sprintf("cache volume %s is %s (no matching PersistentVolume or provisioner yet)", pvc.Name, phaseOr(pvc.Status.Phase, "Pending"))}
	case !statefulSetRolledOut(sts):
		return &problem{mirrorsv1alpha1.ReasonRegistryRollingOut,
			fmt.Sprintf("registry %s is rolling out (%d/%d updated)", sts.Name, sts.Status.UpdatedReplicas, replicasOf(sts))}
	case sts.Status.ReadyReplicas < replicasOf(sts):
		return &problem{mirrorsv1alpha1.ReasonRegistryNotReady,
			fmt.Sprintf("registry %s has %d/%d ready replicas", sts.Name, sts.Status.ReadyReplicas, replicasOf(sts))}
	}
	return nil
}

// readyCheck is one thing a mirror needs before it can serve a pull: the problems that
// keep it from it in the pass's outcome o (upstream: the UpstreamReachable condition just
// computed), none when it is met.
type readyCheck func(o outcome, upstream metav1.Condition) []problem

// readyChecks are evaluated in order, every one of them (a person fixing the mirror wants
// every missing piece at once): Ready's reason is the first problem's, its message all of
// them. The order is what a mirror waits for first.
var readyChecks = []readyCheck{registryServes, nodeAgentsReady, registryAnswers, upstreamAnswered}

// registryServes: a registry replica whose StatefulSet is rolled out with its pod ready on a
// bound volume. One is enough (the Service sends pulls to any ready replica); with none, each
// replica's reason.
func registryServes(o outcome, _ metav1.Condition) []problem {
	if len(o.workloads.registries) == 0 {
		return []problem{{mirrorsv1alpha1.ReasonRegistryMissing, "the registry StatefulSet does not exist"}}
	}
	waiting := o.workloads.waitingReplicas()
	if len(waiting) < len(o.workloads.registries) {
		return nil
	}
	return waiting
}

// nodeAgentsReady: with node access, the DaemonSet rolled out and ready on every node it is
// scheduled to; without, nothing to wait for, unless spec.configureNodes asks for the nodes.
func nodeAgentsReady(o outcome, _ metav1.Condition) []problem {
	switch ds := o.workloads.daemonSet; {
	case !o.access.Granted && o.wantsNodes:
		return []problem{{mirrorsv1alpha1.ReasonNodeAccessNotGranted,
			"no node access: spec.configureNodes asks for the nodes and no RegistryHostGrant allows this mirror there (see the NodeAccess condition)"}}
	case !o.access.Granted:
		// An in-cluster cache: no node agents to wait for.
	case ds == nil:
		return []problem{{mirrorsv1alpha1.ReasonNodeAgentMissing, "the node agent DaemonSet does not exist"}}
	case ds.Status.ObservedGeneration < ds.Generation || ds.Status.UpdatedNumberScheduled < ds.Status.DesiredNumberScheduled:
		return []problem{{mirrorsv1alpha1.ReasonNodeAgentsRollingOut,
			fmt.Sprintf("node agents are rolling out (%d/%d nodes updated)", ds.Status.UpdatedNumberScheduled, ds.Status.DesiredNumberScheduled)}}
	case ds.Status.NumberReady < ds.Status.DesiredNumberScheduled:
		return []problem{{mirrorsv1alpha1.ReasonNodeAgentsNotReady,
			fmt.Sprintf("node agents are ready on %d/%d nodes", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)}}
	}
	return nil
}

// registryAnswers: the registry answered the manager's GET /v2/ through its Service, when
// it was asked.
func registryAnswers(o outcome, _ metav1.Condition) []problem {
	if !o.probes.registryProbed || o.probes.registryErr == nil {
		return nil
	}
	return []problem{{mirrorsv1alpha1.ReasonRegistryNotAnswering,
		fmt.Sprintf("the registry does not answer GET /v2/ through its Service (%s): %s", o.probes.registryAddr, probeFailure(o.probes.registryErr))}}
}

// upstreamAnswered: the upstream has answered at least once (an upstream down now is no
// reason: the mirror serves its cache) and may be probed.
func upstreamAnswered(_ outcome, upstream metav1.Condition) []problem {
	switch upstream.Reason {
	case mirrorsv1alpha1.ReasonNeverReached:
		return []problem{{mirrorsv1alpha1.ReasonUpstreamNeverReached, "the upstream has never answered: nothing can be pulled through the mirror yet"}}
	case mirrorsv1alpha1.ReasonAddressRefused:
		return []problem{{mirrorsv1alpha1.ReasonUpstreamAddressRefused, "the upstream's address is not allowed for probes: it is not known to answer"}}
	}
	return nil
}

// waitingReplicas are the problems of the registry replicas that do not serve, in replica
// order (replicaWaiting).
func (w workloads) waitingReplicas() []problem {
	var out []problem
	for _, r := range w.registries {
		if p := replicaWaiting(r); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// readyCondition evaluates readyChecks. Ready is True when none finds a problem, with a
// message that says how the mirror serves (with several replicas, how many serve and what
// the first other one waits for); else False with the problems, or Unknown when the pass
// could not read a workload it waits for.
func readyCondition(o outcome, upstream metav1.Condition) metav1.Condition {
	var problems []problem
	for _, check := range readyChecks {
		problems = append(problems, check(o, upstream)...)
	}
	w := o.workloads
	waiting := w.waitingReplicas()
	serving := len(w.registries) - len(waiting)
	if len(problems) == 0 {
		nodes := int32(0)
		if w.daemonSet != nil {
			nodes = w.daemonSet.Status.NumberReady
		}
		msg := fmt.Sprintf("The registry serves and node agents are ready on %d nodes", nodes)
		if o.probes.registryProbed {
			msg = fmt.Sprintf("The registry answers through its Service and node agents are ready on %d nodes", nodes)
		}
		if !o.access.Granted {
			msg = "The registry serves in the cluster only (no node access)"
			if o.probes.registryProbed {
				msg = "The registry answers through its Service, in the cluster only (no node access)"
			}
		}
		if n := len(w.registries); n > 1 {
			msg += fmt.Sprintf("; %d/%d registry replicas serve", serving, n)
			if len(waiting) > 0 {
				msg += " (" + waiting[0].Message + ")"
			}
		}
		if upstream.Reason == mirrorsv1alpha1.ReasonUnreachable {
			msg += "; the upstream is unreachable, so only cached content is served"
		}
		return metav1.Condition{Type: mirrorsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: mirrorsv1alpha1.ReasonMirrorReady, Message: msg}
	}
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Message
	}
	missing := len(w.registries) == 0
	for _, r := range w.registries {
		missing = missing || r.statefulSet == nil
	}
	status := metav1.ConditionFalse
	if !o.complete && ((serving == 0 && missing) || (o.access.Granted && w.daemonSet == nil)) {
		// The pass could not look at everything: say so instead of guessing.
		status = metav1.ConditionUnknown
	}
	return metav1.Condition{Type: mirrorsv1alpha1.ConditionReady, Status: status, Reason: problems[0].Reason, Message: capitalize(strings.Join(msgs, "; "))}
}

func statefulSetRolledOut(sts *appsv1.StatefulSet) bool {
	s := sts.Status
	return s.ObservedGeneration >= sts.Generation &&
		s.UpdatedReplicas >= replicasOf(sts) &&
		(s.UpdateRevision == "" || s.CurrentRevision == s.UpdateRevision)
}

func replicasOf(sts *appsv1.StatefulSet) int32 {
	if sts.Spec.Replicas == nil {
		return 1
	}
	return *sts.Spec.Replicas
}

func phaseOr(p corev1.PersistentVolumeClaimPhase, def string) string {
	if p == "" {
		return def
	}
	return string(p)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
