package manager

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlagEnvName(t *testing.T) {
	assert.Equal(t, "QUARTET_EXCHANGERATE_URL", FlagEnvName("exchangerate-url"))
	assert.Equal(t, "QUARTET_ZAP_LOG_LEVEL", FlagEnvName("zap-log-level"))
	assert.Equal(t, "QUARTET_A_B", FlagEnvName("a.b"))
}

func TestSetFlagsFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantURL string
		wantDur time.Duration
		wantErr string
	}{
		{name: "defaults without env", wantURL: "default", wantDur: time.Hour},
		{name: "env sets an unset flag", env: map[string]string{"QUARTET_EXCHANGERATE_URL": "http://mirror"}, wantURL: "http://mirror", wantDur: time.Hour},
		{name: "command line wins over env", args: []string{"--exchangerate-url=http://cli"},
			env: map[string]string{"QUARTET_EXCHANGERATE_URL": "http://env"}, wantURL: "http://cli", wantDur: time.Hour},
		{name: "typed flag parsed", env: map[string]string{"QUARTET_REFRESH": "5m"}, wantURL: "default", wantDur: 5 * time.Minute},
		{name: "bad value names variable and flag", env: map[string]string{"QUARTET_REFRESH": "soon"},
			wantErr: "QUARTET_REFRESH (flag --refresh): parse error"},
		{name: "unrelated variables ignored", env: map[string]string{"EXCHANGERATE_URL": "x", "QUARTET_NOPE": "y"}, wantURL: "default", wantDur: time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			url := fs.String("exchangerate-url", "default", "")
			dur := fs.Duration("refresh", time.Hour, "")
			require.NoError(t, fs.Parse(tt.args))
			err := SetFlagsFromEnv(fs, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantURL, *url)
			assert.Equal(t, tt.wantDur, *dur)
		})
	}
}
