package testenv

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FlagDefaults returns the Options the flags bind defaults to (bind is a controller's
// BindFlags, given nothing on the command line) and requires them to equal defaults, its
// DefaultOptions (docs/STYLE.md, "The Reconciler struct and the Options").
func FlagDefaults[O any](t *testing.T, bind func(*O, *flag.FlagSet), defaults O) O {
	t.Helper()
	var fromFlags O
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	bind(&fromFlags, fs)
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, defaults, fromFlags, "the flags' defaults")
	return fromFlags
}

// OptionsCase is one case of a controller's Options.complete: In becomes Want, or, with
// WantErr, is refused with an error containing it.
type OptionsCase[O any] struct {
	Name     string
	In, Want O
	WantErr  string
}

// CheckComplete runs complete (a controller's Options.complete) on a copy of each case's In.
func CheckComplete[O any](t *testing.T, complete func(*O) error, cases []OptionsCase[O]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got := tc.In
			err := complete(&got)
			if tc.WantErr != "" {
				assert.ErrorContains(t, err, tc.WantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.Want, got)
		})
	}
}

// Case is an OptionsCase: complete turns in into want, or refuses it with an error
// containing wantErr when that is set.
func Case[O any](name string, in, want O, wantErr string) OptionsCase[O] {
	return OptionsCase[O]{Name: name, In: in, Want: want, WantErr: wantErr}
}
