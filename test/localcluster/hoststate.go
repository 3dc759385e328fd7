package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// HostState is what a real node may change on the machine outside its own directory:
// kernel settings, mounts, network namespaces, cgroups and paths that the kubelet,
// containerd and the CNI plugins create at fixed places. A snapshot is taken before the
// node starts; Stop restores what differs and a test compares snapshots before and after.
type HostState struct {
	// Sysctls maps every readable /proc/sys key (dotted) to its value, volatile counters excluded.
	Sysctls map[string]string `json:"sysctls"`
	// Mounts are the mount points of the host mount namespace.
	Mounts []string `json:"mounts"`
	// Netns are the named network namespaces in /run/netns.
	Netns []string `json:"netns"`
	// Cgroups are the top-level directories of every cgroup hierarchy.
	Cgroups []string `json:"cgroups"`
	// Paths are the entries under the fixed paths a node may create things in.
	Paths []string `json:"paths"`
}

// watchedPaths are the fixed places a kubelet, containerd, runc, iptables or the CNI
// plugins write to even when given their own directories (see ../../../shared/REAL-NODE.md).
var watchedPaths = []string{
	"/var/lib/kubelet", "/var/lib/cni", "/var/lib/containerd", "/var/lib/kube-proxy",
	"/run/containerd", "/run/runc", "/run/netns", "/run/xtables.lock", "/run/flannel",
	"/usr/libexec/kubernetes", "/etc/cni", "/opt/cni", "/opt/containerd",
	"/etc/kubernetes", "/var/log/pods", "/var/log/containers", "/run/calico",
}

// volatileSysctl reports keys the kernel changes on its own (counters, randomness,
// auto-tuned rates), which are neither compared nor restored.
func volatileSysctl(key string) bool {
	for _, prefix := range []string{
		"kernel.random.", "fs.dentry-state", "fs.file-nr", "fs.inode-nr", "fs.inode-state",
		"kernel.ns_last_pid", "kernel.pty.nr", "fs.aio-nr", "fs.quota.",
		"kernel.perf_event_max_sample_rate", "net.netfilter.nf_conntrack_count",
		"fs.binfmt_misc.", "vm.stat_refresh", "vm.drop_caches", "vm.compact_memory",
		"kernel.sched_domain.", "fs.fanotify.", "fs.inotify.", "user.",
	} {
		if strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

// SnapshotHost reads the host state. It needs no privileges beyond reading /proc and /sys.
func SnapshotHost() (*HostState, error) {
	s := &HostState{Sysctls: map[string]string{}}
	err := filepath.WalkDir("/proc/sys", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable directories are skipped
		}
		if d.IsDir() {
			return nil
		}
		key := strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", ".")
		if volatileSysctl(key) {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&0o444 == 0 {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // write-only or permission-restricted keys
		}
		s.Sysctls[key] = strings.TrimSpace(string(b))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.Mounts, err = mountPoints(); err != nil {
		return nil, err
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			s.Netns = append(s.Netns, e.Name())
		}
	}
	hierarchies, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hierarchies {
		subs, err := os.ReadDir(filepath.Join("/sys/fs/cgroup", h.Name()))
		if err != nil {
			continue
		}
		for _, sub := range subs {
			if sub.IsDir() {
				s.Cgroups = append(s.Cgroups, h.Name()+"/"+sub.Name())
			}
		}
	}
	for _, root := range watchedPaths {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			s.Paths = append(s.Paths, path)
			return nil
		})
	}
	sort.Strings(s.Mounts)
	sort.Strings(s.Netns)
	sort.Strings(s.Cgroups)
	sort.Strings(s.Paths)
	return s, nil
}

// mountPoints lists the mount points of this mount namespace (/proc/self/mountinfo,
// field 5, with octal escapes such as \040 decoded).
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out, sc.Err()
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Diff lists, one line each, how after differs from s (empty: the host is as before).
func (s *HostState) Diff(after *HostState) []string {
	var out []string
	keys := make([]string, 0, len(s.Sysctls))
	for k := range s.Sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := after.Sysctls[k]; ok && v != s.Sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s: %q, was %q", k, v, s.Sysctls[k]))
		}
	}
	diffSet := func(what string, before, now []string) {
		for _, x := range now {
			if !slices.Contains(before, x) {
				out = append(out, fmt.Sprintf("%s added: %s", what, x))
			}
		}
		for _, x := range before {
			if !slices.Contains(now, x) {
				out = append(out, fmt.Sprintf("%s removed: %s", what, x))
			}
		}
	}
	diffSet("mount", s.Mounts, after.Mounts)
	diffSet("network namespace", s.Netns, after.Netns)
	diffSet("cgroup", s.Cgroups, after.Cgroups)
	diffSet("path", s.Paths, after.Paths)
	return out
}

// Restore writes back every kernel setting that differs from s, and removes the mounts
// mayUnmount accepts, the CNI plugins' named network namespaces, a node's top-level
// cgroups (killing what runs in them) and watched paths that did not exist in s. It only
// undoes additions a node makes: nothing that existed in s is ever deleted, and nothing
// another program may have added meanwhile is touched.
func (s *HostState) Restore(mayUnmount func(mountPoint string) bool) error {
	now, err := SnapshotHost()
	if err != nil {
		return err
	}
	var errs []error
	for k, was := range s.Sysctls {
		if v, ok := now.Sysctls[k]; ok && v != was {
			path := "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
			if err := os.WriteFile(path, []byte(was), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring sysctl %s=%s: %w", k, was, err))
			}
		}
	}
	// Mounts first, deepest first, so the paths below them can go.
	added := func(before, now []string) []string {
		var out []string
		for _, x := range now {
			if !slices.Contains(before, x) {
				out = append(out, x)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(out)))
		return out
	}
	for _, m := range added(s.Mounts, now.Mounts) {
		if !mayUnmount(m) {
			continue
		}
		if err := unmount(m); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range added(s.Netns, now.Netns) {
		if !strings.HasPrefix(n, "cni-") {
			continue // not made by a node's CNI plugins: someone else's
		}
		p := filepath.Join("/run/netns", n)
		_ = unmount(p)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, cg := range added(s.Cgroups, now.Cgroups) {
		if !strings.HasPrefix(filepath.Base(cg), cgroupPrefix) {
			continue // not a node's cgroup root: someone else's, left alone
		}
		if err := removeCgroupTree(filepath.Join("/sys/fs/cgroup", cg)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range added(s.Paths, now.Paths) {
		if err := os.RemoveAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
