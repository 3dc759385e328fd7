// Package registrymirror runs a pull-through image cache per RegistryMirror: a CNCF
// distribution registry in proxy mode (StatefulSet, cache PVC, ConfigMap, ClusterIP and
// headless Services) and a node agent DaemonSet that publishes the mirror on each node's
// loopback address and, when asked, points containerd at it.
package registrymirror

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/internal/operator"
)

// fieldOwner is the Server-Side Apply field manager of everything this controller writes.
const fieldOwner = "registrymirror"

// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors,verbs=get;list;watch
// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors/status,verbs=patch
// +kubebuilder:rbac:groups=mirrors.quartet.dev,resources=registrymirrors/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services;configmaps;persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets;daemonsets,verbs=get;list;watch;create;patch

// Reconciler makes a RegistryMirror's six children match its spec and reports on them.
type Reconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	Clock    clock.PassiveClock
	Images   Images
	Shared   operator.Shared
	// Prober checks that the registry answers and whether the upstream does; nil turns
	// probing off (Ready then rests on the workloads alone).
	Prober Prober
	// HostsRoot is the nodes' containerd hosts directory (config_path), where the node
	// agents write <upstream host>/hosts.toml.
	HostsRoot string

	ports portBook
}

// child is one object a mirror owns: what it should be and an empty object to read it into.
type child struct {
	kind    string
	name    string
	desired runtime.ApplyConfiguration
	live    client.Object
}

// Reconcile applies the mirror's children and writes its status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	if !r.Shared.Watches(req.Namespace) {
		return ctrl.Result{}, nil
	}
	m := &mirrorsv1alpha1.RegistryMirror{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.ports.release(req.NamespacedName)
			forgetMirror(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading the RegistryMirror: %w", err)
	}
	if !m.DeletionTimestamp.IsZero() {
		// No finalizer is needed: the garbage collector deletes the children (they carry
		// controller references), and each node agent removes its hosts.toml as its pod stops.
		forgetMirror(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	obs := observed{}
	defer func() {
		if err := r.writeStatus(ctx, m, obs); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, fmt.Errorf("writing the status: %w", err)})
		}
	}()

	hostsDir, err := HostsDir(m.Spec.Upstream)
	if err != nil {
		// A spec mistake: say so and wait for the next edit.
		obs.problems = append(obs.problems, problem{ReasonInvalidUpstream, err.Error()})
		return ctrl.Result{}, nil
	}
	if err := r.reconcileHostPort(ctx, m, &obs); err != nil {
		return ctrl.Result{}, fmt.Errorf("choosing the host port: %w", err)
	}

	var errs []error
	var service *corev1.Service
	for _, c := range r.children(m, obs.hostPort, hostsDir) {
		live, err := r.reconcileChild(ctx, m, c, &obs)
		if err != nil {
			errs = append(errs, err)
		}
		switch o := live.(type) {
		case *appsv1.StatefulSet:
			obs.statefulSet = o
		case *appsv1.DaemonSet:
			obs.daemonSet = o
		case *corev1.PersistentVolumeClaim:
			obs.pvc = o
		case *corev1.Service:
			if o.Name == serviceName(m) {
				service = o
			}
		}
	}
	obs.complete = len(errs) == 0 && !obs.terminating
	if err := kerrors.NewAggregate(errs); err != nil {
		return ctrl.Result{}, err
	}
	return r.probe(ctx, m, service, &obs), nil
}

// Probe timing: while the registry does not answer yet (its Service may lag its pod's
// readiness by a moment), ask again soon; then keep an eye on the upstream.
const (
	probeSoon   = 3 * time.Second
	probeSteady = 30 * time.Second
)

// probe asks the registry (through its Service, once it has a ready replica) and the
// upstream, and says when to look again.
func (r *Reconciler) probe(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, service *corev1.Service, obs *observed) ctrl.Result {
	if r.Prober == nil {
		obs.probesOff = true
		return ctrl.Result{}
	}
	obs.upstreamProbed, obs.upstreamErr = true, r.Prober.Upstream(ctx, upstreamURL(m))
	if obs.statefulSet == nil || obs.statefulSet.Status.ReadyReplicas == 0 || service == nil || service.Spec.ClusterIP == "" {
		return ctrl.Result{RequeueAfter: probeSteady}
	}
	obs.registryAddr = fmt.Sprintf("%s:%d", service.Spec.ClusterIP, RegistryPort)
	obs.registryProbed, obs.registryErr = true, r.Prober.Registry(ctx, obs.registryAddr)
	if obs.registryErr != nil {
		return ctrl.Result{RequeueAfter: probeSoon}
	}
	return ctrl.Result{RequeueAfter: probeSteady}
}

// children lists the mirror's objects in apply order: what the registry pod mounts comes
// before the StatefulSet. Without a host port there is no DaemonSet to apply.
func (r *Reconciler) children(m *mirrorsv1alpha1.RegistryMirror, hostPort int32, hostsDir string) []child {
	config := renderRegistryConfig(m)
	out := []child{
		{"ConfigMap", configMapName(m), desiredConfigMap(m, config), &corev1.ConfigMap{}},
		{"Service", serviceName(m), desiredService(m), &corev1.Service{}},
		{"Service", headlessName(m), desiredHeadlessService(m), &corev1.Service{}},
		{"PersistentVolumeClaim", pvcName(m), desiredPVC(m), &corev1.PersistentVolumeClaim{}},
		{"StatefulSet", statefulSetName(m), desiredStatefulSet(m, r.Images, shortHash([]byte(config))), &appsv1.StatefulSet{}},
	}
	if hostPort != 0 {
		out = append(out, child{"DaemonSet", daemonSetName(m), desiredDaemonSet(m, r.Images, hostPort, r.hostsRoot()+"/"+hostsDir), &appsv1.DaemonSet{}})
	}
	return out
}

func (r *Reconciler) hostsRoot() string {
	if r.HostsRoot == "" {
		return DefaultHostsRoot
	}
	return strings.TrimSuffix(r.HostsRoot, "/")
}

// reconcileChild makes one child match: an object of the same name that this mirror
// does not control is reported and left alone; an up-to-date one is left as is;
// otherwise the desired fields are applied. It returns the live object when it is ours.
func (r *Reconciler) reconcileChild(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, c child, obs *observed) (client.Object, error) {
	log := logf.FromContext(ctx)
	key := types.NamespacedName{Namespace: m.Namespace, Name: c.name}
	exists := true
	if err := r.Get(ctx, key, c.live); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading %s %s: %w", c.kind, key, err)
		}
		exists = false
	}
	if exists && !metav1.IsControlledBy(c.live, m) {
		objectWrites.WithLabelValues(c.kind, "conflict").Inc()
		obs.problems = append(obs.problems, problem{ReasonConflict,
			fmt.Sprintf("%s %s exists and is not controlled by this RegistryMirror; it is left alone (delete or rename it)", c.kind, key)})
		return nil, nil
	}
	if exists && !needsApply(c.desired, c.live) {
		return c.live, nil
	}
	if err := r.Apply(ctx, c.desired, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going, and the mirror with it: nothing to report.
			obs.terminating = true
			return nil, nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// Refused for good (a PVC that cannot grow, an immutable field): retrying
			// changes nothing until the spec or the cluster changes, which wakes us anyway.
			objectWrites.WithLabelValues(c.kind, "refused").Inc()
			obs.problems = append(obs.problems, problem{ReasonApplyFailed, fmt.Sprintf("applying %s %s was refused: %v", c.kind, key, err)})
			if exists {
				return c.live, nil
			}
			return nil, nil
		}
		objectWrites.WithLabelValues(c.kind, "failed").Inc()
		obs.problems = append(obs.problems, problem{ReasonApplyFailed, fmt.Sprintf("applying %s %s failed: %v", c.kind, key, err)})
		return nil, fmt.Errorf("applying %s %s: %w", c.kind, key, err)
	}
	// The apply response (written into the apply configuration) is the live object.
	if err := roundTrip(c.desired, c.live); err != nil {
		return nil, fmt.Errorf("decoding the applied %s %s: %w", c.kind, key, err)
	}
	action, verb := "Update", "Updated"
	if !exists {
		action, verb = "Create", "Created"
	}
	objectWrites.WithLabelValues(c.kind, strings.ToLower(verb)).Inc()
	log.Info(verb+" "+c.kind, strings.ToLower(c.kind[:1])+c.kind[1:], klog.KObj(c.live))
	r.Recorder.Eventf(m, c.live, corev1.EventTypeNormal, verb, action, "%s %s %s", verb, c.kind, key)
	return c.live, nil
}

// reconcileHostPort chooses the node agent's host port (see pickHostPort). In the steady
// state the port the DaemonSet has is kept without looking at other mirrors.
func (r *Reconciler) reconcileHostPort(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, obs *observed) error {
	key := client.ObjectKeyFromObject(m)
	var current int32
	ds := &appsv1.DaemonSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: daemonSetName(m)}, ds); err == nil {
		if metav1.IsControlledBy(ds, m) {
			current = hostPortOf(&ds.Spec.Template.Spec)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	held, requested := map[int32]string{}, map[int32]string{}
	fastPath := current != 0 && (m.Spec.HostPort == nil || *m.Spec.HostPort == current)
	if !fastPath {
		var err error
		if held, requested, err = r.portsOfOthers(ctx, m); err != nil {
			return err
		}
	}
	port, conflict, err := r.ports.assign(key, m.Spec.HostPort, current, held, requested)
	switch {
	case err != nil:
		obs.problems = append(obs.problems, problem{ReasonHostPortsFull, err.Error()})
	case conflict != "":
		obs.problems = append(obs.problems, problem{ReasonHostPortConflict,
			fmt.Sprintf("host port %d is used by the node agents of RegistryMirror %s; choose another spec.hostPort", port, conflict)})
	default:
		obs.hostPort = port
	}
	return nil
}

// portsOfOthers reads from the cache which host ports other mirrors' node agents hold
// and which ports other mirrors ask for.
func (r *Reconciler) portsOfOthers(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror) (held, requested map[int32]string, err error) {
	held, requested = map[int32]string{}, map[int32]string{}
	var dss appsv1.DaemonSetList
	if err := r.List(ctx, &dss, client.MatchingLabels{labelManagedBy: managedBy, labelComponent: componentAgent}); err != nil {
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
	if err := r.List(ctx, &mirrors); err != nil {
		return nil, nil, fmt.Errorf("listing RegistryMirrors: %w", err)
	}
	for i := range mirrors.Items {
		o := &mirrors.Items[i]
		if o.Spec.HostPort != nil && !(o.Namespace == m.Namespace && o.Name == m.Name) {
			requested[*o.Spec.HostPort] = o.Namespace + "/" + o.Name
		}
	}
	return held, requested, nil
}

// writeStatus computes the status from what the pass observed and writes it when it
// changed, with a Warning Event when a new problem appears.
func (r *Reconciler) writeStatus(ctx context.Context, m *mirrorsv1alpha1.RegistryMirror, obs observed) error {
	if obs.terminating {
		return nil
	}
	status := computeStatus(m, obs, metav1.NewTime(r.Clock.Now().Truncate(time.Second)))
	recordReady(client.ObjectKeyFromObject(m), meta.IsStatusConditionTrue(status.Conditions, ConditionReady))
	if equality.Semantic.DeepEqual(m.Status, status) {
		return nil
	}
	before := meta.FindStatusCondition(m.Status.Conditions, ConditionDegraded)
	after := meta.FindStatusCondition(status.Conditions, ConditionDegraded)
	if after != nil && after.Status == metav1.ConditionTrue &&
		(before == nil || before.Status != metav1.ConditionTrue || before.Message != after.Message) {
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, after.Reason, "Reconcile", "%s", after.Message)
	}
	// The upstream going away (or coming back) is news for whoever depends on the mirror.
	upBefore := meta.FindStatusCondition(m.Status.Conditions, ConditionUpstreamReachable)
	upAfter := meta.FindStatusCondition(status.Conditions, ConditionUpstreamReachable)
	if upAfter != nil && upAfter.Status != metav1.ConditionUnknown && (upBefore == nil || upBefore.Status != upAfter.Status) {
		kind := corev1.EventTypeNormal
		if upAfter.Status == metav1.ConditionFalse {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(m, nil, kind, "Upstream"+upAfter.Reason, "Probe", "%s", upAfter.Message)
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Status = status
	return r.Status().Patch(ctx, m, patch)
}

// roundTrip copies an apply configuration filled from the server's response into a
// typed object, replacing whatever the object held.
func roundTrip(from any, into client.Object) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(into).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(b, into)
}
