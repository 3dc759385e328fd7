package copyratorrule

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// sourceSyncTimeout bounds the wait for a rule's first list of sources.
const sourceSyncTimeout = 30 * time.Second

// sourceWatcher runs one informer per rule that lists and watches exactly the rule's
// sources: objects of the rule's kind in the rule's namespace, selected by the rule's
// labels on the server. Unrelated ConfigMaps and Secrets are never sent to the manager, so
// memory follows what the rules match; a change to a source wakes only its rule.
//
// It is a manager Runnable: the informers stop with the manager.
type sourceWatcher struct {
	clientset kubernetes.Interface

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	watches map[types.NamespacedName]*ruleSources
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	// full notes that a source change needs a pass over every namespace.
	full *fullPasses
}

// ruleSources is the informer of one rule's sources.
type ruleSources struct {
	kind     string
	selector string
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
}

func newSourceWatcher(cs kubernetes.Interface, full *fullPasses) *sourceWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &sourceWatcher{clientset: cs, ctx: ctx, cancel: cancel, watches: map[types.NamespacedName]*ruleSources{}, full: full}
}

// Start implements manager.Runnable: it waits for the manager to stop, then stops every informer.
func (w *sourceWatcher) Start(ctx context.Context) error {
	<-ctx.Done()
	w.cancel()
	return nil
}

// setQueue is the controller source (source.Func) that hands the watcher the work queue.
func (w *sourceWatcher) setQueue(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = q
	return nil
}

func (w *sourceWatcher) enqueue(rule types.NamespacedName) {
	w.mu.Lock()
	q := w.queue
	w.mu.Unlock()
	if q != nil {
		w.full.mark(rule)
		q.Add(reconcile.Request{NamespacedName: rule})
	}
}

// sourceSet is what a rule's selector matches: the sources it copies, sorted by name, and
// the names of those it never copies (forbiddenType).
type sourceSet struct {
	copyable []source
	skipped  []string
}

// sources returns the rule's sources, starting (or restarting, when the rule's kind or
// selector changed) its informer and waiting for the first list.
func (w *sourceWatcher) sources(ctx context.Context, rule *flantv1.CopyratorRule) (sourceSet, error) {
	sel, err := sourceSelector(rule)
	if err != nil {
		return sourceSet{}, err
	}
	rs := w.ensure(client.ObjectKeyFromObject(rule), ruleKind(rule.Spec.RuleType), sel.String())
	waitCtx, cancel := context.WithTimeout(ctx, sourceSyncTimeout)
	defer cancel()
	if !toolscache.WaitFor(waitCtx, "", rs.informer.HasSyncedChecker()) {
		return sourceSet{}, fmt.Errorf("the list of %ss matching %q did not arrive within %s", rs.kind, rs.selector, sourceSyncTimeout)
	}
	items := rs.informer.GetStore().List()
	out := sourceSet{copyable: make([]source, 0, len(items))}
	for _, item := range items {
		obj, ok := item.(client.Object)
		switch {
		case !ok:
		case !copyable(obj):
			out.skipped = append(out.skipped, obj.GetName())
		default:
			out.copyable = append(out.copyable, newSource(obj))
		}
	}
	sort.Slice(out.copyable, func(i, j int) bool { return out.copyable[i].Name < out.copyable[j].Name })
	sort.Strings(out.skipped)
	return out, nil
}

// copyable excludes sources that are never copied: Secrets whose type grants access to
// the cluster (a service account's token, a bootstrap token; see forbiddenType).
func copyable(obj client.Object) bool {
	s, ok := obj.(*corev1.Secret)
	return !ok || !forbiddenType(s.Type)
}

// ensure returns the rule's informer, starting it when missing or out of date.
func (w *sourceWatcher) ensure(rule types.NamespacedName, kind, selector string) *ruleSources {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rs, ok := w.watches[rule]; ok {
		if rs.kind == kind && rs.selector == selector {
			return rs
		}
		rs.stop()
	}
	resource, example := "configmaps", client.Object(&corev1.ConfigMap{})
	if kind == kindSecret {
		resource, example = "secrets", &corev1.Secret{}
	}
	lw := toolscache.NewFilteredListWatchFromClient(w.clientset.CoreV1().RESTClient(), resource, rule.Namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, example, toolscache.SharedIndexInformerOptions{})
	_ = inf.SetTransform(func(in any) (any, error) {
		if obj, ok := in.(client.Object); ok {
			obj.SetManagedFields(nil)
		}
		return in, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		// The first list is read by the reconcile that started the informer.
		AddFunc: func(_ any, initial bool) {
			if !initial {
				w.enqueue(rule)
			}
		},
		UpdateFunc: func(_, _ any) { w.enqueue(rule) },
		DeleteFunc: func(_ any) { w.enqueue(rule) },
	})
	ctx, stop := context.WithCancel(w.ctx)
	go inf.RunWithContext(ctx)
	rs := &ruleSources{kind: kind, selector: selector, informer: inf, stop: stop}
	w.watches[rule] = rs
	return rs
}

// forget stops the rule's informer.
func (w *sourceWatcher) forget(rule types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rs, ok := w.watches[rule]; ok {
		rs.stop()
		delete(w.watches, rule)
	}
}
