package process

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// settled reads obj until its status carries condition typ, then checks its
// resourceVersion stays the same for quiet: the controller explains and then waits, no hot
// loop of status writes.
func settled(t *testing.T, obj client.Object, typ string, conds func() []metav1.Condition, quiet time.Duration) metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	eventually(t, time.Minute, typ+" on "+obj.GetName(), func() bool {
		if !fetch(obj) {
			return false
		}
		c = meta.FindStatusCondition(conds(), typ)
		return c != nil && c.ObservedGeneration == obj.GetGeneration()
	})
	rv := obj.GetResourceVersion()
	time.Sleep(quiet)
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	assert.Equal(t, rv, obj.GetResourceVersion(), "%s kept writing its status", obj.GetName())
	return *c
}

// TestValidButNonsensicalObjects: objects the API server accepts but that cannot do
// anything end in a clear condition, with no crash and no hot loop.
func TestValidButNonsensicalObjects(t *testing.T) {
	env.Require(t)
	ns := namespace(t, "nonsense", nil)
	m := startManager(t, "nonsense", "--exchangerate-url="+ratesURL(t))

	rule := copyRule(ns, "matches-nothing", flantv1.RuleTypeSecret, "no-such=label", "")
	xr := rate(ns, "xxx", "XXX")
	agent := chaosAgent("targets-nothing", "no-namespace-has-this-label", func(s *blackadderv1beta1.ChaosAgentSpec) {
		s.TantrumMode, s.CancerMode, s.IpsumMode, s.PauseDuration = true, true, true, 60
	})
	create(t, rule, xr, agent)

	c := settled(t, rule, "Ready", func() []metav1.Condition { return rule.Status.Conditions }, 3*time.Second)
	assert.Equal(t, "NoSourcesMatched", c.Reason)
	t.Logf("CopyratorRule matching nothing: Ready=%s %s: %s", c.Status, c.Reason, c.Message)

	c = settled(t, xr, "Ready", func() []metav1.Condition { return xr.Status.Conditions }, 3*time.Second)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "UnknownCurrency", c.Reason)
	t.Logf("ExchangeRate XXX: Ready=%s %s: %s", c.Status, c.Reason, c.Message)

	c = settled(t, agent, "Ready", func() []metav1.Condition { return agent.Status.Conditions }, 3*time.Second)
	assert.Zero(t, agent.Status.Counts.PodsKilled+agent.Status.Counts.DeploymentsScaled+agent.Status.Counts.ConfigMapsIpsumed)
	assert.LessOrEqual(t, agent.Status.Rounds, int64(1), "one round per pauseDuration, not a hot loop")
	t.Logf("ChaosAgent selecting no namespace: Ready=%s %s: %s (rounds %d)", c.Status, c.Reason, c.Message, agent.Status.Rounds)

	deleteAndWait(t, agent, time.Minute)
	deleteAndWait(t, rule, time.Minute)
	assert.False(t, m.exited(), "the manager is still running")
	m.stop()
}
