package bundlevalidation

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/hack/catalogtext"
)

// csvSetFlags are the manager flags the CSV's Deployment sets on the command line. A flag
// set there cannot be changed through QUARTET_<FLAG> (manager.SetFlagsFromEnv skips
// flags the command line set), so README.md, docs/INSTALL.md and docs/OLM.md name them.
var csvSetFlags = []string{"health-probe-bind-address", "leader-elect", "metrics-bind-address"}

// TestDocsNameTheFlagsTheCSVSets: the docs say that under OLM every flag but these three
// can be set through the Subscription's environment; that holds only while the CSV's
// manager container sets exactly these on its command line.
func TestDocsNameTheFlagsTheCSVSets(t *testing.T) {
	deployments := loadBundle(t).CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	require.Len(t, deployments, 1)
	containers := deployments[0].Spec.Template.Spec.Containers
	i := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == "manager" })
	require.True(t, i >= 0 && len(containers[i].Args) > 0, "the CSV's manager container sets no arguments")
	var set []string
	for _, a := range containers[i].Args {
		require.True(t, strings.HasPrefix(a, "--"), "argument %q is not a flag", a)
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		set = append(set, name)
	}
	slices.Sort(set)
	assert.Equal(t, csvSetFlags, set, "the flags the CSV sets changed: update csvSetFlags and the docs that name them")
	for _, doc := range []string{"README.md", "docs/INSTALL.md", "docs/OLM.md"} {
		text := string(read(t, doc))
		for _, f := range csvSetFlags {
			assert.Contains(t, text, "`--"+f, "%s does not name --%s among the flags the CSV sets", doc, f)
		}
	}
}

// TestCatalogueTextsComeFromTheREADME: what OperatorHub and Artifact Hub show for each kind
// is README.md's: the first paragraph of the kind's section of the CSV's description (the
// base make bundle starts from and the bundle) and the chart README's table row are the
// "what it does" text of README.md's table of kinds. Edit README.md, then make bundle helm.
func TestCatalogueTextsComeFromTheREADME(t *testing.T) {
	kinds, err := catalogtext.Kinds(string(read(t, "README.md")))
	require.NoError(t, err)
	base := &struct {
		Spec struct{ Description string } `json:"spec"`
	}{}
	require.NoError(t, yaml.Unmarshal(read(t, "config", "manifests", "bases", "quartet.clusterserviceversion.yaml"), base))
	chartReadme := string(read(t, "charts", "quartet", "README.md"))
	for csv, description := range map[string]string{"config/manifests/bases": base.Spec.Description, "bundle": loadBundle(t).CSV.Spec.Description} {
		for _, k := range kinds {
			_, section, found := strings.Cut(description, "\n### "+k.Name+" (")
			require.True(t, found, "%s: the CSV's description has no section for %s", csv, k.Name)
			paragraphs := strings.SplitN(section, "\n\n", 3)
			require.Len(t, paragraphs, 3, "%s: %s's section", csv, k.Name)
			assert.Equal(t, catalogtext.Normalize(k.Does), catalogtext.Normalize(paragraphs[1]),
				"%s: %s's first paragraph differs from README.md's table: run make bundle", csv, k.Name)
		}
	}
	for _, k := range kinds {
		assert.Contains(t, chartReadme, "| `"+k.Name+"` ("+k.Group+") | "+k.Does+" |",
			"charts/quartet/README.md: %s's row differs from README.md's table: run make helm", k.Name)
	}
}
