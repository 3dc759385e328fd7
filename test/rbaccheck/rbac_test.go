// Package rbaccheck holds the least-privilege checks of the generated RBAC: no wildcards,
// every rule justified in docs/SECURITY.md (and nothing there that is not generated),
// Secrets limited to what Copyrator needs, and the CSV granting exactly the same rules.
package rbaccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/test/localcluster"
)

// grant is one (group, resource, verbs) triple with who holds it.
type grant struct{ scope, group, resource, verbs string }

func root(t *testing.T) string {
	t.Helper()
	r, err := localcluster.RepoRoot()
	require.NoError(t, err)
	return r
}

func load(t *testing.T, rel string, obj any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), rel))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, obj))
}

// flatten turns rules into one grant per group and resource, verbs sorted.
func flatten(scope string, rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		verbs := slices.Clone(r.Verbs)
		sort.Strings(verbs)
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out[grant{scope, g, res, strings.Join(verbs, ",")}] = true
			}
		}
	}
	return out
}

func generated(t *testing.T) map[grant]bool {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	load(t, "config/rbac/role.yaml", role)
	leader := &rbacv1.Role{}
	load(t, "config/rbac/leader_election_role.yaml", leader)
	all := flatten("cluster", role.Rules)
	for g := range flatten("namespace", leader.Rules) {
		all[g] = true
	}
	return all
}

func TestNoWildcards(t *testing.T) {
	for g := range generated(t) {
		for _, field := range []string{g.group, g.resource} {
			assert.NotEqual(t, "*", field, "wildcard in %+v", g)
		}
		assert.NotContains(t, strings.Split(g.verbs, ","), "*", "wildcard verb in %+v", g)
	}
}

var cell = regexp.MustCompile("`([^`]*)`")

// documented reads the permission table of docs/SECURITY.md.
func documented(t *testing.T) map[grant]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "SECURITY.md"))
	require.NoError(t, err)
	out := map[grant]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 7 || !strings.HasPrefix(strings.TrimSpace(cols[1]), "`") {
			continue
		}
		m := cell.FindStringSubmatch(cols[1])
		require.NotNil(t, m, "group cell %q", cols[1])
		group := strings.Trim(m[1], `"`)
		verbs := strings.Split(strings.ReplaceAll(strings.TrimSpace(cols[3]), " ", ""), ",")
		sort.Strings(verbs)
		scope := "cluster"
		if strings.Contains(cols[4], "Role, own namespace") {
			scope = "namespace"
		}
		require.NotEmpty(t, strings.TrimSpace(cols[5]), "rule %s without a reason", line)
		out[grant{scope, group, strings.TrimSpace(cols[2]), strings.Join(verbs, ",")}] = true
	}
	require.NotEmpty(t, out, "no permission table found in docs/SECURITY.md")
	return out
}

// TestEveryRuleJustified keeps docs/SECURITY.md's table and the generated RBAC equal.
func TestEveryRuleJustified(t *testing.T) {
	gen, doc := generated(t), documented(t)
	for g := range gen {
		assert.True(t, doc[g], "generated rule not justified in docs/SECURITY.md: %+v", g)
	}
	for g := range doc {
		assert.True(t, gen[g], "docs/SECURITY.md names a rule that is not generated: %+v", g)
	}
}

// TestSecretsOnlyWhatCopyratorNeeds: Copyrator creates, patches and deletes its copies, lists
// and watches sources and copies by label, and gets a name already taken to classify it.
func TestSecretsOnlyWhatCopyratorNeeds(t *testing.T) {
	var secrets []string
	for g := range generated(t) {
		if g.group == "" && g.resource == "secrets" {
			secrets = append(secrets, g.scope+":"+g.verbs)
		}
	}
	assert.Equal(t, []string{"cluster:create,delete,get,list,patch,watch"}, secrets)
}

// clusterScoped are the resources of the manager's rules that are not namespaced.
var clusterScoped = map[string]bool{
	"namespaces": true, "tokenreviews": true, "subjectaccessreviews": true,
	"chaosagents": true, "chaosagents/status": true, "registryhostgrants": true,
}

// TestCSVGrantsTheGeneratedRules checks the bundle's CSV carries exactly config/rbac, and
// cluster-wide (clusterPermissions) only the rules for cluster-scoped resources: the rest
// is in permissions, which OLM grants in the OperatorGroup's target namespaces (cluster-wide
// only for AllNamespaces), so a namespace-scoped install holds namespace-scoped rights.
func TestCSVGrantsTheGeneratedRules(t *testing.T) {
	var csv struct {
		Spec struct {
			Install struct {
				Spec struct {
					ClusterPermissions []struct {
						Rules []rbacv1.PolicyRule `json:"rules"`
					} `json:"clusterPermissions"`
					Permissions []struct {
						Rules []rbacv1.PolicyRule `json:"rules"`
					} `json:"permissions"`
				} `json:"spec"`
			} `json:"install"`
		} `json:"spec"`
	}
	load(t, "bundle/manifests/quartet.clusterserviceversion.yaml", &csv)
	got := map[grant]bool{}
	for _, p := range csv.Spec.Install.Spec.ClusterPermissions {
		for g := range flatten("cluster", p.Rules) {
			assert.True(t, clusterScoped[g.resource], "a namespaced resource in clusterPermissions: %+v", g)
			got[g] = true
		}
	}
	for _, p := range csv.Spec.Install.Spec.Permissions {
		for g := range flatten("namespace", p.Rules) {
			assert.False(t, clusterScoped[g.resource], "a cluster-scoped resource in permissions: %+v", g)
			got[g] = true
		}
	}
	unscoped := func(m map[grant]bool) map[grant]bool {
		out := map[grant]bool{}
		for g := range m {
			g.scope = ""
			out[g] = true
		}
		return out
	}
	assert.Equal(t, unscoped(generated(t)), unscoped(got), "the CSV's rules are config/rbac's, split by scope")
}
