// Package chaosagent implements the ChaosAgent controller (blackadder.io): an agent that, every
// spec.pauseDuration seconds, kills pods, doubles Deployment replicas and fills ConfigMaps with
// lorem ipsum at random, within strict bounds, and puts back what it changed when it is paused
// or deleted. Optionally it acts only inside time windows, for a bounded run, and while
// steady-state guards hold: when one fails it stops and puts everything back.
package chaosagent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	"github.com/quartet-operator/quartet/internal/operator"
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
// What the controller keeps in process memory from one pass to the next (docs/STYLE.md, "In-memory
// state"); everything else a pass reads from the API server or a cache of it. A restart or a change
// of leader loses all of it; the fifth column says what that costs and how the next passes recover.
// A new piece of such memory needs a row here.
//
//	memory             | holds                      | written by             | read by                  | restart, leader change           | protects
//	-------------------+----------------------------+------------------------+--------------------------+----------------------------------+-----------------------
//	lastRound          | per agent name: the        | runRound, before the   | lastRoundTime, the later | lost; lastRoundTime falls back   | correctness: a pass
//	(sync.Map)         | agent's UID and when this  | round acts; Reconcile  | of it and                | on status.lastRoundTime, which   | that reads the agent
//	                   | process last ran a round   | deletes it when the    | status.lastRoundTime,    | the status write of every round  | from a cache that does
//	                   | for it (roundMemo)         | agent is gone          | for roundIsDue and       | sets (computeStatus) and which a | not show the last
//	                   |                            |                        | reconcileRound           | new process's first list shows.  | round's status yet
//	                   |                            |                        |                          | A round whose status write never | runs no second round
//	                   |                            |                        |                          | succeeded can run again up to    |
//	                   |                            |                        |                          | one pause early.                 |
//	                   |                            |                        |                          |                                  |
//	immutable,         | ConfigMaps found           | rememberImmutable,     | immutableSet (runRound), | lost; a round may pick an        | work: a round's action
//	immutableMu (UIDs) | immutable, which the       | from ipsumConfigMap    | as the scope's           | immutable ConfigMap again:       | is not spent on a
//	                   | metadata cache cannot tell | and                    | ImmutableConfigMaps, for | ipsumConfigMap reads it from the | ConfigMap it cannot
//	                   |                            | restoreOneConfigMap;   | selectCandidates         | API server, skips it             | change
//	                   |                            | pruneImmutable         |                          | (SkipImmutable) and remembers it |
//	                   |                            | (runRound) drops those |                          |                                  |
//	                   |                            | no longer listed       |                          |                                  |
//
// Not in the table: the informers of pods, Deployments, ConfigMaps (metadata),
// HorizontalPodAutoscalers and Namespaces (metadata) that inventory's first List starts in the
// manager's shared cache; the HTTP guard client's connections; the Prometheus series
// (forgetAgentMetrics); the work queue's RequeueAfter timers, which every pass sets again from
// status and the clock (after a start, the agents' first list wakes each).
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly: the body of a ConfigMap about to be
	// rewritten (the cache holds ConfigMap metadata only) and fresh objects after a conflict.
	APIReader client.Reader
	// Recorder writes the Events of every action, on its target and on the agent.
	Recorder events.EventRecorder
	// Clock is the time of rounds, windows, runs and status; tests shift it.
	Clock clock.PassiveClock
	// NewRand returns the random source of an agent's round; spec.seed makes it reproducible.
	NewRand func(agent *blackadderv1beta1.ChaosAgent, round int64) *rand.Rand
	// HTTP sends the requests of HTTP guards.
	HTTP HTTPChecker
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

// roundMemo is when an agent, by UID (a new agent of the same name starts afresh), last ran a
// round in this process.
type roundMemo struct {
	uid  types.UID
	time time.Time
}

// seededRand is the default NewRand: spec.seed and the round number seed a PCG, so the same
// seed over the same objects makes the same choices; without a seed every round is random.
func seededRand(agent *blackadderv1beta1.ChaosAgent, round int64) *rand.Rand {
	if agent.Spec.Seed != nil {
		return rand.New(rand.NewPCG(uint64(*agent.Spec.Seed), uint64(round)))
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// Reconcile runs a round when one is due, inside the schedule's windows and after the guards
// held; it restores what the agent changed when it is paused, deleted, outside its windows
// or when its run ended (a guard tripped, or durationSeconds elapsed), and writes status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	agent := &blackadderv1beta1.ChaosAgent{}
	if err := r.Client.Get(ctx, req.NamespacedName, agent); err != nil {
		if apierrors.IsNotFound(err) {
			r.lastRound.Delete(req.Name)
			forgetAgentMetrics(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !agent.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, agent)
	}
	// The finalizer is added in the same pass that runs the first round: the update does not
	// change the generation, so it would not wake the controller again.
	if !controllerutil.ContainsFinalizer(agent, Finalizer) {
		base := agent.DeepCopy()
		controllerutil.AddFinalizer(agent, Finalizer)
		if err := r.Client.Patch(ctx, agent, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	o := outcome{Now: r.Clock.Now(), Generation: agent.Generation, Spec: withDefaults(agent.Spec)}
	defer func() {
		o.Err = retErr
		if err := r.writeStatus(ctx, agent, o); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("writing status: %w", err))
		}
	}()

	scope, sched, reason, err := r.specOf(o.Spec)
	if err != nil {
		o.InvalidSpec, o.InvalidReason = err.Error(), reason // a user's mistake: wait for the next edit
		return ctrl.Result{}, nil
	}
	o.Window = windowAt(sched, o.Now)
	o.Run = currentRun(agent.Status.Run, o.Spec.RunName)
	if run, expired := expireRun(o.Spec, o.Run, o.Now); expired {
		o.Run = run
		return ctrl.Result{}, r.stop(ctx, agent, &o, nil)
	}
	switch phaseOf(o.Spec, o.Run, o.Window.Open) {
	case phasePaused, phaseStopped:
		return ctrl.Result{}, r.restoreIfAsked(ctx, agent, &o)
	case phaseOutsideWindow:
		// Nothing new outside a window; what the agent changed is put back, as on a pause.
		return ctrl.Result{RequeueAfter: requeueAfter(o.Now, o.Window.Change, runDeadline(o.Spec, o.Run))}, r.restoreIfAsked(ctx, agent, &o)
	}
	return r.reconcileActive(ctx, agent, scope, &o)
}

// reconcileActive checks the guards when a round is due, and stops the run when one fails;
// otherwise it runs the round (reconcileRound) and comes back for the next round, the end of
// the window or the run's deadline, whichever is first.
func (r *Reconciler) reconcileActive(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, scope Scope, o *outcome) (ctrl.Result, error) {
	if r.roundIsDue(agent, o.Spec, o.Now) {
		o.Guards = r.checkGuards(ctx, o.Spec.Guards)
	}
	if trip := firstFailure(o.Guards); trip != nil {
		o.Run = endRun(o.Run, blackadderv1beta1.RunEndGuardTripped, fmt.Sprintf("guard %q tripped: %s", trip.Name, trip.Message), o.Now)
		return ctrl.Result{}, r.stop(ctx, agent, o, trip)
	}
	round, result, err := r.reconcileRound(ctx, agent, o.Spec, scope, o.Now)
	o.Round = round
	if err != nil {
		return result, err
	}
	if round.Ran && o.Run.StartTime == nil {
		start := apiTime(o.Now)
		o.Run.StartTime = &start
	}
	var windowEnd *time.Time
	if o.Window.Scheduled {
		windowEnd = o.Window.Change
	}
	result.RequeueAfter = requeueAfter(o.Now, round.NextRound, windowEnd, runDeadline(o.Spec, o.Run))
	return result, nil
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

// stop finishes a run that ended in this pass (o.Run: a guard tripped, trip, or its duration
// elapsed, trip nil): it puts back what the agent changed (with restoreOnDelete) in the same
// pass, and says so in an Event on the agent and a metric.
func (r *Reconciler) stop(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, o *outcome, trip *guardVerdict) error {
	err := r.restoreIfAsked(ctx, agent, o)
	r.recordRunEnded(agent, o.Run, *o.Spec.RestoreOnDelete, o.Restore)
	guard := ""
	if trip != nil {
		guard = trip.Name
	}
	runsEnded.WithLabelValues(agent.Name, string(o.Run.EndReason)).Inc()
	ctrl.LoggerFrom(ctx).Info("Stopped ChaosAgent run", "chaosAgent", klog.KObj(agent), "reason", o.Run.EndReason,
		"guard", guard, "message", o.Run.EndMessage, "restored", len(o.Restore.Records))
	return err
}

// reconcileDelete puts back what the agent changed (unless restoreOnDelete is false) and then
// lets the agent go.
func (r *Reconciler) reconcileDelete(ctx context.Context, agent *blackadderv1beta1.ChaosAgent) error {
	if !controllerutil.ContainsFinalizer(agent, Finalizer) {
		return nil
	}
	spec := withDefaults(agent.Spec)
	var restored restoreOutcome
	if *spec.RestoreOnDelete {
		now := r.Clock.Now()
		var err error
		if restored, err = r.reconcileRestore(ctx, agent, spec); err != nil {
			// Record what was put back so far; the finalizer keeps the agent until the rest is,
			// or until spec.restoreOnDelete is set to false (a spec edit wakes the controller).
			o := outcome{Now: now, Generation: agent.Generation, Spec: spec, Restore: restored, Err: err}
			return errors.Join(err, r.writeStatus(ctx, agent, o))
		}
	}
	base := agent.DeepCopy()
	controllerutil.RemoveFinalizer(agent, Finalizer)
	if err := r.Client.Patch(ctx, agent, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer: %w", err))
	}
	ctrl.LoggerFrom(ctx).Info("Released ChaosAgent", "chaosAgent", klog.KObj(agent), "restored", *spec.RestoreOnDelete,
		"leftAsTheyAre", restored.Left)
	return nil
}

// reconcileRound runs a round when one is due and says when to come back.
func (r *Reconciler) reconcileRound(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, scope Scope, now time.Time) (roundOutcome, ctrl.Result, error) {
	pause := time.Duration(spec.PauseDuration) * time.Second
	due, next := roundDue(r.lastRoundTime(agent), pause, now)
	if !due {
		return roundOutcome{NextRound: &next}, ctrl.Result{RequeueAfter: next.Sub(now)}, nil
	}
	round, err := r.runRound(ctx, agent, spec, scope, now)
	if err != nil {
		// Nothing was done: the returned error retries the round with backoff.
		return roundOutcome{}, ctrl.Result{}, fmt.Errorf("running round: %w", err)
	}
	round.NextRound = &next
	return round, ctrl.Result{RequeueAfter: pause}, nil
}

// roundIsDue says whether this pass runs a round, so that guards are checked before it.
func (r *Reconciler) roundIsDue(agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, now time.Time) bool {
	due, _ := roundDue(r.lastRoundTime(agent), time.Duration(spec.PauseDuration)*time.Second, now)
	return due
}

// runRound reads the candidates from the cache, decides and acts; it sends an Event and counts
// a metric for every action.
func (r *Reconciler) runRound(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec, scope Scope, now time.Time) (roundOutcome, error) {
	inv, marked, err := r.inventory(ctx, agent, spec, agent.Status.ChangedObjects > 0)
	if err != nil {
		return roundOutcome{}, err
	}
	// From here on the round counts as run, whatever happens to its actions.
	r.lastRound.Store(agent.Name, roundMemo{uid: agent.UID, time: now})
	r.pruneImmutable(inv.ConfigMaps, spec.IpsumMode)
	scope.ImmutableConfigMaps = r.immutableSet()
	round := agent.Status.Rounds + 1
	rng := r.NewRand(agent, round)
	actions := decide(spec, selectCandidates(inv, scope), rng)
	roundsTotal.WithLabelValues(agent.Name).Inc()

	out := roundOutcome{Ran: true}
	for _, a := range actions {
		rec := r.applyAction(ctx, agent, spec, scope, a, rng)
		out.Records = append(out.Records, rec)
		r.recordEvents(agent, a.Target, rec)
		recordActionMetric(agent.Name, rec)
		if marked != nil && rec.Outcome.Kind == resultSucceeded && rec.Kind != blackadderv1beta1.ActionKillPod {
			marked.Insert(markKey(a))
		}
	}
	if marked != nil {
		n := int32(marked.Len())
		out.ChangedObjects = &n
		changedObjects.WithLabelValues(agent.Name).Set(float64(n))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Ran round", "chaosAgent", klog.KObj(agent), "round", round, "actions", len(actions), "dryRun", spec.DryRun)
	return out, nil
}

// reconcileRestore puts back every Deployment and ConfigMap that carries the agent's label, and
// removes the marks in the same request; objects restoreSkip rules out keep their marks and are
// reported, not retried. It sends an Event and counts a metric for every restore and skip.
func (r *Reconciler) reconcileRestore(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, spec blackadderv1beta1.ChaosAgentSpec) (restoreOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	deps := &appsv1.DeploymentList{}
	if err := r.Client.List(ctx, deps, marksSelector(agent.Name)); err != nil {
		return restoreOutcome{}, fmt.Errorf("listing changed deployments from cache: %w", err)
	}
	cms := metadataList("ConfigMap")
	if err := r.Client.List(ctx, cms, marksSelector(agent.Name)); err != nil {
		return restoreOutcome{}, fmt.Errorf("listing changed configmaps from cache: %w", err)
	}
	scope := r.baseScope(spec)
	out := restoreOutcome{Attempted: true}
	var errs []error
	note := func(rec *record, victim client.Object, err error) {
		if rec != nil {
			out.Records = append(out.Records, *rec)
			if rec.Outcome.Kind == resultSkipped {
				out.Left++
			}
			r.recordEventsFor(agent, victim, *rec)
			recordActionMetric(agent.Name, *rec)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	// An object outside the scope is neither read nor written.
	skipOutOfScope := func(kind blackadderv1beta1.ActionKind, victim client.Object) bool {
		reason, detail := restoreSkip(scope, victim.GetNamespace(), false)
		if reason == "" {
			return false
		}
		rec := record{ChaosAction: blackadderv1beta1.ChaosAction{Time: apiTime(r.Clock.Now()), Kind: kind, Target: victim.GetNamespace() + "/" + victim.GetName()}}
		rec.set(detail, skipped(reason))
		note(&rec, victim, nil)
		return true
	}
	for i := range deps.Items {
		dep := &deps.Items[i]
		if skipOutOfScope(blackadderv1beta1.ActionRestoreDeployment, dep) {
			continue
		}
		rec, err := r.restoreOneDeployment(ctx, agent.Name, dep)
		note(rec, dep, err)
	}
	for i := range cms.Items {
		cm := &corev1.ConfigMap{ObjectMeta: cms.Items[i].ObjectMeta}
		if skipOutOfScope(blackadderv1beta1.ActionRestoreConfigMap, cm) {
			continue
		}
		rec, err := r.restoreOneConfigMap(ctx, agent.Name, scope, client.ObjectKeyFromObject(cm))
		note(rec, cm, err)
	}
	out.Failed = len(errs)
	changedObjects.WithLabelValues(agent.Name).Set(float64(out.Failed + out.Left))
	if len(errs) > 0 {
		return out, fmt.Errorf("restoring %d object(s): %w", len(errs), errors.Join(errs...))
	}
	return out, nil
}

// writeStatus writes the status computeStatus makes of o, when it differs from the agent's
// (operator.WriteStatus: a conflict applies o again to the agent read past the cache). An
// agent deleted meanwhile is not an error.
func (r *Reconciler) writeStatus(ctx context.Context, agent *blackadderv1beta1.ChaosAgent, o outcome) error {
	_, err := operator.WriteStatus(ctx, r.Client, r.APIReader, agent, func(a *blackadderv1beta1.ChaosAgent) {
		a.Status = computeStatus(a.Status, o)
	})
	return client.IgnoreNotFound(err)
}

// lastRoundTime is the later of status.lastRoundTime and this process's memory.
func (r *Reconciler) lastRoundTime(agent *blackadderv1beta1.ChaosAgent) *time.Time {
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

// baseScope is the agent's scope without its selectors: the operator's protected namespaces
// and the agent's excludedNamespaces are out, and so are unwatched namespaces. Restore keeps to
// it.
func (r *Reconciler) baseScope(spec blackadderv1beta1.ChaosAgentSpec) Scope {
	return Scope{Protected: r.Protected.Clone().Insert(spec.ExcludedNamespaces...), Watched: r.Watched}
}

// specOf builds the agent's scope and schedule; an error is a spec mistake (a selector that
// does not parse, a schedule the CRD would refuse today), with its Ready reason.
func (r *Reconciler) specOf(spec blackadderv1beta1.ChaosAgentSpec) (Scope, schedule, string, error) {
	scope, err := r.scopeOf(spec)
	if err != nil {
		return scope, schedule{}, blackadderv1beta1.ReasonInvalidSelector, err
	}
	sched, err := parseSchedule(spec.Schedule)
	if err != nil {
		return scope, sched, blackadderv1beta1.ReasonInvalidSchedule, err
	}
	return scope, sched, "", nil
}

// scopeOf builds the agent's scope; an error is a spec mistake (a selector that does not parse).
func (r *Reconciler) scopeOf(spec blackadderv1beta1.ChaosAgentSpec) (Scope, error) {
	s := r.baseScope(spec)
	s.Workloads = spec.MeanSecondsBetweenKills != nil
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
