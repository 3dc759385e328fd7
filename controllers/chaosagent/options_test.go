package chaosagent

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestProtectedNamespaces(t *testing.T) {
	bound := func(args ...string) *Options {
		o := &Options{}
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o.BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, tc := range []struct {
		name      string
		opts      *Options
		operator  string
		protected sets.Set[string]
	}{
		{"flag default", bound(), "quartet-system", sets.New("kube-system", "quartet-system")},
		{"flags not bound get the default", &Options{}, "", sets.New("kube-system")},
		{"flag list", bound("--chaos-protected-namespaces=a, b,,a"), "", sets.New("a", "b")},
		{"empty flag protects the operator's namespace only", bound("--chaos-protected-namespaces="), "own", sets.New("own")},
	} {
		assert.Equal(t, tc.protected, tc.opts.protected(tc.operator), tc.name)
	}
}

func TestWorkers(t *testing.T) {
	assert.Equal(t, defaultWorkers, (&Options{}).workers())
	assert.Equal(t, defaultWorkers, (&Options{MaxConcurrentReconciles: -1}).workers())
	assert.Equal(t, 5, (&Options{MaxConcurrentReconciles: 5}).workers())
}
