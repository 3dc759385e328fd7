package catalogtext

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const readme = "| kind | group | what it does |\n|---|---|---|\n" +
	"| `ChaosAgent` (cluster-scoped) | `blackadder.io` v1beta1 | Kills pods. |\n" +
	"| `CopyratorRule` (`copyr`) | `flant.com` v1 | Copies   ConfigMaps. |\n" +
	"| `ExchangeRate` | `operators.brennerm.github.io` v1 | Keeps a rate. |\n" +
	"| `RegistryMirror` | `mirrors.quartet.dev` v1alpha1 | Caches images. |\n"

func TestKinds(t *testing.T) {
	kinds, err := Kinds(readme)
	require.NoError(t, err)
	assert.Equal(t, []Kind{{"ChaosAgent", "blackadder.io", "Kills pods."}, {"CopyratorRule", "flant.com", "Copies   ConfigMaps."},
		{"ExchangeRate", "operators.brennerm.github.io", "Keeps a rate."}, {"RegistryMirror", "mirrors.quartet.dev", "Caches images."}}, kinds)
	_, err = Kinds(strings.Replace(readme, "| `ExchangeRate`", "| ExchangeRate", 1))
	assert.ErrorContains(t, err, "3 rows")
}

func TestWrap(t *testing.T) {
	assert.Equal(t, []string{"aa bb", "cc", "dddddddd", "e"}, Wrap("aa bb  cc\ndddddddd e", 5))
	assert.Equal(t, []string{"one"}, Wrap("one", 80))
}

func TestSetLeads(t *testing.T) {
	kinds, err := Kinds(readme)
	require.NoError(t, err)
	csv := "spec:\n  description: |\n    Intro.\n\n"
	for _, k := range kinds {
		csv += "    ### " + k.Name + " (group)\n\n    Old lead\n    on two lines.\n\n    Details.\n\n"
	}
	csv += "  displayName: Quartet\n"
	out, err := SetLeads(csv, kinds)
	require.NoError(t, err)
	assert.Contains(t, out, "    ### CopyratorRule (group)\n\n    Copies ConfigMaps.\n\n    Details.\n")
	assert.NotContains(t, out, "Old lead")
	again, err := SetLeads(out, kinds)
	require.NoError(t, err)
	assert.Equal(t, out, again, "idempotent")

	_, err = SetLeads(strings.Replace(csv, "### ExchangeRate (", "### Rates (", 1), kinds)
	assert.ErrorContains(t, err, `no "### ExchangeRate (" heading`)
}
