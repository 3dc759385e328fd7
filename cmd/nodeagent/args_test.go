package nodeagent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDefaults(t *testing.T) {
	a, err := Parse([]string{"--target=svc.ns.svc:5000", "--owner=ns/a"})
	require.NoError(t, err)
	want := DefaultArgs()
	want.Target, want.Owner = "svc.ns.svc:5000", "ns/a"
	assert.Equal(t, want, a)
	assert.Equal(t, ":5000", a.Listen)
	assert.Equal(t, 30*time.Second, a.Resync)
	assert.Empty(t, a.HostsDir)
}

func TestParseRefuses(t *testing.T) {
	for _, bad := range [][]string{
		{},
		{"--owner=ns/a"},
		{"--target=x:1", "--owner=ns/a", "--hosts-dir=/d"},
		{"--target=x:1", "--owner=ns/a", "extra"},
		{"--target=x:1", "--owner=ns/a", "--resync=0s"},
		{"--target=x:1", "--owner=ns/a", "--probe-interval=0s"},
		{"--target=x:1", "--owner=ns/a", "--probe-interval=1s", "--probe-timeout=2s"},
		{"--target=x:1", "--owner=ns/a", "--capabilities=resolve"},
		{"--target=x:1", "--owner=ns/a", "--capabilities=pull,push"},
		{"--nope"},
	} {
		_, err := Parse(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestCommandLineRoundTrip: whatever valid Args the controller builds, the agent reads
// the same Args back from the command line.
func TestCommandLineRoundTrip(t *testing.T) {
	base := DefaultArgs()
	base.Target, base.Owner = "hub-registry.mirrors.svc:5000", "mirrors/hub"
	for _, tc := range []struct {
		name   string
		modify func(*Args)
		want   []string
	}{
		{"relay only", func(*Args) {}, []string{
			"--listen=:5000", "--health-listen=:8081", "--target=hub-registry.mirrors.svc:5000", "--owner=mirrors/hub"}},
		{"configures containerd", func(a *Args) {
			a.HostsDir, a.Server, a.Mirror = "/run/quartet/hosts-dir", "https://registry-1.docker.io", "http://127.0.0.1:35000"
		}, []string{
			"--listen=:5000", "--health-listen=:8081", "--target=hub-registry.mirrors.svc:5000", "--owner=mirrors/hub",
			"--hosts-dir=/run/quartet/hosts-dir", "--server=https://registry-1.docker.io", "--mirror=http://127.0.0.1:35000"}},
		{"other addresses and durations", func(a *Args) {
			a.Listen, a.HealthListen = "127.0.0.1:0", "[::1]:9000"
			a.Resync, a.Drain, a.DialTimeout = 50*time.Millisecond, 2*time.Second, time.Minute
			a.Probe, a.ProbeTimeout = 10*time.Second, time.Second
		}, []string{
			"--listen=127.0.0.1:0", "--health-listen=[::1]:9000", "--target=hub-registry.mirrors.svc:5000", "--owner=mirrors/hub",
			"--resync=50ms", "--drain=2s", "--dial-timeout=1m0s", "--probe-interval=10s", "--probe-timeout=1s"}},
		{"resolve granted", func(a *Args) {
			a.HostsDir, a.Server, a.Mirror = "/run/quartet/hosts-dir", "https://registry-1.docker.io", "http://127.0.0.1:35000"
			a.Capabilities = []string{"pull", "resolve"}
		}, []string{
			"--listen=:5000", "--health-listen=:8081", "--target=hub-registry.mirrors.svc:5000", "--owner=mirrors/hub",
			"--hosts-dir=/run/quartet/hosts-dir", "--server=https://registry-1.docker.io", "--mirror=http://127.0.0.1:35000",
			"--capabilities=pull,resolve"}},
		{"zero drain and dial timeout are written out", func(a *Args) { a.Drain, a.DialTimeout = 0, 0 }, []string{
			"--listen=:5000", "--health-listen=:8081", "--target=hub-registry.mirrors.svc:5000", "--owner=mirrors/hub",
			"--drain=0s", "--dial-timeout=0s"}},
		{"values with = and spaces", func(a *Args) {
			a.HostsDir, a.Server, a.Mirror = "/a dir/x=y", "https://quay.io/?a=b", "http://127.0.0.1:35000"
		}, []string{
			"--listen=:5000", "--health-listen=:8081", "--target=hub-registry.mirrors.svc:5000", "--owner=mirrors/hub",
			"--hosts-dir=/a dir/x=y", "--server=https://quay.io/?a=b", "--mirror=http://127.0.0.1:35000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := base
			tc.modify(&a)
			require.NoError(t, a.Validate())
			assert.Equal(t, tc.want, a.CommandLine())
			got, err := Parse(a.CommandLine())
			require.NoError(t, err)
			assert.Equal(t, a, got)
		})
	}
}
