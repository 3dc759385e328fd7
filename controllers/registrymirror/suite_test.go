package registrymirror

import (
	"os"
	"testing"

	"github.com/quartet-operator/quartet/test/testenv"
)

// env is the full local cluster (kube-apiserver, controller-manager, scheduler and kwok):
// the integration tests need pods that become Ready, PVC binding and garbage collection.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunSuite(m, testenv.Full, &env))
}
