// Package chaosagent implements the ChaosAgent controller (blackadder.io): every
// spec.pauseDuration seconds an agent kills pods, doubles Deployment replicas and fills
// ConfigMaps with lorem ipsum at random, within bounds, windows, a run and steady-state guards,
// and puts back what it changed (docs/chaosagent.md).
package chaosagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/status"
)

// +kubebuilder:rbac:groups=blackadder.io,resources=chaosagents,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=blackadder.io,resources=chaosagents/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch

// Reconciler runs the rounds of every ChaosAgent.
//
// # In-memory state
//
// What a pass remembers of earlier passes (docs/STYLE.md, "In-memory state"); everything else it
// reads from the API server or the manager's cache.
//
//	memory | holds                   | written / read by             | restart, leader change        | protects
//	-------+-------------------------+-------------------------------+-------------------------------+-------------------------------
//	agents | per agent (name, UID),  | runRound sets lastRound before| lost: a round is due after    | lastRound: correctness, no
//	       | agentMemory: lastRound, | it acts, prunes immutable; it | status.lastRoundTime, which   | round twice while the cache
//	       | when this process last  | and reconcileRestore add the  | every round's status write    | lags the status write or the
//	       | ran a round; immutable, | ConfigMaps they find immutable| sets (a round whose write     | write failed (TestNoRound-
//	       | the ConfigMaps its      | (the metadata cache cannot    | failed may run up to a pause  | TwiceWhileStatusLags). immut-
//	       | rounds and restores     | tell); reconcileActive and    | early); each immutable Config-| able: work, 10 → 0 GETs and
//	       | found immutable         | selectCandidates read them;   | Map is found again, once      | Skipped actions per round over
//	       |                         | forget drops the agent        |                               | 10 (BenchmarkRoundOverImmut-
//	       |                         |                               |                               | ableConfigMaps)
//
// Not in the table: the informers a round's first List starts in the manager's shared cache,
// the HTTP guards' connections, the Prometheus series, the work queue's RequeueAfter timers.
type Reconciler struct {
	Client    client.Client // reads the manager's cache, writes to the API server
	APIReader client.Reader // past the cache: a ConfigMap's body, fresh objects after a conflict
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock // rounds, windows, runs and status; tests shift it
	// NewRand returns the random source of an agent's round; spec.seed makes it reproducible.
	NewRand   func(agent *blackadderv1beta1.ChaosAgent, round int64) *rand.Rand
	HTTP      *HTTPChecker     // sends the requests of HTTP guards
	Protected sets.Set[string] // never touched: system, operator's own and flagged namespaces
	Watched   sets.Set[string] // the manager's watched namespaces (empty: all)

	status *status.Writer[*blackadderv1beta1.ChaosAgent] // ends every pass; register makes it
	mu     sync.Mutex
	agents map[string]*agentMemory
}

// agentMemory is what this process remembers of one agent: the row of the table above.
type agentMemory struct {
	uid       types.UID
	lastRound time.Time
	immutable sets.Set[types.UID]
}

// memoryOf returns the memory of agent; a new agent of the same name starts afresh.
func (r *Reconciler) memoryOf(agent *blackadderv1beta1.ChaosAgent) *agentMemory {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.agents[agent.Name]
	if m == nil || m.uid != agent.UID {
		if r.agents == nil {
			r.agents = map[string]*agentMemory{}
		}
		m = &agentMemory{uid: agent.UID, immutable: sets.New[types.UID]()}
		r.agents[agent.Name] = m
	}
	return m
}

// forget drops what the process keeps of a deleted agent: its memory and its metrics.
func (r *Reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.agents, name)
	forgetAgentMetrics(name)
}

// lastRoundTime is the later of status.lastRoundTime and the last round this process ran.
func lastRoundTime(agent *blackadderv1beta1.ChaosAgent, m *agentMemory) *time.Time {
	last := m.lastRound
	if t := agent.Status.LastRoundTime; t != nil && t.After(last) {
		last = t.Time
	}
	if last.IsZero() {
		return nil
	}
	return &last
}

// pruneImmutable forgets the immutable ConfigMaps that no longer exist.
func (m *agentMemory) pruneImmutable(cms []metav1.PartialObjectMetadata) {
	if m.immutable.Len() == 0 {
		return
	}
	present := sets.New[types.UID]()
	for i := range cms {
		if m.immutable.Has(cms[i].UID) {
			present.Insert(cms[i].UID)
		}
	}
	m.immutable = present
}

// seededRand is the default NewRand: spec.seed and the round number seed a PCG.
func seededRand(agent *blackadderv1beta1.ChaosAgent, round int64) *rand.Rand {
	if agent.Spec.Seed != nil {
		return rand.New(rand.NewPCG(uint64(*agent.Spec.Seed), uint64(round)))
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// Reconcile runs a round when one is due, inside the schedule's windows and after the guards
// held; it restores what the agent changed when it is paused, deleted, outside its windows or
// when its run ended, and ends every pass with one status write (finish).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	agent := &blackadderv1beta1.ChaosAgent{}
	if err := r.Client.Get(ctx, req.NamespacedName, agent); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := !agent.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(agent, Finalizer) {
		return ctrl.Result{}, nil // released already
	}
	// The finalizer is added in the same pass that runs the first round: the update does not
	// change the generation, so it would not wake the controller again.
	if !deleting {
		if err := r.patchFinalizer(ctx, agent, true); err != nil {
			return ctrl.Result{}, err
		}
	}
	o := outcome{Now: r.Clock.Now(), Generation: agent.Generation, Spec: withDefaults(agent.Spec)}
	defer func() {
		// The one pass that writes no status: the agent it released is gone or going.
		if deleting && !controllerutil.ContainsFinalizer(agent, Finalizer) {
			return
		}
		o.Err = retErr
		if err := r.finish(ctx, agent, o); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("writing status: %w", err))
		}
	}()
	if deleting {
		return ctrl.Result{}, r.reconcileDelete(ctx, agent, &o)
	}

	scope, err := r.scopeOf(o.Spec)
	sched, schedErr := parseSchedule(o.Spec.Schedule)
	if err == nil && schedErr != nil {
		err, o.InvalidReason = schedErr, blackadderv1beta1.ReasonInvalidSchedule
	}
	if err != nil {
		o.InvalidSpec = err.Error() // a user's mistake: wait for the next edit
		return ctrl.Result{}, nil
	}
	o.Window = windowAt(sched, o.Now)
	o.Run = currentRun(agent.Status.Run, o.Spec.RunName)
	if run, expired := expireRun(o.Spec, o.Run, o.Now); expired {
		o.Run = run
		return ctrl.Result{}, r.stop(ctx, agent, &o)
	}
	switch phaseOf(o.Spec, o.Run, o.Window.Open) {
	case phasePaused, phaseStopped:
		return ctrl.Result{}, r.restoreIfAsked(ctx, agent, &o)
	case phaseOutsideWindow:
		if heldBack(o.Spec, lastRoundTime(agent, r.memoryOf(agent)), o.Now, o.Window.Change) {
			recordSkip(agent.Name, skipOutsideWindow)
		}
		// Nothing new outside a window; what the agent changed is put back, as on a pause.
		return ctrl.Result{RequeueAfter: requeueAfter(o.Now, o.Window.Change, runDeadline(o.Spec, o.Run))}, r.restoreIfAsked(ctx, agent, &o)
	}
	return r.reconcileActive(ctx, agent, scope, &o)
}

// finish ends the pass with the status computeStatus makes of o; it acted on its spec when it
// returned no error, o.Err (docs/STYLE.md: a failed list, round or restore is retried).
func (r *Reconciler) finish(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, o outcome) error {
	_, err := r.status.Finish(ctx, agent, o.Err == nil, func(a *blackadderv1beta1.ChaosAgent) {
		a.Status = computeStatus(a.Status, o)
	})
	return err
}

// reconcileActive checks the guards when a round is due, then stops the run or runs the round.
func (r *Reconciler) reconcileActive(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, scope Scope, o *outcome) (ctrl.Result, error) {
	mem := r.memoryOf(agent)
	due, next := roundDue(lastRoundTime(agent, mem), time.Duration(o.Spec.PauseDuration)*time.Second, o.Now)
	if due {
		o.Guards = r.checkGuards(ctx, o.Spec.Guards)
	}
	if trip := firstFailure(o.Guards); trip != nil {
		recordSkip(agent.Name, skipGuardTripped)
		o.Run = endRun(o.Run, blackadderv1beta1.RunEndGuardTripped, fmt.Sprintf("guard %q tripped: %s", trip.Name, trip.Message), o.Now)
		return ctrl.Result{}, r.stop(ctx, agent, o)
	}
	if due {
		round, err := r.runRound(ctx, agent, o.Spec, scope, mem, o.Now)
		if err != nil { // nothing was done: the round is retried with backoff
			return ctrl.Result{}, fmt.Errorf("running round: %w", err)
		}
		o.Round = round
		if o.Run.StartTime == nil {
			o.Run.StartTime = timeOrNil(&o.Now)
		}
	}
	o.Round.NextRound = &next
	// The window's end, if any: without a schedule there is no change (windowAt).
	return ctrl.Result{RequeueAfter: requeueAfter(o.Now, &next, o.Window.Change, runDeadline(o.Spec, o.Run))}, nil
}

// restoreIfAsked puts back what the agent changed, unless spec.restoreOnDelete is false.
func (r *Reconciler) restoreIfAsked(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, o *outcome) error {
	if !*o.Spec.RestoreOnDelete {
		return nil
	}
	var err error
	o.Restore, err = r.reconcileRestore(ctx, agent, o.Spec)
	return err
}

// stop restores after a run ended in this pass, with an Event on the agent and a metric.
func (r *Reconciler) stop(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, o *outcome) error {
	err := r.restoreIfAsked(ctx, agent, o)
	r.recordRunEnded(agent, o.Run, *o.Spec.RestoreOnDelete, o.Restore)
	runsEnded.WithLabelValues(agent.Name, string(o.Run.EndReason)).Inc()
	ctrl.LoggerFrom(ctx).Info("Stopped ChaosAgent run", "chaosAgent", klog.KObj(agent), "reason", o.Run.EndReason,
		"message", o.Run.EndMessage, "restored", len(o.Restore.Records))
	return err
}

// reconcileDelete restores (unless restoreOnDelete is false) and then lets the agent go.
func (r *Reconciler) reconcileDelete(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, o *outcome) error {
	if err := r.restoreIfAsked(ctx, agent, o); err != nil {
		return err
	}
	if err := r.patchFinalizer(ctx, agent, false); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).Info("Released ChaosAgent", "chaosAgent", klog.KObj(agent), "restored", *o.Spec.RestoreOnDelete,
		"leftAsTheyAre", o.Restore.Left)
	return nil
}

// patchFinalizer adds the agent's finalizer (keep) or removes it, unless it is so already.
func (r *Reconciler) patchFinalizer(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, keep bool) error {
	if controllerutil.ContainsFinalizer(agent, Finalizer) == keep {
		return nil
	}
	base, verb := agent.DeepCopy(), "adding"
	if keep {
		controllerutil.AddFinalizer(agent, Finalizer)
	} else {
		verb = "removing"
		controllerutil.RemoveFinalizer(agent, Finalizer)
	}
	if err := r.Client.Patch(ctx, agent, mergeGuarded(base)); err != nil {
		return fmt.Errorf("%s finalizer: %w", verb, err)
	}
	return nil
}

// runRound lists, decides and acts, and remembers the round and the immutable ConfigMaps it found.
func (r *Reconciler) runRound(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, scope Scope,
	mem *agentMemory, now time.Time) (roundOutcome, error) {
	inv, marked, err := r.inventory(ctx, agent, spec, agent.Status.ChangedObjects > 0)
	if err != nil {
		return roundOutcome{}, err
	}
	// From here on the round counts as run, whatever happens to its actions.
	mem.lastRound = now
	if spec.IpsumMode {
		mem.pruneImmutable(inv.ConfigMaps)
	}
	scope.ImmutableConfigMaps = mem.immutable
	round := agent.Status.Rounds + 1
	rng := r.NewRand(agent, round)
	candidates := selectCandidates(inv, scope)
	actions := decide(spec, candidates, rng)
	roundsTotal.WithLabelValues(agent.Name).Inc()
	recordSkip(agent.Name, idleReason(spec, candidates, actions))

	out := roundOutcome{Ran: true}
	for _, a := range actions {
		rec := r.applyAction(ctx, agent, spec, scope, a, rng)
		out.Records = append(out.Records, rec)
		r.recordEvents(agent, a.Target, rec)
		recordActionMetric(agent.Name, rec)
		switch {
		case rec.Outcome == skipped(SkipImmutable):
			mem.immutable.Insert(a.Target.UID)
		case marked != nil && rec.Outcome.Kind == resultSucceeded && rec.Kind != blackadderv1beta1.ActionKillPod:
			marked.Insert(markKey(a))
		}
	}
	if marked != nil {
		out.ChangedObjects = ptr.To(int32(marked.Len()))
		changedObjects.WithLabelValues(agent.Name).Set(float64(marked.Len()))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Ran round", "chaosAgent", klog.KObj(agent), "round", round, "actions", len(actions), "dryRun", spec.DryRun)
	return out, nil
}

// reconcileRestore puts back every Deployment and ConfigMap that carries the agent's marks, with
// an Event and a metric for each; what restoreSkip rules out is reported, not retried (an
// object outside the scope is neither read nor written).
func (r *Reconciler) reconcileRestore(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec) (restoreOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	deps, cms := &appsv1.DeploymentList{}, metadataList("ConfigMap")
	marked := client.MatchingLabels{LabelAgent: agent.Name}
	if err := r.list(ctx, "changed deployments", deps, marked); err != nil {
		return restoreOutcome{}, err
	}
	if err := r.list(ctx, "changed configmaps", cms, marked); err != nil {
		return restoreOutcome{}, err
	}
	scope, mem := r.baseScope(spec), r.memoryOf(agent)
	out := restoreOutcome{Attempted: true}
	var errs []error
	restore := func(kind blackadderv1beta1.ActionKind, victim client.Object, put func() (*edit, error)) {
		rec := r.newRecord(kind, client.ObjectKeyFromObject(victim).String())
		if reason, detail := restoreSkip(scope, victim.GetNamespace(), false); reason != "" {
			rec.set(detail, skipped(reason))
		} else if e, err := put(); apierrors.IsNotFound(err) || (err == nil && e == nil) {
			return // nothing to restore: no object, or no marks
		} else if err != nil { // retried
			rec.set(short(err), failed(reasonOf(err)))
			errs = append(errs, fmt.Errorf("%s %s: %w", strings.ToLower(victimKind(kind)), rec.Target, err))
		} else {
			rec.set(e.detail, e.res)
		}
		out.Records = append(out.Records, *rec)
		if rec.Outcome.Kind == resultSkipped {
			out.Left++
		}
		if rec.Outcome == skipped(SkipImmutable) {
			mem.immutable.Insert(victim.GetUID())
		}
		r.recordEventsFor(agent, victim, *rec)
		recordActionMetric(agent.Name, *rec)
	}
	for i := range deps.Items {
		dep := &deps.Items[i]
		restore(blackadderv1beta1.ActionRestoreDeployment, dep, func() (*edit, error) { return r.restoreOneDeployment(ctx, agent.Name, dep) })
	}
	for i := range cms.Items {
		cm := &corev1.ConfigMap{ObjectMeta: cms.Items[i].ObjectMeta}
		restore(blackadderv1beta1.ActionRestoreConfigMap, cm, func() (*edit, error) {
			return r.restoreOneConfigMap(ctx, agent.Name, scope, client.ObjectKeyFromObject(cm))
		})
	}
	out.Failed = len(errs)
	changedObjects.WithLabelValues(agent.Name).Set(float64(out.Failed + out.Left))
	if len(errs) > 0 {
		return out, fmt.Errorf("restoring %d object(s): %w", len(errs), errors.Join(errs...))
	}
	return out, nil
}

// baseScope is the agent's scope without its selectors, which restore keeps to.
func (r *Reconciler) baseScope(spec blackadderv1beta1.ChaosAgentSpec) Scope {
	return Scope{Protected: r.Protected.Clone().Insert(spec.ExcludedNamespaces...), Watched: r.Watched}
}

// scopeOf builds the agent's scope; an error is a selector that does not parse.
func (r *Reconciler) scopeOf(spec blackadderv1beta1.ChaosAgentSpec) (Scope, error) {
	s := r.baseScope(spec)
	s.Workloads = spec.MeanSecondsBetweenKills != nil
	var err error
	if s.NamespaceSelector, err = selectorOf(spec.NamespaceSelector); err != nil {
		return s, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	if s.PodSelector, err = selectorOf(spec.PodSelector); err != nil {
		return s, fmt.Errorf("spec.podSelector: %w", err)
	}
	return s, nil
}

// selectorOf parses a label selector; nil for none or an empty one (both select everything).
func selectorOf(in *metav1.LabelSelector) (labels.Selector, error) {
	if in == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(in)
	if err != nil || sel.Empty() {
		return nil, err
	}
	return sel, nil
}
