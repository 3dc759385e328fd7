package registrymirror

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// needsApply reports whether applying desired would change live: whether some field the
// operator sets is missing from live or has another value there. Fields others added
// (defaults, other controllers) do not count — Server-Side Apply would keep them too. A
// field the operator stopped setting is caught by the applied-hash annotation, whose
// value then differs. Skipping no-op applies keeps a steady-state pass free of writes.
func needsApply(desired, live any) bool {
	d, err := toJSONMap(desired)
	if err != nil {
		return true
	}
	l, err := toJSONMap(live)
	if err != nil {
		return true
	}
	delete(d, "status")
	return !subset(d, l)
}

func toJSONMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not an object")
	}
	return m, nil
}

// subset reports whether every value in want is present and equal in have. Lists must
// have the same length and match element by element (the operator's lists — containers,
// ports, volumes, env — keep their order on the server).
func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !subset(wv, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}
