// Package chaosagent implements the ChaosAgent controller (blackadder.io): an agent that, every
// spec.pauseDuration seconds, kills pods, doubles Deployment replicas and fills ConfigMaps with
// lorem ipsum at random, within strict bounds, and puts back what it changed when it is paused
// or deleted.
package chaosagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	v1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
)

// +kubebuilder:rbac:groups=blackadder.io,resources=chaosagents,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=blackadder.io,resources=chaosagents/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// cacheSyncTimeout bounds how long a round waits for an informer started on first use.
const cacheSyncTimeout = 2 * time.Minute

// Reconciler runs the rounds of every ChaosAgent.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	client.Client
	// APIReader reads from the API server directly: the body of a ConfigMap about to be
	// rewritten (the cache holds ConfigMap metadata only) and fresh objects after a conflict.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Clock     clock.Clock
	// NewRand returns the random source of an agent's round; spec.seed makes it reproducible.
	NewRand func(agent *v1beta1.ChaosAgent, round int64) *rand.Rand
	// Protected namespaces are never touched (the --chaos-protected-namespaces flag and the
	// operator's own namespace).
	Protected sets.Set[string]
	// Watched are the manager's watched namespaces (empty: all).
	Watched sets.Set[string]

	// lastRound remembers when each agent (by name) last ran a round in this process, so a
	// pass that reads a stale agent from the cache cannot run a round twice.
	lastRound sync.Map // name → roundMemo
	// immutable remembers ConfigMaps found immutable: the metadata cache cannot tell, and
	// immutability is permanent for an object's UID.
	immutableMu sync.Mutex
	immutable   sets.Set[types.UID]
}

type roundMemo struct {
	uid  types.UID
	time time.Time
}

// seededRand is the default NewRand: spec.seed and the round number seed a PCG, so the same
// seed over the same objects makes the same choices; without a seed every round is random.
func seededRand(agent *v1beta1.ChaosAgent, round int64) *rand.Rand {
	if agent.Spec.Seed != nil {
		return rand.New(rand.NewPCG(uint64(*agent.Spec.Seed), uint64(round)))
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// Reconcile runs a round when one is due, restores what the agent changed when it is paused
// or deleted, and writes status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	agent := &v1beta1.ChaosAgent{}
	if err := r.Get(ctx, req.NamespacedName, agent); err != nil {
		if apierrors.IsNotFound(err) {
			r.lastRound.Delete(req.Name)
			forgetAgentMetrics(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !agent.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, agent)
	}
	if !controllerutil.ContainsFinalizer(agent, Finalizer) {
		base := agent.DeepCopy()
		controllerutil.AddFinalizer(agent, Finalizer)
		if err := r.Patch(ctx, agent, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	p := pass{Now: r.Clock.Now(), Generation: agent.Generation, Spec: withDefaults(agent.Spec)}
	var result ctrl.Result
	scope, err := r.scopeOf(p.Spec)
	switch {
	case err != nil:
		p.InvalidSpec = err.Error() // a user's mistake: wait for the next edit
	case p.Spec.Paused:
		if *p.Spec.RestoreOnDelete {
			p.Err = r.reconcileRestore(ctx, agent, &p)
		}
	default:
		result = r.reconcileRound(ctx, agent, scope, &p)
	}
	if err := r.writeStatus(ctx, agent, p); err != nil {
		return ctrl.Result{}, errors.Join(p.Err, fmt.Errorf("writing status: %w", err))
	}
	if p.Err != nil {
		return ctrl.Result{}, p.Err
	}
	return result, nil
}

// reconcileRound runs a round when one is due and says when to come back.
func (r *Reconciler) reconcileRound(ctx context.Context, agent *v1beta1.ChaosAgent, scope Scope, p *pass) ctrl.Result {
	pause := time.Duration(p.Spec.PauseDuration) * time.Second
	due, next := roundDue(r.lastRoundTime(agent), pause, p.Now)
	p.NextRound = &next
	if !due {
		return ctrl.Result{RequeueAfter: next.Sub(p.Now)}
	}
	if err := r.runRound(ctx, agent, scope, p); err != nil {
		// Nothing was done: the returned error retries the round with backoff.
		p.Err, p.NextRound = fmt.Errorf("running round: %w", err), nil
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: pause}
}

// lastRoundTime is the later of status.lastRoundTime and this process's memory.
func (r *Reconciler) lastRoundTime(agent *v1beta1.ChaosAgent) *time.Time {
	var last *time.Time
	if agent.Status.LastRoundTime != nil {
		t := agent.Status.LastRoundTime.Time
		last = &t
	}
	if v, ok := r.lastRound.Load(agent.Name); ok {
		m := v.(roundMemo)
		if m.uid == agent.UID && (last == nil || m.time.After(*last)) {
			last = &m.time
		}
	}
	return last
}

// runRound reads the candidates from the cache, decides and acts.
func (r *Reconciler) runRound(ctx context.Context, agent *v1beta1.ChaosAgent, scope Scope, p *pass) error {
	logger := log.FromContext(ctx)
	inv, marked, err := r.inventory(ctx, agent, p.Spec, agent.Status.ChangedObjects > 0)
	if err != nil {
		return err
	}
	// From here on the round counts as run, whatever happens to its actions.
	r.lastRound.Store(agent.Name, roundMemo{uid: agent.UID, time: p.Now})
	r.pruneImmutable(inv.ConfigMaps, p.Spec.IpsumMode)
	scope.ImmutableConfigMaps = r.immutableSet()
	round := agent.Status.Rounds + 1
	rng := r.NewRand(agent, round)
	actions := decide(p.Spec, selectCandidates(inv, scope), rng)
	p.RoundRan = true
	roundsTotal.WithLabelValues(agent.Name).Inc()

	for _, a := range actions {
		rec := r.act(ctx, agent, p.Spec, scope, a, rng)
		p.Records = append(p.Records, rec)
		r.recordEvents(agent, a.Target, rec)
		recordActionMetric(agent.Name, rec)
		if marked != nil && rec.Result == ResultSucceeded && rec.Kind != v1beta1.ActionKillPod {
			marked.Insert(markKey(a))
		}
	}
	if marked != nil {
		n := int32(marked.Len())
		p.ChangedObjects = &n
		changedObjects.WithLabelValues(agent.Name).Set(float64(n))
	}
	logger.V(1).Info("Ran round", "chaosAgent", klog.KObj(agent), "round", round, "actions", len(actions), "dryRun", p.Spec.DryRun)
	return nil
}

// inventory lists, from the informer cache, what the agent's modes need. Informers start on
// first use, so an operator without agents caches no pods. marked holds "Kind/ns/name" of the
// objects that carry this agent's marks, when Deployments and ConfigMaps were read (nil if not).
func (r *Reconciler) inventory(ctx context.Context, agent *v1beta1.ChaosAgent, spec v1beta1.ChaosAgentSpec, countMarks bool) (Inventory, sets.Set[string], error) {
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	var inv Inventory
	// The lists are read-only here, so the cache may hand out its own objects.
	ro := client.UnsafeDisableDeepCopy
	if spec.NamespaceSelector != nil {
		list := metadataList("Namespace")
		if err := r.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing namespaces from cache: %w", err)
		}
		inv.Namespaces = list.Items
	}
	if spec.TantrumMode {
		list := metadataList("Pod")
		if err := r.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing pods from cache: %w", err)
		}
		inv.Pods = list.Items
	}
	if spec.CancerMode || countMarks {
		list := &appsv1.DeploymentList{}
		if err := r.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing deployments from cache: %w", err)
		}
		inv.Deployments = list.Items
	}
	if spec.CancerMode {
		list := &autoscalingv2.HorizontalPodAutoscalerList{}
		if err := r.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing horizontalpodautoscalers from cache: %w", err)
		}
		inv.HPAs = list.Items
	}
	if spec.IpsumMode || countMarks {
		list := metadataList("ConfigMap")
		if err := r.List(ctx, list, ro); err != nil {
			return inv, nil, fmt.Errorf("listing configmaps from cache: %w", err)
		}
		inv.ConfigMaps = list.Items
	}
	var marked sets.Set[string]
	if spec.CancerMode || spec.IpsumMode || countMarks {
		marked = markedKeys(inv, agent.Name)
	}
	return inv, marked, nil
}

// markKey is how markedKeys names the object an action changed.
func markKey(a Action) string {
	kind := "ConfigMap"
	if a.Kind == v1beta1.ActionScaleDeployment {
		kind = "Deployment"
	}
	return kind + "/" + a.Target.Key()
}

// markedKeys returns "Kind/ns/name" of the Deployments and ConfigMaps labelled with agent.
func markedKeys(inv Inventory, agent string) sets.Set[string] {
	out := sets.New[string]()
	for i := range inv.Deployments {
		if inv.Deployments[i].Labels[LabelAgent] == agent {
			out.Insert("Deployment/" + inv.Deployments[i].Namespace + "/" + inv.Deployments[i].Name)
		}
	}
	for i := range inv.ConfigMaps {
		if inv.ConfigMaps[i].Labels[LabelAgent] == agent {
			out.Insert("ConfigMap/" + inv.ConfigMaps[i].Namespace + "/" + inv.ConfigMaps[i].Name)
		}
	}
	return out
}

// metadataList returns an empty metadata-only list of a core/v1 kind.
func metadataList(kind string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
	return l
}

// scopeOf builds the agent's scope; an error is a spec mistake (a selector that does not parse).
func (r *Reconciler) scopeOf(spec v1beta1.ChaosAgentSpec) (Scope, error) {
	s := Scope{Protected: r.Protected.Clone().Insert(spec.ExcludedNamespaces...), Watched: r.Watched}
	var err error
	if spec.NamespaceSelector != nil {
		if s.NamespaceSelector, err = metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err != nil {
			return s, fmt.Errorf("spec.namespaceSelector: %w", err)
		}
	}
	if spec.PodSelector != nil {
		if s.PodSelector, err = metav1.LabelSelectorAsSelector(spec.PodSelector); err != nil {
			return s, fmt.Errorf("spec.podSelector: %w", err)
		}
		if s.PodSelector.Empty() {
			s.PodSelector = nil
		}
	}
	if s.NamespaceSelector != nil && s.NamespaceSelector.Empty() {
		s.NamespaceSelector = nil
	}
	return s, nil
}

// reconcileDelete puts back what the agent changed (unless restoreOnDelete is false) and then
// lets the agent go.
func (r *Reconciler) reconcileDelete(ctx context.Context, agent *v1beta1.ChaosAgent) error {
	if !controllerutil.ContainsFinalizer(agent, Finalizer) {
		return nil
	}
	spec := withDefaults(agent.Spec)
	if *spec.RestoreOnDelete {
		p := pass{Now: r.Clock.Now(), Generation: agent.Generation, Spec: spec}
		if err := r.reconcileRestore(ctx, agent, &p); err != nil {
			// Record what was put back so far; the finalizer keeps the agent until the rest is.
			return errors.Join(err, r.writeStatus(ctx, agent, p))
		}
	}
	base := agent.DeepCopy()
	controllerutil.RemoveFinalizer(agent, Finalizer)
	if err := r.Patch(ctx, agent, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	log.FromContext(ctx).Info("Released ChaosAgent", "chaosAgent", klog.KObj(agent), "restored", *spec.RestoreOnDelete)
	return nil
}

// writeStatus applies pass p to the agent's status and writes it when it changed. A conflict
// (the cached agent was stale) applies p again to the newest status read from the API server.
func (r *Reconciler) writeStatus(ctx context.Context, agent *v1beta1.ChaosAgent, p pass) error {
	current := agent
	for attempt := 0; ; attempt++ {
		want := computeStatus(current.Status, p)
		if equality.Semantic.DeepEqual(current.Status, want) {
			return nil
		}
		base := current.DeepCopy()
		current.Status = want
		err := r.Status().Patch(ctx, current, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return client.IgnoreNotFound(err)
		}
		fresh := &v1beta1.ChaosAgent{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(agent), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		current = fresh
	}
}

func (r *Reconciler) immutableSet() sets.Set[types.UID] {
	r.immutableMu.Lock()
	defer r.immutableMu.Unlock()
	return r.immutable.Clone()
}

func (r *Reconciler) rememberImmutable(uid types.UID) {
	r.immutableMu.Lock()
	defer r.immutableMu.Unlock()
	if r.immutable == nil {
		r.immutable = sets.New[types.UID]()
	}
	r.immutable.Insert(uid)
}

// pruneImmutable forgets immutable ConfigMaps that no longer exist.
func (r *Reconciler) pruneImmutable(cms []metav1.PartialObjectMetadata, listed bool) {
	if !listed {
		return
	}
	r.immutableMu.Lock()
	defer r.immutableMu.Unlock()
	if r.immutable.Len() == 0 {
		return
	}
	present := sets.New[types.UID]()
	for i := range cms {
		if r.immutable.Has(cms[i].UID) {
			present.Insert(cms[i].UID)
		}
	}
	r.immutable = present
}

// marksSelector selects the objects that carry an agent's marks.
func marksSelector(agent string) client.MatchingLabelsSelector {
	return client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{LabelAgent: agent})}
}
