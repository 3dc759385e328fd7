package registrymirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/egress"
	"github.com/quartet-operator/quartet/internal/status"
)

// problem is one thing that kept a pass from applying everything.
type problem struct {
	Reason  string
	Message string
}

// workloads are the live children the status reports on (nil: absent or not the mirror's).
type workloads struct {
	registries []registryReplica // by replica index, spec.replicas of them
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

// probeResults are what the manager's probes found (Reconciler.probe).
type probeResults struct {
	off            bool // --registrymirror-probes=false
	upstreamProbed bool // GET <upstream>/v2/ was asked; upstreamErr is its answer
	upstreamErr    error
	registryProbed bool // GET /v2/ was asked at registryAddr, the Service's
	registryErr    error
	registryAddr   string
	cache          *CacheReport // the registry's report; nil when not asked or not answered
}

// outcome is what one pass found and did, assembled by Reconcile: computeStatus's input.
type outcome struct {
	hostPort    int32 // the node agents' (0: none could be chosen)
	workloads   workloads
	probes      probeResults
	problems    []problem   // what kept the pass from applying everything, in the order met
	complete    bool        // every object was applied or found up to date
	terminating bool        // the namespace is being deleted
	access      nodeAccess  // Reason empty: not decided, the upstream being invalid
	wantsNodes  bool        // spec.configureNodes
	imagesInUse *int32      // images the pods run from the mirror's host (nil: no node access)
	pinned      *pinnedList // the images pinned this pass (nil: none chosen, the list kept or no node access)
}

// finish ends a pass: the status computeStatus makes of o, written unless only progress
// changed (held back up to progressHold; after: when to look again), then Events and series.
func (r *Reconciler) finish(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, o outcome, acted bool) (after time.Duration, err error) {
	key := client.ObjectKeyFromObject(m)
	now := metav1.NewTime(r.Clock.Now())
	heldFor := r.memory.heldFor(key, now.Time)
	// The spec and generation the pass acted on, not a newer one a conflict finds.
	read := m.DeepCopy()
	var next mirrorsv1alpha1.RegistryMirrorStatus
	prev, err := r.writer.Finish(ctx, m, acted, func(x *mirrorsv1alpha1.RegistryMirror) {
		read.Status = x.Status
		next = computeStatus(read, o, now)
		write, wait := decideStatusWrite(x.Status, next, heldFor)
		// A write that observes a generation carries the progress held back.
		if write || (acted && x.Status.ObservedGeneration != read.Generation) {
			x.Status, wait = next, 0
		}
		after = wait
	})
	recordStatus(key, next, o.probes.cache)
	recordPinned(key, o.access.Granted, o.pinned)
	if err != nil {
		return 0, err
	}
	if after > 0 {
		r.memory.hold(key, now.Time)
	} else {
		r.memory.release(key)
	}
	r.recordEvents(prev, m)
	return after, nil
}

// computeStatus returns the status the outcome makes, all four conditions set every pass.
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
		st.NodesReady, st.NodesDesired = ds.Status.NumberReady, ds.Status.DesiredNumberScheduled
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
	degraded := metav1.Condition{Type: mirrorsv1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: mirrorsv1alpha1.ReasonAsExpected,
		Message: "All objects are applied and owned by this mirror"}
	if len(o.problems) > 0 {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, o.problems[0].Reason, joinMessages(o.problems)
	}
	conds := status.NewConditions(&st.Conditions, m.Generation, now.Time)
	for _, c := range []metav1.Condition{upstream, o.access.condition(), readyCondition(o, upstream), degraded} {
		conds.Set(c.Type, c.Status, c.Reason, c.Message)
	}
	return st
}

func joinMessages(problems []problem) string {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Message
	}
	return strings.Join(msgs, "; ")
}

// usedPercent is used of capacity in whole percent, rounded down (a change per percent).
func usedPercent(used, capacity uint64) int32 {
	if capacity == 0 {
		return 0
	}
	return int32(min(used*100/capacity, 100))
}

// upstreamCondition says whether the upstream answers, and whether it ever did (it may
// have filled the cache); a failure is a fixed phrase, never the error's text.
func upstreamCondition(m *mirrorsv1alpha1.RegistryMirror, p probeResults) metav1.Condition {
	c := metav1.Condition{Type: mirrorsv1alpha1.ConditionUpstreamReachable}
	up, prev := upstreamURL(m), meta.FindStatusCondition(m.Status.Conditions, mirrorsv1alpha1.ConditionUpstreamReachable)
	switch {
	case p.off:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, mirrorsv1alpha1.ReasonNotProbed, "The manager does not probe upstreams (--registrymirror-probes=false)"
	case !p.upstreamProbed:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, mirrorsv1alpha1.ReasonNotProbed, "The upstream has not been probed yet"
	case p.upstreamErr == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, mirrorsv1alpha1.ReasonReachable, fmt.Sprintf("%s answers GET /v2/", up)
	case errors.Is(p.upstreamErr, egress.ErrAddressRefused):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, mirrorsv1alpha1.ReasonAddressRefused,
			fmt.Sprintf("%s is not probed: %s; a cluster admin can allow its range with --registrymirror-probe-allowed-cidrs", up, egress.PhraseAddressRefused)
	case prev != nil && (prev.Status == metav1.ConditionTrue || prev.Reason == mirrorsv1alpha1.ReasonUnreachable): // reached before
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, mirrorsv1alpha1.ReasonUnreachable,
			fmt.Sprintf("%s does not answer (%s); the mirror serves what its cache holds", up, egress.Failure(p.upstreamErr))
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, mirrorsv1alpha1.ReasonNeverReached,
			fmt.Sprintf("%s has never answered (%s); the mirror has nothing to serve until it does", up, egress.Failure(p.upstreamErr))
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
			fmt.Sprintf("cache volume %s is %s (no matching PersistentVolume or provisioner yet)", pvc.Name, cmp.Or(string(pvc.Status.Phase), "Pending"))}
	case !statefulSetRolledOut(sts):
		return &problem{mirrorsv1alpha1.ReasonRegistryRollingOut,
			fmt.Sprintf("registry %s is rolling out (%d/%d updated)", sts.Name, sts.Status.UpdatedReplicas, ptr.Deref(sts.Spec.Replicas, 1))}
	case sts.Status.ReadyReplicas < ptr.Deref(sts.Spec.Replicas, 1):
		return &problem{mirrorsv1alpha1.ReasonRegistryNotReady,
			fmt.Sprintf("registry %s has %d/%d ready replicas", sts.Name, sts.Status.ReadyReplicas, ptr.Deref(sts.Spec.Replicas, 1))}
	}
	return nil
}

// readyCheck is one thing a mirror needs before it serves a pull: the problems in the way.
type readyCheck func(o outcome, upstream metav1.Condition) []problem

// readyChecks are all evaluated (every missing piece at once), in the order they are met.
var readyChecks = []readyCheck{registryServes, nodeAgentsReady, registryAnswers, upstreamAnswered}

// registryServes: one replica rolled out with its pod ready on a bound volume.
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

// nodeAgentsReady: with node access, the DaemonSet rolled out and ready.
func nodeAgentsReady(o outcome, _ metav1.Condition) []problem {
	switch ds := o.workloads.daemonSet; {
	case !o.access.Granted && o.wantsNodes:
		return []problem{{mirrorsv1alpha1.ReasonNodeAccessNotGranted,
			"no node access: spec.configureNodes asks for the nodes and no RegistryHostGrant allows this mirror there (see the NodeAccess condition)"}}
	case !o.access.Granted:
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

// registryAnswers: the registry answered GET /v2/ through its Service, when asked.
func registryAnswers(o outcome, _ metav1.Condition) []problem {
	if !o.probes.registryProbed || o.probes.registryErr == nil {
		return nil
	}
	return []problem{{mirrorsv1alpha1.ReasonRegistryNotAnswering,
		fmt.Sprintf("the registry does not answer GET /v2/ through its Service (%s): %s", o.probes.registryAddr, egress.Failure(o.probes.registryErr))}}
}

// upstreamAnswered: the upstream answered once (the cache serves) and may be probed.
func upstreamAnswered(_ outcome, upstream metav1.Condition) []problem {
	switch upstream.Reason {
	case mirrorsv1alpha1.ReasonNeverReached:
		return []problem{{mirrorsv1alpha1.ReasonUpstreamNeverReached, "the upstream has never answered: nothing can be pulled through the mirror yet"}}
	case mirrorsv1alpha1.ReasonAddressRefused:
		return []problem{{mirrorsv1alpha1.ReasonUpstreamAddressRefused, "the upstream's address is not allowed for probes: it is not known to answer"}}
	}
	return nil
}

// waitingReplicas are the problems of the replicas that do not serve, in order.
func (w workloads) waitingReplicas() []problem {
	var out []problem
	for _, r := range w.registries {
		if p := replicaWaiting(r); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// readyCondition evaluates readyChecks; Unknown when the pass could not look at a workload.
func readyCondition(o outcome, upstream metav1.Condition) metav1.Condition {
	var problems []problem
	for _, check := range readyChecks {
		problems = append(problems, check(o, upstream)...)
	}
	w := o.workloads
	waiting := w.waitingReplicas()
	serving := len(w.registries) - len(waiting)
	if len(problems) == 0 {
		serves, where := "serves", " in the cluster only (no node access)"
		if o.probes.registryProbed {
			serves, where = "answers through its Service", ","+where
		}
		msg := "The registry " + serves + where
		if ds := w.daemonSet; o.access.Granted && ds != nil { // nodeAgentsReady: granted, it is there
			msg = fmt.Sprintf("The registry %s and node agents are ready on %d nodes", serves, ds.Status.NumberReady)
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
	missing := len(w.registries) == 0 || slices.ContainsFunc(w.registries, func(r registryReplica) bool { return r.statefulSet == nil })
	status := metav1.ConditionFalse
	if !o.complete && ((serving == 0 && missing) || (o.access.Granted && w.daemonSet == nil)) {
		status = metav1.ConditionUnknown
	}
	msg := joinMessages(problems) // capitalized: the checks' messages start a clause
	return metav1.Condition{Type: mirrorsv1alpha1.ConditionReady, Status: status, Reason: problems[0].Reason, Message: strings.ToUpper(msg[:1]) + msg[1:]}
}

func statefulSetRolledOut(sts *appsv1.StatefulSet) bool {
	s := sts.Status
	return s.ObservedGeneration >= sts.Generation &&
		s.UpdatedReplicas >= ptr.Deref(sts.Spec.Replicas, 1) &&
		(s.UpdateRevision == "" || s.CurrentRevision == s.UpdateRevision)
}
