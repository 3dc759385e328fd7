package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"time"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/quartet-operator/quartet/cmd/mirror-registry/internal/retention"
)

// options are mirror-registry's flags. Everything else is the registry's own config.yml.
type options struct {
	configPath       string
	retention        time.Duration
	maxDiskPercent   float64
	diskMinAge       time.Duration
	pinnedFile       string
	stateFile        string
	evictionInterval time.Duration
	saveInterval     time.Duration
	warmInterval     time.Duration
	warmPlatforms    []v1.Platform
}

// defaultRetention is long enough to ride out a real outage of the upstream link.
const defaultRetention = 30 * 24 * time.Hour

// defaultDiskMinAge outlasts what a node needs right after a pull or a pod's move: the
// kubelet's retries of a broken pull (back-off up to 5 min), and the minute or two a
// ConfigMap update takes to reach the pinned file (rescheduled pods pin nothing meanwhile).
// As the kubelet's imageMinimumGCAge: evicting what was just pulled only breaks pulls.
const defaultDiskMinAge = 10 * time.Minute

func parseOptions(args []string, output io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mirror-registry", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.configPath, "config", "/etc/distribution/config.yml",
		"The distribution registry configuration (proxy mode, filesystem storage).")
	fs.DurationVar(&o.retention, "retention", defaultRetention,
		"Cached content not pulled for longer than this is deleted; content pulled within it is kept. Replaces proxy.ttl.")
	fs.Float64Var(&o.maxDiskPercent, "max-disk-percent", 85,
		"Above this fill of the storage volume the least recently pulled unpinned content is deleted until below (0 turns it off).")
	fs.DurationVar(&o.diskMinAge, "disk-eviction-min-age", defaultDiskMinAge,
		"Content pulled, or pinned, within this is not deleted for disk space however full the disk (retention still applies).")
	fs.StringVar(&o.pinnedFile, "pinned-file", "",
		"A file of digests never to delete, one a line (\"sha256:…\" or \"image@sha256:…\"); re-read when it changes.")
	fs.StringVar(&o.stateFile, "state-file", "",
		"Where the last uses are kept across restarts (default: <storage rootdirectory>/quartet/last-use).")
	fs.DurationVar(&o.evictionInterval, "eviction-interval", time.Minute, "How often expired content is looked for.")
	fs.DurationVar(&o.saveInterval, "save-interval", time.Minute, "How often new uses are written to the state file.")
	fs.DurationVar(&o.warmInterval, "warm-interval", 5*time.Minute,
		"How often pinned images the cache does not hold are fetched from the upstream (0 turns warming off).")
	platforms := fs.String("warm-platforms", "linux/"+runtime.GOARCH,
		"The platforms (os/arch[/variant], comma-separated) whose manifests are fetched of a pinned index.")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q: the configuration is --config", fs.Args())
	}
	var err error
	if o.warmPlatforms, err = retention.ParsePlatforms(*platforms); err != nil {
		return options{}, fmt.Errorf("--warm-platforms: %w", err)
	}
	return o, o.validate()
}

func (o options) validate() error {
	switch {
	case o.retention <= 0:
		return fmt.Errorf("--retention must be positive, not %s", o.retention)
	case o.maxDiskPercent < 0 || o.maxDiskPercent > 100:
		return fmt.Errorf("--max-disk-percent must be between 0 and 100, not %g", o.maxDiskPercent)
	case o.diskMinAge < 0:
		return fmt.Errorf("--disk-eviction-min-age must not be negative, not %s", o.diskMinAge)
	case o.evictionInterval <= 0:
		return fmt.Errorf("--eviction-interval must be positive, not %s", o.evictionInterval)
	case o.warmInterval < 0:
		return fmt.Errorf("--warm-interval must not be negative, not %s", o.warmInterval)
	case o.saveInterval <= 0:
		return fmt.Errorf("--save-interval must be positive, not %s", o.saveInterval)
	}
	return nil
}
