// Package registrymirror runs a pull-through image cache per RegistryMirror: a registry in
// proxy mode and node agents (cmd/nodeagent) that publish it on each node's loopback
// address and, when asked, point containerd at it.
package registrymirror

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/scope"
	"github.com/quartet-operator/quartet/internal/status"
)

// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors;registryhostgrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors/status,verbs=patch
// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets;daemonsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

// Reconciler makes a RegistryMirror's six children match its spec and reports on them.
//
// # In-memory state
//
// What the controller keeps from one pass to the next (docs/STYLE.md); a restart or a new
// leader loses it all. Figures: BenchmarkMirrorsToReady, 100 mirrors (docs/PERFORMANCE.md).
//
//	memory   | holds                       | written / read by        | restart                     | protects (figure)
//	---------+-----------------------------+--------------------------+-----------------------------+---------------------------
//	writer   | each mirror as this process | Finish; Forget (forget)  | a lagging cache costs a     | work: 0 conflicting status
//	(With-   | last wrote its status       |                          | conflict and a re-read      | writes for 100 mirrors, 19
//	Memory)  |                             |                          |                             | without it
//	memory   | per mirror: the host port   | assignPort, releasePort  | re-derived: the child cache | correctness: no port twice
//	         | chosen; since when progress | hold, release, heldFor   | holds the DaemonSets; held  | (TestHostPorts: 5/5 fail
//	         | is held back; the last      | (finish); probeUpstream; | again from then; probed     | without); work: 2.3 status
//	         | upstream probe              | forget                   | again                       | writes/mirror, 3.5 without
//	         |                             |                          |                             | the hold; a probe/20 s/URL
//	Children | the six child kinds, ours   | informers / the phases   | a fresh list before workers | correctness: the children
//	Pods     | pods not ended: images,     | informer / pinnedImages  | listed at the first pinning | correctness: pinned images
//	         | phase, node if not running  |                          |                             |
//
// Not memory: the shared cache, the metric series, the work queue's timers, configuration.
type Reconciler struct {
	Client          client.Client // the manager's cache (mirrors, grants) and writes
	APIReader       client.Reader // whose object holds a child's name
	Recorder        events.EventRecorder
	Clock           clock.PassiveClock
	Namespaces      scope.Namespaces
	Children        client.Reader // the child cache (newChildCache)
	Pods            client.Reader // the pod cache (newPodCache); nil pins nothing
	Images          Images
	Prober          Prober // nil: probing is off
	HostsRoot       string // the nodes' containerd config_path
	MaxPinnedImages int    // caps each mirror's pinned list (--registrymirror-max-pinned-images)

	writer *status.Writer[*mirrorsv1alpha1.RegistryMirror]
	memory memory
}

// Reconcile applies the mirror's children, probes, and ends with finish.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	m := &mirrorsv1alpha1.RegistryMirror{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading the RegistryMirror: %w", err)
	}
	if !m.DeletionTimestamp.IsZero() {
		// No finalizer: the garbage collector deletes the children.
		forgetMirror(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	var out outcome
	defer func() {
		// Skip rule: in a namespace being deleted the mirror goes too; nothing to report.
		if out.terminating {
			return
		}
		after, err := r.finish(ctx, m, out, retErr == nil)
		if err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, fmt.Errorf("writing the status: %w", err)})
		}
		if retErr == nil && after > 0 && (res.RequeueAfter == 0 || after < res.RequeueAfter) {
			res.RequeueAfter = after
		}
	}()

	hostsDir, err := HostsDir(m.Spec.Upstream)
	if err != nil {
		// A spec mistake: say so and wait for the next edit.
		out.problems = []problem{{mirrorsv1alpha1.ReasonInvalidUpstream, err.Error()}}
		return ctrl.Result{}, nil
	}
	out.wantsNodes = m.Spec.ConfigureNodes
	var grants mirrorsv1alpha1.RegistryHostGrantList
	if err := r.Client.List(ctx, &grants); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing RegistryHostGrants: %w", err)
	}
	out.access = decideNodeAccess(m, hostsDir, grants.Items)
	if out.hostPort, out.problems, err = r.reconcileNodeAgents(ctx, m, out.access, grants.Items); err != nil {
		return ctrl.Result{}, err
	}
	if m.Spec.CredentialsSecretRef == nil { // no upstream credentials to fence in: no NetworkPolicy
		if _, err := r.removeChild(ctx, m, &networkingv1.NetworkPolicy{}, "NetworkPolicy", networkPolicyName(m)); err != nil {
			return ctrl.Result{}, err
		}
	}
	pinned, inUse, chosen := r.pinnedImages(ctx, m, hostsDir, out.access.Granted)
	out.imagesInUse, out.pinned = inUse, chosen
	service, err := r.reconcileChildren(ctx, m, reach{hostPort: out.hostPort, hostsPath: hostsPath(r.HostsRoot, hostsDir),
		capabilities: out.access.Capabilities, operatorNamespace: r.Namespaces.Operator, pinnedImages: pinned}, &out)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.removeExtraReplicas(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	out.probes = r.probe(ctx, m, out.workloads, service)
	return ctrl.Result{RequeueAfter: nextPass(nextProbe(out.probes), out.problems, out.access.Granted)}, nil
}

// forget drops what the controller keeps of a mirror that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.writer.Forget(key)
	r.memory.forget(key)
	forgetMirror(key)
}

// reconcileNodeAgents gives a mirror with node access its port, or removes its agents.
func (r *Reconciler) reconcileNodeAgents(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, access nodeAccess, grants []mirrorsv1alpha1.RegistryHostGrant) (int32, []problem, error) {
	if access.Granted {
		return r.reconcileHostPort(ctx, m, grants)
	}
	r.memory.releasePort(client.ObjectKeyFromObject(m))
	// The node agents go, each removing its hosts.toml as it stops.
	removed, err := r.removeChild(ctx, m, &appsv1.DaemonSet{}, "DaemonSet", daemonSetName(m))
	if removed {
		ctrl.LoggerFrom(ctx).Info("Deleted DaemonSet: no node access", "daemonSet", klog.KRef(m.Namespace, daemonSetName(m)))
		r.Recorder.Eventf(m, nil, corev1.EventTypeNormal, EventDeleted, "Delete",
			"Deleted DaemonSet %s/%s: the mirror has no node access (%s)", m.Namespace, daemonSetName(m), access.Reason)
	}
	return 0, nil, err
}

// reconcileChildren makes every child match, in apply order, past failures, notes in o
// what they came to and returns the live ClusterIP Service.
func (r *Reconciler) reconcileChildren(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, rch reach, o *outcome) (*corev1.Service, error) {
	o.workloads = workloads{registries: make([]registryReplica, replicas(m))}
	var service *corev1.Service
	var errs []error
	for _, c := range desiredChildren(m, r.Images, rch) {
		cr, err := r.reconcileChild(ctx, m, c)
		if err != nil {
			errs = append(errs, err)
		}
		if cr.problem != nil {
			o.problems = append(o.problems, *cr.problem)
		}
		o.terminating = o.terminating || cr.terminating
		switch live := cr.live.(type) {
		case *appsv1.StatefulSet:
			o.workloads.registries[c.replica].statefulSet = live
		case *appsv1.DaemonSet:
			o.workloads.daemonSet = live
		case *corev1.PersistentVolumeClaim:
			o.workloads.registries[c.replica].pvc = live
		case *corev1.Service:
			if live.Name == serviceName(m) {
				service = live
			}
		}
	}
	o.complete = len(errs) == 0 && !o.terminating
	return service, kerrors.NewAggregate(errs)
}

// childResult is what reconciling one child came to.
type childResult struct {
	live        client.Object // the mirror's child as it is now; nil: none, someone else's or unwritten
	problem     *problem      // why the child does not match
	terminating bool          // the namespace is being deleted
}

// readChild reads c.live from the child cache, else the API server (someone else's object?).
func (r *Reconciler) readChild(ctx context.Context, key types.NamespacedName, c child) (bool, error) {
	err := r.Children.Get(ctx, key, c.live)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, c.live)
	}
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading %s %s: %w", c.kind, key, err)
}

// reconcileChild makes one child match, as decideChild decides.
func (r *Reconciler) reconcileChild(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, c child) (childResult, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: c.name}
	exists, err := r.readChild(ctx, key, c)
	if err != nil {
		return childResult{}, err
	}
	if exists && metav1.IsControlledBy(c.live, m) && ownedByLegacy(c.live) {
		if err := r.adoptLegacyFields(ctx, c.live); err != nil {
			return childResult{}, fmt.Errorf("moving the fields of %s to %s on %s %s: %w", legacyFieldOwner, FieldOwner, c.kind, key, err)
		}
	}
	action := decideChild(m, c, exists)
	switch action {
	case childForeign:
		objectWrites.WithLabelValues(c.kind, "conflict").Inc()
		return childResult{problem: &problem{mirrorsv1alpha1.ReasonObjectConflict,
			fmt.Sprintf("%s %s exists and is not controlled by this RegistryMirror; it is left alone (delete or rename it)", c.kind, key)}}, nil
	case childUpToDate:
		return childResult{live: c.live}, nil
	case childRevert:
		if err := r.revertChild(ctx, m, c); err != nil {
			return childResult{problem: &problem{mirrorsv1alpha1.ReasonApplyFailed, err.Error()}}, err
		}
	}
	return r.applyChild(ctx, m, c, exists, action == childCreate)
}
