//go:build linux

package retention

import "syscall"

// StatFS measures the filesystem holding path as df does: used blocks, and capacity as
// used plus what an unprivileged writer may still use (the root reserve left out).
func StatFS(path string) (DiskUsage, error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return DiskUsage{}, err
	}
	bsize := uint64(s.Bsize)
	used := (s.Blocks - s.Bfree) * bsize
	return DiskUsage{UsedBytes: used, CapacityBytes: used + s.Bavail*bsize}, nil
}
