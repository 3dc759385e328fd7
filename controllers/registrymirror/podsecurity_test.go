package registrymirror

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/cmd/nodeagent"
	"github.com/quartet-operator/quartet/test/podsecurity"
)

// TestPodSecurity renders every pod a mirror makes (desiredChildren: the registry
// StatefulSet, and the node agent DaemonSet with and without configureNodes), where the
// platform assigns UIDs (OpenShift) and where it does not, and checks each against
// Kubernetes' Pod Security `restricted` and OpenShift's `restricted-v2` SCC
// (test/podsecurity).
//
// The registry passes both where UIDs are assigned. Where they are not it names UID and
// fsGroup 1000 (a fresh volume is writable through fsGroup only; 0.2.0's caches were written by
// UID 1000), which restricted-v2 would refuse, so Images.AssignedUIDs must be set on OpenShift.
//
// The node agent is the one exception, by design (docs/SECURITY.md, Pod security): it
// publishes the mirror on each node's 127.0.0.1:<hostPort> for the container runtime, which
// cannot reach a Service (hostPort, always); and with configureNodes it writes containerd's
// root-owned hosts directory through a hostPath as UID 0 (no capability). Any other rule it
// broke would fail here.
func TestPodSecurity(t *testing.T) {
	relay := minimalMirror()
	configure := fullMirror()
	configure.Spec.ConfigureNodes = true
	cases := []struct {
		mirror *mirrorsv1alpha1.RegistryMirror
		// broken rules per pod kind (nil: none), for each profile
		restricted, restrictedV2 map[string][]string
		assigned                 bool
	}{{
		mirror: relay, assigned: true,
		restricted:   map[string][]string{"DaemonSet": {podsecurity.RuleHostPort}},
		restrictedV2: map[string][]string{"DaemonSet": {podsecurity.RuleHostPort}},
	}, {
		mirror: configure, assigned: true,
		restricted: map[string][]string{"DaemonSet": {podsecurity.RuleHostPort, podsecurity.RuleVolumeType,
			podsecurity.RuleRunAsRoot, podsecurity.RuleRunAsNonRoot}},
		restrictedV2: map[string][]string{"DaemonSet": {podsecurity.RuleHostPort, podsecurity.RuleVolumeType,
			podsecurity.RuleFixedUID, podsecurity.RuleRunAsNonRoot}},
	}, {
		mirror: relay, assigned: false,
		restricted: map[string][]string{"DaemonSet": {podsecurity.RuleHostPort}},
		restrictedV2: map[string][]string{"DaemonSet": {podsecurity.RuleHostPort},
			"StatefulSet": {podsecurity.RuleFixedUID, podsecurity.RuleFixedFSGroup}},
	}, {
		mirror: configure, assigned: false,
		restricted: map[string][]string{"DaemonSet": {podsecurity.RuleHostPort, podsecurity.RuleVolumeType,
			podsecurity.RuleRunAsRoot, podsecurity.RuleRunAsNonRoot}},
		restrictedV2: map[string][]string{"DaemonSet": {podsecurity.RuleHostPort, podsecurity.RuleVolumeType,
			podsecurity.RuleFixedUID, podsecurity.RuleRunAsNonRoot},
			"StatefulSet": {podsecurity.RuleFixedUID, podsecurity.RuleFixedFSGroup}},
	}}
	for _, tc := range cases {
		name := tc.mirror.Name
		if tc.mirror.Spec.ConfigureNodes {
			name += "/configureNodes"
		}
		if tc.assigned {
			name += "/assignedUIDs"
		}
		t.Run(name, func(t *testing.T) {
			img := testImages
			img.AssignedUIDs = tc.assigned
			r := reach{hostPort: 35000, hostsPath: hostsPath("", "docker.io"), capabilities: nodeagent.DefaultCapabilities}
			pods := map[string]*corev1.PodSpec{}
			for _, c := range desiredChildren(tc.mirror, img, r) {
				require.NoError(t, roundTrip(c.desired, c.live))
				switch o := c.live.(type) {
				case *appsv1.StatefulSet:
					pods[c.kind] = &o.Spec.Template.Spec
				case *appsv1.DaemonSet:
					pods[c.kind] = &o.Spec.Template.Spec
				case *appsv1.Deployment, *corev1.Pod:
					t.Fatalf("%s %s: a pod this test does not check yet", c.kind, c.name)
				}
			}
			require.Len(t, pods, 2, "the registry and the node agent")
			for kind, spec := range pods {
				for _, p := range []struct {
					profile podsecurity.Profile
					want    []string
				}{{podsecurity.Restricted, tc.restricted[kind]}, {podsecurity.RestrictedV2, tc.restrictedV2[kind]}} {
					got := podsecurity.Check(spec, p.profile)
					assert.ElementsMatch(t, p.want, podsecurity.Rules(got), "%s under %s: %v", kind, p.profile, got)
				}
			}
		})
	}
}
