// Package operator holds the few settings every Quartet controller shares.
package operator

import (
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
)

// Shared are manager-wide settings passed to every controller's Setup.
type Shared struct {
	// WatchNamespaces limits the namespaced objects every controller reads and writes
	// (OLM's WATCH_NAMESPACE). Empty means all namespaces.
	WatchNamespaces []string
	// OperatorNamespace is where the manager runs (POD_NAMESPACE / OPERATOR_NAMESPACE).
	OperatorNamespace string
}

// SystemNamespaces are the cluster's own namespaces, always protected: no ChaosAgent
// touches them and no CopyratorRule copies into them unless a cluster admin opted one in.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Protected returns the always-protected namespaces: SystemNamespaces, the operator's own
// (when known) and extra (a controller's flag adds to them, never replaces them).
func (s Shared) Protected(extra ...string) sets.Set[string] {
	out := sets.New(SystemNamespaces...).Insert(extra...)
	if s.OperatorNamespace != "" {
		out.Insert(s.OperatorNamespace)
	}
	return out
}

// Watches reports whether namespace ns is within the watched namespaces.
func (s Shared) Watches(ns string) bool {
	return len(s.WatchNamespaces) == 0 || slices.Contains(s.WatchNamespaces, ns)
}

// ParseNamespaces splits a comma-separated namespace list (WATCH_NAMESPACE), dropping
// blanks and duplicates. An empty string means all namespaces and returns nil.
func ParseNamespaces(v string) []string {
	var out []string
	for _, ns := range strings.Split(v, ",") {
		ns = strings.TrimSpace(ns)
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// OwnNamespace returns the namespace the manager runs in: OPERATOR_NAMESPACE, then
// POD_NAMESPACE, then the service account's namespace file, else "".
func OwnNamespace() string {
	for _, env := range []string{"OPERATOR_NAMESPACE", "POD_NAMESPACE"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
