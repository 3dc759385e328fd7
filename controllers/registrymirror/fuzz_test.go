package registrymirror

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzHostsDir: whatever the upstream, the directory is a single path element, so the
// hostPath the DaemonSet mounts stays inside /etc/containerd/certs.d.
func FuzzHostsDir(f *testing.F) {
	for _, s := range []string{"https://registry-1.docker.io", "http://10.0.0.5:5000/", "https://..", "https://a/../b", "https://%2e%2e", "http://[::1]:5000", "https://user:pw@quay.io"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, upstream string) {
		dir, err := HostsDir(upstream)
		if err != nil {
			return
		}
		if dir == "" || dir == "." || dir == ".." || strings.ContainsAny(dir, "/\\\x00") {
			t.Fatalf("HostsDir(%q) = %q escapes certs.d", upstream, dir)
		}
		if got := filepath.Join(DefaultHostsRoot, dir); filepath.Dir(got) != DefaultHostsRoot {
			t.Fatalf("HostsDir(%q) = %q is not one element below certs.d", upstream, dir)
		}
	})
}
