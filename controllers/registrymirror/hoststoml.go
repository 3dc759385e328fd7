package registrymirror

import (
	"fmt"
	"strings"
)

// hostsTOMLMarker starts every hosts.toml the node agent writes. The agent rewrites or
// removes only files that start with it, so an administrator's own hosts.toml is never
// touched.
const hostsTOMLMarker = "# Managed by the Quartet operator for RegistryMirror "

// RenderHostsTOML renders containerd's hosts.toml for one upstream: containerd tries the
// mirror first for pulls and tag/digest resolution and falls back to the upstream
// (server) when the mirror fails. owner is the mirror's namespace/name.
func RenderHostsTOML(owner, server, mirror string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s; removed when the mirror goes.\n", hostsTOMLMarker, owner)
	fmt.Fprintf(&b, "server = %q\n\n", server)
	fmt.Fprintf(&b, "[host.%q]\n", mirror)
	b.WriteString("  capabilities = [\"pull\", \"resolve\"]\n")
	return b.String()
}

// hostsTOMLOwner returns the mirror (namespace/name) a hosts.toml was written for, and
// whether the Quartet operator wrote it at all.
func hostsTOMLOwner(content string) (owner string, managed bool) {
	first, _, _ := strings.Cut(content, "\n")
	rest, ok := strings.CutPrefix(first, hostsTOMLMarker)
	if !ok {
		return "", false
	}
	owner, _, _ = strings.Cut(rest, ";")
	return owner, true
}
