//go:build !linux

package retention

import "errors"

// StatFS measures disks on Linux only, where the registry runs; elsewhere nothing is evicted for disk space.
func StatFS(string) (DiskUsage, error) {
	return DiskUsage{}, errors.New("disk usage is measured on Linux only")
}
