// Package scope is where Quartet acts: the watched namespaces (WATCH_NAMESPACE), the
// operator's own, the namespaces always protected, and the one constructor of the
// label-selected caches, limited to the watched namespaces like the manager's cache.
package scope

import (
	"cmp"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Namespaces are the manager-wide namespaces passed to every controller's Setup.
type Namespaces struct {
	// Watched limits the namespaced objects every controller reads and writes (OLM's
	// WATCH_NAMESPACE). Empty means all namespaces. Every cache is limited to them
	// (CacheConfig), so a controller reads nothing outside them and needs no filter of
	// its own.
	Watched []string
	// Operator is where the manager runs (POD_NAMESPACE / OPERATOR_NAMESPACE).
	Operator string
}

// SystemNamespaces are the cluster's own namespaces, always protected: no ChaosAgent
// touches them and no CopyratorRule copies into them unless a cluster admin opted one in.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Protected returns the always-protected namespaces: SystemNamespaces, the operator's own
// (when known) and extra (a controller's flag adds to them, never replaces them).
func (n Namespaces) Protected(extra ...string) sets.Set[string] {
	out := sets.New(SystemNamespaces...).Insert(extra...)
	if n.Operator != "" {
		out.Insert(n.Operator)
	}
	return out
}

// Watches reports whether namespace ns is within the watched namespaces.
func (n Namespaces) Watches(ns string) bool {
	return len(n.Watched) == 0 || slices.Contains(n.Watched, ns)
}

// CacheConfig is the cache.Options.DefaultNamespaces of a cache limited to the watched
// namespaces; nil, meaning all namespaces, when none are named.
func (n Namespaces) CacheConfig() map[string]cache.Config {
	if len(n.Watched) == 0 {
		return nil
	}
	out := make(map[string]cache.Config, len(n.Watched))
	for _, ns := range n.Watched {
		out[ns] = cache.Config{}
	}
	return out
}

// ParseList splits a comma-separated list (WATCH_NAMESPACE, --controllers), dropping blanks
// and duplicates. An empty string returns nil.
func ParseList(v string) []string {
	var out []string
	for _, ns := range strings.Split(v, ",") {
		ns = strings.TrimSpace(ns)
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// OperatorNamespace returns the namespace the manager runs in: OPERATOR_NAMESPACE, then
// POD_NAMESPACE, then the service account's namespace file, else "".
func OperatorNamespace() string {
	b, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace") // none outside a pod
	return cmp.Or(os.Getenv("OPERATOR_NAMESPACE"), os.Getenv("POD_NAMESPACE"), strings.TrimSpace(string(b)))
}
