package crdvalidation

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"

	"github.com/quartet-operator/quartet/test/localcluster"
	"github.com/quartet-operator/quartet/test/testenv"
)

// TestConsentPolicyRefusesUnconsentedNamespaces installs config/policy as kustomize builds
// it (the kustomize and Helm installs ship it): a CopyratorRule naming a namespace where its
// ServiceAccount may not create the kind is refused at admission, naming the missing
// permission and how to find the namespace (a message cannot ask the authorizer); once the
// namespace's owner consents, the same rule is accepted.
func TestConsentPolicyRefusesUnconsentedNamespaces(t *testing.T) {
	env.Require(t)
	kustomize := os.Getenv("KUSTOMIZE")
	if kustomize == "" {
		t.Skip("KUSTOMIZE names the kustomize binary; `make test` sets it")
	}
	ctx := context.Background()
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	out, err := exec.Command(kustomize, "build", filepath.Join(root, "config", "policy")).Output()
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(out)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		require.NoError(t, env.Client.Create(ctx, u))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	}
	src := testenv.Namespace(t, env.Client, "policy-src", nil)
	consenting := testenv.Namespace(t, env.Client, "policy-yes", nil)
	refusing := testenv.Namespace(t, env.Client, "policy-no", nil)
	testenv.GrantCopies(t, env.Client, src, "copyrator", consenting)
	rule := func(nss ...string) *flantv1.CopyratorRule {
		return &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{GenerateName: "r-", Namespace: src},
			Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeSecret, Selector: map[string]flantv1.LabelValue{"a": "b"}, Namespaces: nss}}
	}
	// The policy takes a moment to be loaded by the API server.
	var refusal error
	require.Eventually(t, func() bool {
		refusal = env.Client.Create(ctx, rule(consenting, refusing))
		return refusal != nil
	}, 30*time.Second, 200*time.Millisecond, "a rule naming a namespace that does not consent is refused")
	assert.True(t, apierrors.IsForbidden(refusal) || apierrors.IsInvalid(refusal), "%v", refusal)
	assert.Contains(t, refusal.Error(), "spec.namespaces: ServiceAccount "+src+"/copyrator may not create secrets in every namespace listed")
	assert.Contains(t, refusal.Error(), refusing)
	assert.Contains(t, refusal.Error(), "kubectl auth can-i create secrets -n <namespace> --as=system:serviceaccount:"+src+":copyrator")
	require.NoError(t, env.Client.Create(ctx, rule(consenting)), "every named namespace consents")
	require.NoError(t, env.Client.Create(ctx, &flantv1.CopyratorRule{ObjectMeta: metav1.ObjectMeta{GenerateName: "all-", Namespace: src},
		Spec: flantv1.CopyratorRuleSpec{RuleType: flantv1.RuleTypeSecret, Selector: map[string]flantv1.LabelValue{"a": "b"}}}),
		"a rule without a list is the controller's to check, namespace by namespace")
	testenv.GrantCopies(t, env.Client, src, "copyrator", refusing)
	require.Eventually(t, func() bool { return env.Client.Create(ctx, rule(consenting, refusing)) == nil }, 30*time.Second, 200*time.Millisecond,
		"consent given: accepted")
}
