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
	always := func(extra ...string) sets.Set[string] {
		return sets.New("kube-system", "kube-public", "kube-node-lease").Insert(extra...)
	}
	for _, tc := range []struct {
		name      string
		opts      *Options
		operator  string
		protected sets.Set[string]
	}{
		{"flag default", bound(), "quartet-system", always("quartet-system")},
		{"flags not bound", &Options{}, "", always()},
		{"the flag adds to the cluster's namespaces", bound("--chaos-protected-namespaces=a, b,,a"), "own", always("a", "b", "own")},
		{"the flag cannot take kube-system out", bound("--chaos-protected-namespaces=a"), "", always("a")},
		{"empty flag", bound("--chaos-protected-namespaces="), "own", always("own")},
	} {
		assert.Equal(t, tc.protected, tc.opts.protected(tc.operator), tc.name)
	}
}

func TestWorkers(t *testing.T) {
	assert.Equal(t, defaultWorkers, (&Options{}).workers())
	assert.Equal(t, defaultWorkers, (&Options{MaxConcurrentReconciles: -1}).workers())
	assert.Equal(t, 5, (&Options{MaxConcurrentReconciles: 5}).workers())
}
