package registrymirror

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Default range of node agent host ports: above the NodePort range (30000-32767).
const (
	hostPortMin int32 = 35000
	hostPortMax int32 = 35999
)

// pickHostPort chooses a mirror's host port. held maps the ports other mirrors' node
// agents hold to those mirrors; requested maps the ports other mirrors ask for in
// spec.hostPort. An explicit port is used unless another mirror holds it (then that
// mirror is returned as the conflict: the first to hold a port keeps it). Otherwise the
// port the node agent already has is kept, so it never moves, else the lowest port in
// [lo, hi] nobody holds or asks for is chosen; 0 means the range is full.
func pickHostPort(explicit *int32, current int32, held, requested map[int32]string, lo, hi int32) (port int32, conflictWith string) {
	if explicit != nil {
		return *explicit, held[*explicit]
	}
	if current != 0 {
		if _, used := held[current]; !used {
			return current, ""
		}
	}
	for p := lo; p <= hi; p++ {
		_, isHeld := held[p]
		_, isRequested := requested[p]
		if !isHeld && !isRequested {
			return p, ""
		}
	}
	return 0, ""
}

// keepsHostPort reports whether the node agent keeps the host port current it has
// without a look at the other mirrors: it has one, and spec.hostPort does not ask for
// another. This is the steady state, where a pass lists nothing.
func keepsHostPort(explicit *int32, current int32) bool {
	return current != 0 && (explicit == nil || *explicit == current)
}

// portBook remembers the host port chosen for each mirror in this process, so two
// workers choosing at once (before either's DaemonSet reaches the cache) never pick the
// same port. After a restart, the DaemonSets in the cache carry the same knowledge.
type portBook struct {
	mu       sync.Mutex
	reserved map[types.NamespacedName]int32
}

// assign picks and reserves a port for mirror key; held and requested are what the
// cache shows of the other mirrors (see pickHostPort).
func (b *portBook) assign(key types.NamespacedName, explicit *int32, current int32, held, requested map[int32]string) (int32, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	allHeld := make(map[int32]string, len(held)+len(b.reserved))
	for p, owner := range held {
		allHeld[p] = owner
	}
	for k, p := range b.reserved {
		if k != key {
			allHeld[p] = k.String()
		}
	}
	port, conflict := pickHostPort(explicit, current, allHeld, requested, hostPortMin, hostPortMax)
	if port == 0 {
		return 0, "", fmt.Errorf("no free host port in %d-%d; set spec.hostPort", hostPortMin, hostPortMax)
	}
	if conflict == "" {
		if b.reserved == nil {
			b.reserved = map[types.NamespacedName]int32{}
		}
		b.reserved[key] = port
	}
	return port, conflict, nil
}

// release forgets a deleted mirror's port.
func (b *portBook) release(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.reserved, key)
}
