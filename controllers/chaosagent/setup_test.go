package chaosagent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/quartet-operator/quartet/internal/operator"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestSetupLogsUnknownOperatorNamespace registers the controller with a manager that is never
// started (the API server is asked only for its resources) and reads what Setup logged.
func TestSetupLogsUnknownOperatorNamespace(t *testing.T) {
	env.Require(t)
	for _, tc := range []struct {
		name      string
		namespace string
		logged    bool
	}{
		{"run outside a cluster", "", true},
		{"own namespace known", "quartet-system", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			opts := operator.ManagerOptions(testenv.Scheme(), operator.Shared{OperatorNamespace: tc.namespace})
			opts.Metrics = metricsserver.Options{BindAddress: "0"}
			opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
			opts.Logger = crzap.New(crzap.WriteTo(&out))
			mgr, err := ctrl.NewManager(env.Config, opts)
			require.NoError(t, err)
			o := &Options{}
			require.NoError(t, o.Setup(mgr, operator.Shared{OperatorNamespace: tc.namespace}))
			if !tc.logged {
				assert.NotContains(t, out.String(), "Operator namespace unknown")
				return
			}
			assert.Contains(t, out.String(), "Operator namespace unknown: it is not protected from ChaosAgents")
			assert.Equal(t, 1, strings.Count(out.String(), "Operator namespace unknown"), "logged once")
			assert.Contains(t, out.String(), `"protectedNamespaces":["kube-node-lease","kube-public","kube-system"]`)
		})
	}
}
