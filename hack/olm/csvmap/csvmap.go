// Package csvmap edits a ClusterServiceVersion decoded as plain maps, for the tools that
// write one (hack/olm/csvmeta, hack/olm/reconstruct).
package csvmap

// Nested returns the map at path, creating empty maps on the way.
func Nested(m map[string]any, path ...string) map[string]any {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}
