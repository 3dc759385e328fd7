// Package alerts reads Quartet's alerting rules (config/prometheus/prometheusrule.yaml) as
// a Prometheus rule file, for promtool's unit tests here and for the real Prometheus of
// test/e2e.
package alerts

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Rule is one alerting rule of the PrometheusRule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Group is a rule group.
type Group struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// RuleFile is both the PrometheusRule's spec and a Prometheus rule file.
type RuleFile struct {
	Groups []Group `json:"groups"`
}

// Alerts lists every rule of every group.
func (rf RuleFile) Alerts() []Rule {
	var out []Rule
	for _, g := range rf.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// Path is the PrometheusRule, relative to the repository root.
var Path = filepath.Join("config", "prometheus", "prometheusrule.yaml")

// ReadRules reads the PrometheusRule under the repository root.
func ReadRules(root string) (RuleFile, error) {
	b, err := os.ReadFile(filepath.Join(root, Path))
	if err != nil {
		return RuleFile{}, err
	}
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       RuleFile       `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &pr); err != nil {
		return RuleFile{}, fmt.Errorf("%s: %w", Path, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		return RuleFile{}, fmt.Errorf("%s: a %s %s, not a monitoring.coreos.com/v1 PrometheusRule", Path, pr.APIVersion, pr.Kind)
	}
	return pr.Spec, nil
}

// WriteRuleFile writes the rules as a Prometheus rule file.
func WriteRuleFile(rf RuleFile, path string) error {
	b, err := yaml.Marshal(rf)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
