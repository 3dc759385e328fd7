// Package podsecurity checks pod specs against the two admission rules Quartet's pods must
// pass: Kubernetes' Pod Security Standard `restricted` and OpenShift's default security
// context constraint `restricted-v2`. Pure Go, no cluster: the tests of each pod's builder
// (controllers/registrymirror) and of config/manager call Check on the pod template.
//
// restricted-v2 is read from its manifest in openshift/cluster-kube-apiserver-operator
// (bindata/bootkube/scc-manifests/0000_20_kube-apiserver-operator_00_scc-restricted-v2.yaml):
// no host network, PID, IPC, ports or host directories; no privileged containers or privilege
// escalation; requiredDropCapabilities ALL and allowedCapabilities NET_BIND_SERVICE; seccomp
// runtime/default; runAsUser MustRunAsRange, fsGroup and seLinuxContext MustRunAs (from the
// namespace's annotations); volumes configMap, csi, downwardAPI, emptyDir, ephemeral, image,
// persistentVolumeClaim, projected, secret. The admission plugin fills in the UID, fsGroup and
// SELinux level where a pod leaves them unset and refuses values outside the namespace's
// ranges, which a pod cannot know in advance: a pod that works everywhere leaves them unset.
package podsecurity

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Profile is the set of rules a pod is checked against.
type Profile int

const (
	// Restricted is the Pod Security Standard `restricted` (Kubernetes' Pod Security admission).
	Restricted Profile = iota
	// RestrictedV2 is OpenShift's `restricted-v2` SCC, plus runAsNonRoot from Restricted:
	// restricted-v2 assigns a non-root UID, so a pod that passes both runs on either.
	RestrictedV2
)

func (p Profile) String() string {
	if p == RestrictedV2 {
		return "restricted-v2"
	}
	return "restricted"
}

// Rules, the names a Violation carries.
const (
	RuleHostNetwork      = "hostNetwork"
	RuleHostPID          = "hostPID"
	RuleHostIPC          = "hostIPC"
	RuleHostPort         = "hostPort"
	RuleVolumeType       = "volumeType" // hostPath and every other type outside the allowed list
	RulePrivileged       = "privileged"
	RulePrivEscalation   = "allowPrivilegeEscalation"
	RuleCapabilitiesDrop = "capabilitiesDropAll"
	RuleCapabilitiesAdd  = "capabilitiesAdd"
	RuleSeccomp          = "seccompProfile"
	RuleRunAsNonRoot     = "runAsNonRoot"
	RuleRunAsRoot        = "runAsUser0"        // restricted: UID 0 named
	RuleFixedUID         = "runAsUserFixed"    // restricted-v2: any UID named (MustRunAsRange)
	RuleFixedFSGroup     = "fsGroupFixed"      // restricted-v2: any fsGroup named (MustRunAs)
	RuleSELinuxOptions   = "seLinuxOptionsSet" // restricted-v2: an SELinux level named (MustRunAs)
)

// Violation is one broken rule, and where.
type Violation struct {
	Rule  string
	Where string
}

func (v Violation) String() string { return v.Rule + ": " + v.Where }

// Volume types both profiles allow (restricted-v2 adds image; Pod Security's restricted list
// does not name it, so it is not used here).
var allowedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}

// Check returns every rule of profile that spec breaks, in a stable order.
func Check(spec *corev1.PodSpec, profile Profile) []Violation {
	var out []Violation
	add := func(rule, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Where: fmt.Sprintf(format, args...)})
	}
	if spec.HostNetwork {
		add(RuleHostNetwork, "pod")
	}
	if spec.HostPID {
		add(RuleHostPID, "pod")
	}
	if spec.HostIPC {
		add(RuleHostIPC, "pod")
	}
	for _, v := range spec.Volumes {
		if t := volumeType(v); !slices.Contains(allowedVolumes, t) {
			add(RuleVolumeType, "volume %s is %s", v.Name, t)
		}
	}
	pod := spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	if profile == RestrictedV2 {
		if pod.RunAsUser != nil {
			add(RuleFixedUID, "pod runAsUser %d", *pod.RunAsUser)
		}
		if pod.FSGroup != nil {
			add(RuleFixedFSGroup, "pod fsGroup %d", *pod.FSGroup)
		}
		if pod.SELinuxOptions != nil {
			add(RuleSELinuxOptions, "pod")
		}
	} else if pod.RunAsUser != nil && *pod.RunAsUser == 0 {
		add(RuleRunAsRoot, "pod runAsUser 0")
	}

	containers := append(slices.Clone(spec.InitContainers), spec.Containers...)
	for _, e := range spec.EphemeralContainers {
		containers = append(containers, corev1.Container(e.EphemeralContainerCommon))
	}
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		where := "container " + c.Name
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				add(RuleHostPort, "%s port %s publishes host port %d", where, p.Name, p.HostPort)
			}
		}
		if sc.Privileged != nil && *sc.Privileged {
			add(RulePrivileged, "%s", where)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			add(RulePrivEscalation, "%s does not set it to false", where)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			add(RuleCapabilitiesDrop, "%s", where)
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if c != "NET_BIND_SERVICE" {
					add(RuleCapabilitiesAdd, "%s adds %s", where, c)
				}
			}
		}
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil {
			nonRoot = pod.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot {
			add(RuleRunAsNonRoot, "%s (or its pod) does not set it to true", where)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = pod.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			add(RuleSeccomp, "%s (or its pod) is not RuntimeDefault", where)
		}
		if profile == RestrictedV2 {
			if sc.RunAsUser != nil {
				add(RuleFixedUID, "%s runAsUser %d", where, *sc.RunAsUser)
			}
			if sc.SELinuxOptions != nil {
				add(RuleSELinuxOptions, "%s", where)
			}
		} else if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			add(RuleRunAsRoot, "%s runAsUser 0", where)
		}
	}
	return out
}

// Rules lists the distinct rules of violations, in order of first appearance.
func Rules(violations []Violation) []string {
	var out []string
	for _, v := range violations {
		if !slices.Contains(out, v.Rule) {
			out = append(out, v.Rule)
		}
	}
	return out
}

// volumeType is a volume's source field name, as the profiles name volume types.
func volumeType(v corev1.Volume) string {
	s := v.VolumeSource
	switch {
	case s.ConfigMap != nil:
		return "configMap"
	case s.CSI != nil:
		return "csi"
	case s.DownwardAPI != nil:
		return "downwardAPI"
	case s.EmptyDir != nil:
		return "emptyDir"
	case s.Ephemeral != nil:
		return "ephemeral"
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case s.Projected != nil:
		return "projected"
	case s.Secret != nil:
		return "secret"
	case s.HostPath != nil:
		return "hostPath"
	case s.Image != nil:
		return "image"
	}
	return "another type"
}
