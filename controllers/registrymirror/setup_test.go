package registrymirror

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMirrorsNamedAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"hub-registry", []string{"hub"}},
		{"hub-registry-headless", []string{"hub"}},
		{"hub-registry-config", []string{"hub"}},
		{"hub-registry-cache", []string{"hub"}},
		{"hub-node", []string{"hub"}},
		{"-node", nil},
		{"kube-root-ca.crt", nil},
	} {
		obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: tc.name}}
		var got []string
		for _, r := range mirrorsNamedAfter(t.Context(), obj) {
			assert.Equal(t, "ns", r.Namespace)
			got = append(got, r.Name)
		}
		assert.ElementsMatch(t, tc.want, got, tc.name)
	}
}
