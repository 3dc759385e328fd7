package exchangerate

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBindFlags(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	assert.Equal(t, Options{MaxConcurrentReconciles: 2, Source: "ecb", RefreshInterval: time.Hour, StaleAfterDays: 5,
		FetchTimeout: 30 * time.Second, BackoffBase: 30 * time.Second, BackoffMax: 30 * time.Minute}, o, "defaults")

	require.NoError(t, fs.Parse([]string{
		"--exchangerate-source=frankfurter", "--exchangerate-url=http://mirror.internal", "--exchangerate-refresh-interval=15m",
		"--exchangerate-stale-after-days=4", "--exchangerate-fetch-timeout=5s", "--exchangerate-backoff-base=1s",
		"--exchangerate-backoff-max=1m", "--exchangerate-workers=8",
	}))
	assert.Equal(t, Options{MaxConcurrentReconciles: 8, Source: "frankfurter", URL: "http://mirror.internal", RefreshInterval: 15 * time.Minute,
		StaleAfterDays: 4, FetchTimeout: 5 * time.Second, BackoffBase: time.Second, BackoffMax: time.Minute}, o)
}

func TestOptionsDefaultsAndValidate(t *testing.T) {
	var o Options
	o.defaults()
	require.NoError(t, o.validate())
	assert.Equal(t, "ecb", o.Source)
	assert.NotNil(t, o.Clock)
	assert.NotNil(t, o.Random)
	assert.NotNil(t, o.HTTPClient)
	r := o.Random()
	assert.True(t, r >= 0 && r < 1)

	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{"negative refresh", func(o *Options) { o.RefreshInterval = -time.Second }, "--exchangerate-refresh-interval"},
		{"negative stale days", func(o *Options) { o.StaleAfterDays = -1 }, "--exchangerate-stale-after-days"},
		{"negative timeout", func(o *Options) { o.FetchTimeout = -time.Second }, "--exchangerate-fetch-timeout"},
		{"base above max", func(o *Options) { o.BackoffBase, o.BackoffMax = time.Hour, time.Minute }, "--exchangerate-backoff-base"},
	}
	for _, tt := range tests {
		o := Options{}
		o.defaults()
		tt.mutate(&o)
		assert.ErrorContains(t, o.validate(), tt.wantErr, tt.name)
	}
}
