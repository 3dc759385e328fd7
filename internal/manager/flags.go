package manager

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvPrefix starts the environment variable that sets a flag the command line left
// unset: --exchangerate-url is QUARTET_EXCHANGERATE_URL. Under OLM the manager's
// arguments are the CSV's, but a Subscription's spec.config.env reaches the manager, so
// every flag stays configurable per install.
const EnvPrefix = "QUARTET_"

// FlagEnvName is the environment variable of a flag: prefix, upper case, '-' and '.' as '_'.
func FlagEnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

// SetFlagsFromEnv sets every flag of fs that the command line did not set from its
// environment variable, if present; a value the flag refuses is an error naming both.
// Call it after fs.Parse.
func SetFlagsFromEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		env := FlagEnvName(f.Name)
		if v, ok := lookup(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s (flag --%s): %w", env, f.Name, e)
			}
		}
	})
	return err
}
