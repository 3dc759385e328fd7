// Package registrymirror runs a pull-through image cache per RegistryMirror: a CNCF
// distribution registry in proxy mode (StatefulSet, cache PVC, ConfigMap, ClusterIP and
// headless Services) and a node agent DaemonSet (package nodeagent) that publishes the
// mirror on each node's loopback address and, when asked, points containerd at it.
package registrymirror

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors,verbs=get;list;watch
// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors/status,verbs=patch
// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registryhostgrants,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete

// Reconciler makes a RegistryMirror's six children match its spec and reports on them.
//
// # In-memory state
//
// What the controller keeps in process memory from one pass to the next (docs/STYLE.md, "In-memory
// state"); everything else a pass reads from the API server or a cache of it. A restart or a change
// of leader loses all of it; the fifth column says what that costs and how the next passes recover.
// A new piece of such memory needs a row here.
//
//	memory             | holds                      | written by             | read by                  | restart, leader change           | protects
//	-------------------+----------------------------+------------------------+--------------------------+----------------------------------+-----------------------
//	ports (portBook)   | the host port this process | assign                 | assign: other mirrors'   | lost; the DaemonSets in the      | correctness: two
//	                   | chose for each mirror      | (reconcileHostPort);   | reservations count as    | child cache carry the ports      | workers never pick the
//	                   |                            | release (Reconcile:    | held                     | chosen before (reconcileHostPort | same port before
//	                   |                            | the mirror is gone or  |                          | keeps a DaemonSet's port,        | either's DaemonSet
//	                   |                            | has no node access)    |                          | portsOfOthers lists the          | reaches the cache;
//	                   |                            |                        |                          | others'), and the book fills     | re-derived from the
//	                   |                            |                        |                          | again as mirrors pass            | DaemonSets
//	                   |                            |                        |                          |                                  |
//	statuses.writes    | operator.StatusMemory:     | writeStatus            | report                   | lost; a new process's cache      | work: no second write
//	                   | each mirror as the API     | (statusBook.wrote);    | (statusBook.latest): the | starts from a fresh list; a      | of the same status, no
//	                   | server returned it from    | forget                 | stored status            | stale read at worst costs a      | repeated Events
//	                   | this process's last status |                        | computeStatus,           | conflict and a re-read           |
//	                   | write                      |                        | decideStatusWrite and    | (operator.WriteStatus)           |
//	                   |                            |                        | the Events compare with  |                                  |
//	                   |                            |                        |                          |                                  |
//	statuses.held      | per mirror, since when a   | report (hold; release  | report (heldFor, for     | lost; the next pass holds the    | work: one status write
//	                   | progress-only status       | when there is nothing  | decideStatusWrite)       | change again from then: written  | for the steps of a
//	                   | change is held back        | to write);             |                          | up to progressHold (5 s) later   | rollout
//	                   | (progressHold)             | statusBook.wrote;      |                          |                                  |
//	                   |                            | forget                 |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	Children (the      | the objects of the six     | its informers (a       | readChild,               | rebuilt from a fresh list; the   | correctness: what the
//	child cache of     | child kinds labelled       | manager Runnable,      | reconcileHostPort,       | workers start after the          | children are and who
//	newChildCache)     | managed-by                 | Setup)                 | portsOfOthers,           | controller's watches of it have  | controls them;
//	                   | quartet-registrymirror in  |                        | pinnedImages (the live   | synced                           | re-derived from the
//	                   | the watched namespaces,    |                        | ConfigMap); the child    |                                  | API server
//	                   | field sets stripped        |                        | watches wake the owner   |                                  |
//	                   |                            |                        |                          |                                  |
//	Pods (the pod      | pods that have not ended,  | its informer           | podsInUse, for           | lost; the first pass of a mirror | correctness: the
//	cache of           | in the watched namespaces, |                        | pinnedImages             | with node access starts it again | images the registry
//	newPodCache)       | stripped to names, images  |                        |                          | and waits for its list           | never evicts;
//	                   | and imageIDs               |                        |                          | (podListTimeout); while it       | re-derived from the
//	                   | (StripPodImages); its      |                        |                          | cannot list, pinnedImages keeps  | API server
//	                   | informer starts at the     |                        |                          | the pinned file the ConfigMap    |
//	                   | first List                 |                        |                          | has                              |
//	                   |                            |                        |                          |                                  |
//	Prober             | per upstream URL, its last | httpProber.Upstream    | httpProber.Upstream      | lost; the next pass probes the   | work: requests to an
//	(httpProber):      | probe's answer and time,   |                        | (probe)                  | upstream again                   | upstream
//	upstream           | for upstreamCacheTTL (20   |                        |                          |                                  |
//	                   | s), shared by the mirrors  |                        |                          |                                  |
//	                   | of that upstream; dropped  |                        |                          |                                  |
//	                   | past it, at any probe      |                        |                          |                                  |
//	                   |                            |                        |                          |                                  |
//	traffic (package   | each mirror's last cache   | recordCache (report);  | Collect, on a Prometheus | lost; the series are absent      | neither: metrics only
//	trafficCollector)  | report: blob pulls, hits   | forgetMirror           | scrape; no pass reads it | until the next probe's report    |
//	                   | and misses and their bytes |                        |                          |                                  |
//
// Not in the table: the mirrors and RegistryHostGrants in the manager's shared cache; the gauges
// (forgetMirror); the work queue's timers (nextPass, the progress hold's after), which every pass
// sets again (after a start, the mirrors' first list wakes each); the probe client's connections;
// configuration (Images, Shared, HostsRoot, Clock).
type Reconciler struct {
	// Client reads mirrors and grants from the manager's cache and writes.
	Client client.Client
	// APIReader reads the API server, to see whether someone else's object holds a child's
	// name.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Shared    operator.Shared
	// Children reads the mirrors' children from a cache that holds only objects labelled
	// managed-by quartet-registrymirror (see newChildCache).
	Children client.Reader
	// Pods reads the cluster's pods, stripped to their images (newPodCache), for the images
	// a mirror with node access pins; nil pins nothing.
	Pods   client.Reader
	Images Images
	// Prober checks that the registry answers and whether the upstream does; nil turns
	// probing off (Ready then rests on the workloads alone).
	Prober Prober
	// HostsRoot is the nodes' containerd hosts directory (config_path), where the node
	// agents write <upstream host>/hosts.toml.
	HostsRoot string

	ports    portBook
	statuses statusBook
}

// Reconcile applies the mirror's children, probes the registry and the upstream, and
// writes the status once, from the outcome of the pass.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	if !r.Shared.Watches(req.Namespace) {
		return ctrl.Result{}, nil
	}
	m := &mirrorsv1alpha1.RegistryMirror{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.ports.release(req.NamespacedName)
			r.statuses.forget(req.NamespacedName)
			forgetMirror(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading the RegistryMirror: %w", err)
	}
	if !m.DeletionTimestamp.IsZero() {
		r.reconcileDelete(m)
		return ctrl.Result{}, nil
	}

	var out outcome
	terminating := false
	defer func() {
		if terminating {
			// The namespace is going, and the mirror with it: nothing to report.
			return
		}
		out.failed = retErr != nil
		after, err := r.report(ctx, m, out)
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
	if out.access, err = r.reconcileNodeAccess(ctx, m, hostsDir); err != nil {
		return ctrl.Result{}, err
	}
	if out.access.Granted {
		hostPort, portProblems, err := r.reconcileHostPort(ctx, m)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("choosing the host port: %w", err)
		}
		out.hostPort, out.problems = hostPort, portProblems
	} else {
		// No node agents: none running, no port held.
		r.ports.release(req.NamespacedName)
		removed, err := r.removeNodeAgents(ctx, m)
		if err != nil {
			return ctrl.Result{}, err
		}
		if removed {
			ctrl.LoggerFrom(ctx).Info("Deleted DaemonSet: no node access", "daemonSet", klog.KRef(m.Namespace, daemonSetName(m)))
			r.Recorder.Eventf(m, nil, corev1.EventTypeNormal, EventDeleted, "Delete",
				"Deleted DaemonSet %s/%s: the mirror has no node access (%s)", m.Namespace, daemonSetName(m), out.access.Reason)
		}
	}

	if m.Spec.CredentialsSecretRef == nil {
		if err := r.removeNetworkPolicy(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	pinned, inUse := r.pinnedImages(ctx, m, hostsDir, out.access.Granted)
	out.imagesInUse = inUse
	kids, err := r.reconcileChildren(ctx, m, reach{hostPort: out.hostPort, hostsPath: hostsPath(r.HostsRoot, hostsDir),
		capabilities: out.access.Capabilities, operatorNamespace: r.Shared.OperatorNamespace, pinnedImages: pinned})
	out.workloads, out.problems = kids.workloads, append(out.problems, kids.problems...)
	out.complete = err == nil && !kids.terminating
	terminating = kids.terminating
	if err != nil {
		return ctrl.Result{}, err
	}

	if err := r.removeExtraReplicas(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	probes, next := r.probe(ctx, m, kids.workloads, kids.service)
	out.probes = probes
	return ctrl.Result{RequeueAfter: nextPass(next, out.problems, out.access.Granted)}, nil
}

// pinnedImages returns the registry's pinned-images file and the number of images in use:
// of a mirror with node access, the images the cluster's pods run from host; of another,
// none (inUse nil). When the pods cannot be listed, the file the registry has now is kept
// (an empty list would let the registry evict them), and so is the count.
func (r *Reconciler) pinnedImages(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, host string, granted bool) (file string, inUse *int32) {
	if !granted || r.Pods == nil {
		return renderPinnedImages(host, nil, false), nil
	}
	listCtx, cancel := context.WithTimeout(ctx, podListTimeout)
	pods, err := r.podsInUse(listCtx)
	cancel()
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Kept the pinned images as they are")
		live := &corev1.ConfigMap{}
		if gerr := r.Children.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: configMapName(m)}, live); gerr == nil {
			if f, ok := live.Data[pinnedImagesKey]; ok {
				return f, m.Status.ImagesInUse
			}
		}
		return renderPinnedImages(host, nil, true), m.Status.ImagesInUse
	}
	images := imagesInUse(pods, host)
	n := int32(min(len(images), math.MaxInt32))
	return renderPinnedImages(host, images, true), &n
}

// podListTimeout bounds waiting for the pod cache: its first list starts a watch, which
// RBAC or a namespace-scoped install may refuse.
const podListTimeout = 30 * time.Second

// reconcileDelete handles a mirror being deleted. No finalizer is needed: the garbage
// collector deletes the children (they carry controller references), and each node agent
// removes its hosts.toml as its pod stops. Only the mirror's metric series goes now.
func (r *Reconciler) reconcileDelete(m *mirrorsv1alpha1.RegistryMirror) {
	forgetMirror(client.ObjectKeyFromObject(m))
}

// reconcileHostPort chooses the node agent's host port (see pickHostPort). In the steady
// state the port the DaemonSet has is kept without looking at other mirrors. A port that
// cannot be had is a problem, and the port is then 0 (no DaemonSet is applied).
func (r *Reconciler) reconcileHostPort(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) (int32, []problem, error) {
	var current int32
	ds := &appsv1.DaemonSet{}
	if err := r.Children.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: daemonSetName(m)}, ds); err == nil {
		if metav1.IsControlledBy(ds, m) {
			current = hostPortOf(&ds.Spec.Template.Spec)
		}
	} else if !apierrors.IsNotFound(err) {
		return 0, nil, err
	}
	held, requested := map[int32]string{}, map[int32]string{}
	if !keepsHostPort(m.Spec.HostPort, current) {
		var err error
		if held, requested, err = r.portsOfOthers(ctx, m); err != nil {
			return 0, nil, err
		}
	}
	port, conflict, err := r.ports.assign(client.ObjectKeyFromObject(m), m.Spec.HostPort, current, held, requested)
	switch {
	case err != nil:
		return 0, []problem{{mirrorsv1alpha1.ReasonHostPortsExhausted, err.Error()}}, nil
	case conflict != "":
		return 0, []problem{{mirrorsv1alpha1.ReasonHostPortConflict,
			fmt.Sprintf("host port %d is used by the node agents of RegistryMirror %s; choose another spec.hostPort", port, conflict)}}, nil
	}
	return port, nil, nil
}

// portsOfOthers reads from the cache which host ports other mirrors' node agents hold
// and which ports other mirrors ask for.
func (r *Reconciler) portsOfOthers(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) (held, requested map[int32]string, err error) {
	held, requested = map[int32]string{}, map[int32]string{}
	var dss appsv1.DaemonSetList
	if err := r.Children.List(ctx, &dss, client.MatchingLabels{labelManagedBy: managedBy, labelComponent: componentAgent}); err != nil {
		return nil, nil, fmt.Errorf("listing node agent DaemonSets: %w", err)
	}
	for i := range dss.Items {
		ds := &dss.Items[i]
		owner := ds.Namespace + "/" + ds.Labels[labelInstance]
		if ds.Namespace == m.Namespace && ds.Name == daemonSetName(m) {
			continue
		}
		if p := hostPortOf(&ds.Spec.Template.Spec); p != 0 {
			held[p] = owner
		}
	}
	var mirrors mirrorsv1alpha1.RegistryMirrorList
	if err := r.Client.List(ctx, &mirrors); err != nil {
		return nil, nil, fmt.Errorf("listing RegistryMirrors: %w", err)
	}
	for i := range mirrors.Items {
		o := &mirrors.Items[i]
		if o.Spec.HostPort != nil && (o.Namespace != m.Namespace || o.Name != m.Name) {
			requested[*o.Spec.HostPort] = o.Namespace + "/" + o.Name
		}
	}
	return held, requested, nil
}

// childrenResult is what the children phase came to.
type childrenResult struct {
	// workloads are the live children the status reports on.
	workloads workloads
	// service is the live ClusterIP Service, through which the registry is probed.
	service *corev1.Service
	// problems are the children that could not be made to match, in apply order.
	problems []problem
	// terminating: the namespace is being deleted.
	terminating bool
}

// reconcileChildren makes every child of the mirror match, in apply order, going on
// past a child that fails; the error joins the failures.
func (r *Reconciler) reconcileChildren(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, rch reach) (childrenResult, error) {
	res := childrenResult{workloads: workloads{registries: make([]registryReplica, replicas(m))}}
	var errs []error
	for _, c := range desiredChildren(m, r.Images, rch) {
		cr, err := r.reconcileChild(ctx, m, c)
		if err != nil {
			errs = append(errs, err)
		}
		if cr.problem != nil {
			res.problems = append(res.problems, *cr.problem)
		}
		res.terminating = res.terminating || cr.terminating
		switch o := cr.live.(type) {
		case *appsv1.StatefulSet:
			res.workloads.registries[c.replica].statefulSet = o
		case *appsv1.DaemonSet:
			res.workloads.daemonSet = o
		case *corev1.PersistentVolumeClaim:
			res.workloads.registries[c.replica].pvc = o
		case *corev1.Service:
			if o.Name == serviceName(m) {
				res.service = o
			}
		}
	}
	return res, kerrors.NewAggregate(errs)
}

// childResult is what reconciling one child came to.
type childResult struct {
	// live is the child as it is now when it is this mirror's; nil when it does not
	// exist, belongs to someone else, or could not be written.
	live client.Object
	// problem is why the child does not match, if it does not.
	problem *problem
	// terminating: the namespace is being deleted.
	terminating bool
}

// readChild reads child c into c.live and says whether it exists. The child cache holds
// only objects labelled as the mirrors' own; when it has none of the name, the API server
// is asked whether someone else's object (or one of ours whose labels were removed) holds
// it, so decideChild sees who controls it. That read happens while a child is missing or
// held by someone else, not in a steady state.
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

// reconcileChild makes one child match (see decideChild): an object of the same name
// that this mirror does not control is reported and left alone; an up-to-date one is
// left as is; otherwise the desired fields are applied.
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
		fields := drift(c)
		if err := r.revertChild(ctx, c); err != nil {
			objectWrites.WithLabelValues(c.kind, "failed").Inc()
			return childResult{problem: &problem{mirrorsv1alpha1.ReasonApplyFailed, fmt.Sprintf("reverting %s of %s %s failed: %v", strings.Join(fields, ", "), c.kind, key, err)}},
				fmt.Errorf("reverting %s %s: %w", c.kind, key, err)
		}
		objectWrites.WithLabelValues(c.kind, "reverted").Inc()
		ctrl.LoggerFrom(ctx).Info("Reverted changes by others", strings.ToLower(c.kind[:1])+c.kind[1:], klog.KObj(c.live), "fields", fields) //nolint:loggercheck // the key names the kind, Kubernetes style ("statefulSet", klog.KObj)
		r.Recorder.Eventf(m, c.live, corev1.EventTypeWarning, EventReverted, "Revert",
			"Reverted %s of %s %s: the operator's objects carry only what it sets", strings.Join(fields, ", "), c.kind, key)
	}
	if err := r.applyChild(ctx, c); err != nil {
		switch classifyApplyError(err) {
		case applyNamespaceTerminating:
			return childResult{terminating: true}, nil
		case applyRefused:
			objectWrites.WithLabelValues(c.kind, "refused").Inc()
			res := childResult{problem: &problem{mirrorsv1alpha1.ReasonApplyFailed, fmt.Sprintf("applying %s %s was refused: %v", c.kind, key, err)}}
			if exists {
				res.live = c.live
			}
			return res, nil
		default:
			objectWrites.WithLabelValues(c.kind, "failed").Inc()
			return childResult{problem: &problem{mirrorsv1alpha1.ReasonApplyFailed, fmt.Sprintf("applying %s %s failed: %v", c.kind, key, err)}},
				fmt.Errorf("applying %s %s: %w", c.kind, key, err)
		}
	}
	// The apply response (written into the apply configuration) is the live object.
	if err := roundTrip(c.desired, c.live); err != nil {
		return childResult{}, fmt.Errorf("decoding the applied %s %s: %w", c.kind, key, err)
	}
	created := action == childCreate
	verb := EventUpdated
	if created {
		verb = EventCreated
	}
	objectWrites.WithLabelValues(c.kind, strings.ToLower(verb)).Inc()
	ctrl.LoggerFrom(ctx).Info(verb+" "+c.kind, strings.ToLower(c.kind[:1])+c.kind[1:], klog.KObj(c.live)) //nolint:loggercheck // the key names the kind, Kubernetes style ("statefulSet", klog.KObj)
	r.recordChildWrite(m, c.kind, key, c.live, created)
	return childResult{live: c.live}, nil
}

// probe asks the registry (through its Service, once a replica is ready) and the
// upstream, and says when to probe again (0: never, probing is off). The cache report of
// a single registry comes through the Service too; of several, from each ready replica's
// own pod (the Service would answer from either, and the status would flip between
// them), merged (mergeCacheReports).
func (r *Reconciler) probe(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, w workloads, service *corev1.Service) (probeResults, time.Duration) {
	if r.Prober == nil {
		p := probeResults{off: true}
		return p, nextProbe(p)
	}
	var p probeResults
	p.upstreamProbed, p.upstreamErr = true, r.Prober.Upstream(ctx, upstreamURL(m))
	addr, ok := registryAddress(w.readyRegistries(), service)
	if !ok {
		return p, nextProbe(p)
	}
	p.registryAddr = addr
	p.registryProbed, p.registryErr = true, r.Prober.Registry(ctx, addr)
	if p.registryErr != nil {
		return p, nextProbe(p)
	}
	var reports []CacheReport
	for _, addr := range cacheReportAddresses(m, w, addr) {
		rep, err := r.Prober.Cache(ctx, addr)
		if err != nil {
			continue // the prober logs why
		}
		reports = append(reports, rep)
	}
	p.cache = mergeCacheReports(reports)
	return p, nextProbe(p)
}

// report turns the pass's outcome into the status: it sets the readiness gauge, sends
// the Events the change is news for, and writes the status when it changed (progress
// after progressHold; after then says when to look again).
func (r *Reconciler) report(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, out outcome) (after time.Duration, err error) {
	now := r.Clock.Now()
	key := client.ObjectKeyFromObject(m)
	stored := r.statuses.latest(m)
	m.Status = *stored.Status.DeepCopy()
	statusTime := metav1.NewTime(now.Truncate(time.Second))
	status := computeStatus(m, out, statusTime)
	recordReady(key, meta.IsStatusConditionTrue(status.Conditions, mirrorsv1alpha1.ConditionReady))
	recordImages(key, status.ImagesInUse, status.ImagesCached)
	recordCache(key, out.probes.cache)
	write, after := decideStatusWrite(m.Status, status, r.statuses.heldFor(key, now))
	switch {
	case after > 0:
		r.statuses.hold(key, now)
		return after, nil
	case !write:
		r.statuses.release(key)
		return 0, nil
	}
	r.recordEvents(m, statusEvents(m.Status.Conditions, status.Conditions))
	r.recordEvents(m, specEvents(m, m.Status.ObservedGeneration, status.ObservedGeneration))
	return 0, r.writeStatus(ctx, m, stored, out, statusTime)
}
