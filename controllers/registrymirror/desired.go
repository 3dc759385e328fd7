package registrymirror

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/cmd/nodeagent"
	"github.com/quartet-operator/quartet/internal/registrycreds"
)

// Fixed facts of the operands: the registry listens on RegistryPort, the node agent on
// agentPort, published on the node's loopback address at the mirror's host port.
const (
	RegistryPort    = 5000
	agentPort       = 5000
	agentHealthPort = 8081
	// registryUID is the registry pod's UID, GID and fsGroup where the platform assigns none:
	// Quartet 0.2.0 wrote its caches as UID 1000 into directories only their owner may write.
	registryUID      = 1000
	configFileName   = "config.yml"
	configMountPath  = "/etc/distribution"
	cacheMountPath   = "/var/lib/registry"
	DefaultHostsRoot = "/etc/containerd/certs.d" // containerd's usual config_path
	hostsMountPath   = "/run/quartet/hosts-dir"
	helperMountPath  = "/quartet/bin"
	nodeLoopbackIP   = "127.0.0.1"
	defaultStorage   = "10Gi"
	registryBinary   = "/mirror-registry"
	operatorBinary   = "/manager"
	defaultNodeImage = "quay.io/quartet-operator/quartet:v0.3.0"
	defaultRegImage  = "quay.io/quartet-operator/mirror-registry:v0.3.0"
	// For objects that skipped the API server's defaulting.
	defaultRetention      = 30 * 24 * time.Hour
	defaultMaxDiskPercent = 85
	// The registry's http.draintimeout, after which it saves its last uses in the 10 s more
	// its pod's grace period leaves.
	registryDrainTimeout = 20 * time.Second
	registryGracePeriod  = int64(registryDrainTimeout/time.Second) + 10
)

// Labels and annotations the operator puts on what it owns.
const (
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "quartet-registrymirror"
	componentReg   = "registry"
	componentAgent = "node-agent"
	// A hash of everything applied to a child: a field the operator stops setting changes it.
	annotationAppliedHash = "mirrors.quartet.dev/applied-hash"
	labelReplica          = "mirrors.quartet.dev/replica"     // i > 0 on replica i's objects and pod
	annotationConfigHash  = "mirrors.quartet.dev/config-hash" // on the registry pod: config.yml changed
)

// Images are the operand images (RELATED_IMAGE_*) and how the cluster runs them.
type Images struct {
	Registry  string // cmd/mirror-registry
	NodeAgent string // the operator's own image: `manager node-agent` (cmd/nodeagent)
	// AssignedUIDs: the platform gives every pod a UID and fsGroup and refuses any other
	// (OpenShift's restricted-v2), so the registry pod names none.
	AssignedUIDs bool
}

// Names of a mirror's children: deterministic, so a pass finds them by name.
func serviceName(m *mirrorsv1alpha1.RegistryMirror) string       { return m.Name + "-registry" }
func headlessName(m *mirrorsv1alpha1.RegistryMirror) string      { return m.Name + "-registry-headless" }
func statefulSetName(m *mirrorsv1alpha1.RegistryMirror) string   { return m.Name + "-registry" }
func pvcName(m *mirrorsv1alpha1.RegistryMirror) string           { return m.Name + "-registry-cache" }
func configMapName(m *mirrorsv1alpha1.RegistryMirror) string     { return m.Name + "-registry-config" }
func daemonSetName(m *mirrorsv1alpha1.RegistryMirror) string     { return m.Name + "-node" }
func networkPolicyName(m *mirrorsv1alpha1.RegistryMirror) string { return m.Name + "-registry" }

// replicaStatefulSetName and replicaPVCName name replica i's StatefulSet and volume:
// replica 0's are a single replica's, so a mirror that grows keeps them; i > 0 adds "-<i>".
func replicaStatefulSetName(m *mirrorsv1alpha1.RegistryMirror, i int32) string {
	return replicaSuffix(statefulSetName(m), i)
}
func replicaPVCName(m *mirrorsv1alpha1.RegistryMirror, i int32) string {
	return replicaSuffix(pvcName(m), i)
}
func replicaSuffix(name string, i int32) string {
	if i == 0 {
		return name
	}
	return name + "-" + strconv.Itoa(int(i))
}

// replicaPodAddress is registry replica i's pod under the headless Service.
func replicaPodAddress(m *mirrorsv1alpha1.RegistryMirror, i int32) string {
	return fmt.Sprintf("%s-0.%s.%s.svc:%d", replicaStatefulSetName(m, i), headlessName(m), m.Namespace, RegistryPort)
}

// replicas is spec.replicas, or 1 when the object skipped defaulting.
func replicas(m *mirrorsv1alpha1.RegistryMirror) int32 { return max(ptr.Deref(m.Spec.Replicas, 1), 1) }

// child is one object a mirror owns: what it should be and an empty object to read it into.
type child struct {
	kind    string
	name    string
	desired runtime.ApplyConfiguration
	live    client.Object
	replica int32 // the registry replica of a StatefulSet or cache PVC
}

// reach is where a mirror's children reach beyond its registry: the nodes (hostPort 0:
// none) and the operator's namespace, whence the manager probes.
type reach struct {
	hostPort          int32
	hostsPath         string
	capabilities      []string
	operatorNamespace string
	pinnedImages      string // renderPinnedImages
}

// desiredChildren lists the mirror's objects in apply order: what the registry pods mount
// before the StatefulSets; a DaemonSet with a host port, a NetworkPolicy with credentials.
func desiredChildren(m *mirrorsv1alpha1.RegistryMirror, img Images, r reach) []child {
	config := renderRegistryConfig(m)
	n := replicas(m)
	out := []child{
		{kind: "ConfigMap", name: configMapName(m), desired: desiredConfigMap(m, config, r.pinnedImages), live: &corev1.ConfigMap{}},
		{kind: "Service", name: serviceName(m), desired: desiredService(m), live: &corev1.Service{}},
		{kind: "Service", name: headlessName(m), desired: desiredHeadlessService(m), live: &corev1.Service{}},
	}
	for i := range n {
		out = append(out, child{kind: "PersistentVolumeClaim", name: replicaPVCName(m, i), desired: desiredPVC(m, i), live: &corev1.PersistentVolumeClaim{}, replica: i})
	}
	if m.Spec.CredentialsSecretRef != nil {
		// Before the registry starts with the credentials.
		out = append(out, child{kind: "NetworkPolicy", name: networkPolicyName(m), desired: desiredNetworkPolicy(m, r.operatorNamespace), live: &networkingv1.NetworkPolicy{}})
	}
	for i := range n {
		out = append(out, child{kind: "StatefulSet", name: replicaStatefulSetName(m, i), desired: desiredStatefulSet(m, img, shortHash([]byte(config)), i),
			live: &appsv1.StatefulSet{}, replica: i})
	}
	if r.hostPort != 0 {
		out = append(out, child{kind: "DaemonSet", name: daemonSetName(m), desired: desiredDaemonSet(m, img, r.hostPort, r.hostsPath, r.capabilities), live: &appsv1.DaemonSet{}})
	}
	return out
}

// desiredNetworkPolicy lets only the mirror's namespace and the operator's reach the
// registry of a private upstream: others would pull its images without the credentials.
func desiredNetworkPolicy(m *mirrorsv1alpha1.RegistryMirror, operatorNamespace string) *networkingv1ac.NetworkPolicyApplyConfiguration {
	peers := []*networkingv1ac.NetworkPolicyPeerApplyConfiguration{
		networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()),
	}
	if operatorNamespace != "" && operatorNamespace != m.Namespace {
		peers = append(peers, networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(
			metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: operatorNamespace})))
	}
	return stampHash(owned(networkingv1ac.NetworkPolicy(networkPolicyName(m), m.Namespace), m, commonLabels(m, componentReg)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(m, componentReg))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithFrom(peers...).
				WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(RegistryPort))))))
}

// hostsPath is hostsDir (HostsDir) under root, the nodes' containerd config_path.
func hostsPath(root, hostsDir string) string {
	return strings.TrimSuffix(cmp.Or(root, DefaultHostsRoot), "/") + "/" + hostsDir
}

// Endpoint is the in-cluster address of the mirror.
func Endpoint(m *mirrorsv1alpha1.RegistryMirror) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", serviceName(m), m.Namespace, RegistryPort)
}

// nodeEndpoint is the mirror's address on every node, where the node agent listens.
func nodeEndpoint(hostPort int32) string {
	return fmt.Sprintf("http://%s:%d", nodeLoopbackIP, hostPort)
}

func upstreamURL(m *mirrorsv1alpha1.RegistryMirror) string {
	return strings.TrimSuffix(m.Spec.Upstream, "/")
}

// HostsDir is the upstream's directory under containerd's certs.d: host[:port], docker.io.
func HostsDir(upstream string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(upstream, "/"))
	if err != nil {
		return "", fmt.Errorf("parsing upstream %q: %w", upstream, err)
	}
	if u.Host == "" || strings.ContainsAny(u.Host, "/\\") || u.Host == "." || u.Host == ".." {
		return "", fmt.Errorf("upstream %q has no usable host", upstream)
	}
	switch strings.ToLower(u.Hostname()) {
	case "registry-1.docker.io", "index.docker.io", "docker.io":
		if u.Port() == "" || u.Port() == "443" {
			return "docker.io", nil
		}
	}
	return strings.ToLower(u.Host), nil
}

func selectorLabels(m *mirrorsv1alpha1.RegistryMirror, component string) map[string]string {
	return map[string]string{labelName: "registrymirror", labelInstance: m.Name, labelComponent: component}
}

func commonLabels(m *mirrorsv1alpha1.RegistryMirror, component string) map[string]string {
	l := selectorLabels(m, component)
	l[labelManagedBy] = managedBy
	return l
}

// owned gives a child its labels and the mirror as its controller.
func owned[T interface {
	WithLabels(map[string]string) T
	WithOwnerReferences(...*metav1ac.OwnerReferenceApplyConfiguration) T
}](ac T, m *mirrorsv1alpha1.RegistryMirror, labels map[string]string) T {
	return ac.WithLabels(labels).WithOwnerReferences(metav1ac.OwnerReference().
		WithAPIVersion(mirrorsv1alpha1.GroupVersion.String()).WithKind("RegistryMirror").
		WithName(m.Name).WithUID(m.UID).WithController(true).WithBlockOwnerDeletion(true))
}

// stampHash sets the applied-hash annotation; every builder calls it last.
func stampHash[T interface {
	WithAnnotations(map[string]string) T
}](ac T) T {
	return ac.WithAnnotations(map[string]string{annotationAppliedHash: hashJSON(ac)})
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshalling an apply configuration: %v", err)) // only plain data types here
	}
	return shortHash(b)
}

func shortHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// desiredConfigMap holds config.yml (its hash rolls the pod) and the pinned images (re-read).
func desiredConfigMap(m *mirrorsv1alpha1.RegistryMirror, config, pinnedImages string) *corev1ac.ConfigMapApplyConfiguration {
	return stampHash(owned(corev1ac.ConfigMap(configMapName(m), m.Namespace), m, commonLabels(m, componentReg)).
		WithData(map[string]string{configFileName: config, pinnedImagesKey: pinnedImages}))
}

// desiredService is the ClusterIP Service clients and node agents use.
func desiredService(m *mirrorsv1alpha1.RegistryMirror) *corev1ac.ServiceApplyConfiguration {
	return registryService(m, serviceName(m), corev1ac.ServiceSpec().WithType(corev1.ServiceTypeClusterIP))
}

// desiredHeadlessService governs the StatefulSets (stable pod DNS names).
func desiredHeadlessService(m *mirrorsv1alpha1.RegistryMirror) *corev1ac.ServiceApplyConfiguration {
	return registryService(m, headlessName(m), corev1ac.ServiceSpec().WithClusterIP(corev1.ClusterIPNone))
}

func registryService(m *mirrorsv1alpha1.RegistryMirror, name string, spec *corev1ac.ServiceSpecApplyConfiguration) *corev1ac.ServiceApplyConfiguration {
	return stampHash(owned(corev1ac.Service(name, m.Namespace), m, commonLabels(m, componentReg)).
		WithSpec(spec.WithSelector(selectorLabels(m, componentReg)).WithPorts(corev1ac.ServicePort().
			WithName("http").WithProtocol(corev1.ProtocolTCP).WithPort(RegistryPort).WithTargetPort(intstr.FromString("http")))))
}

// desiredPVC is the cache volume, the mirror's own (not an immutable claim template), so
// that growing spec.storage resizes it.
func desiredPVC(m *mirrorsv1alpha1.RegistryMirror, i int32) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	storage := m.Spec.Storage
	if storage.IsZero() {
		storage = resource.MustParse(defaultStorage)
	}
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: storage}))
	if m.Spec.StorageClassName != nil {
		spec = spec.WithStorageClassName(*m.Spec.StorageClassName)
	}
	return stampHash(owned(corev1ac.PersistentVolumeClaim(replicaPVCName(m, i), m.Namespace), m,
		replicaLabels(commonLabels(m, componentReg), i)).
		WithSpec(spec))
}

// restrictedContainerSecurity is the container part of the restricted pod security standard.
func restrictedContainerSecurity() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false).WithReadOnlyRootFilesystem(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

// registryPodSecurity is restricted, with a UID and fsGroup where the platform gives none.
func registryPodSecurity(img Images) *corev1ac.PodSecurityContextApplyConfiguration {
	sc := corev1ac.PodSecurityContext().WithRunAsNonRoot(true).WithFSGroupChangePolicy(corev1.FSGroupChangeOnRootMismatch).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if img.AssignedUIDs {
		return sc
	}
	return sc.WithRunAsUser(registryUID).WithRunAsGroup(registryUID).WithFSGroup(registryUID)
}

func retention(m *mirrorsv1alpha1.RegistryMirror) time.Duration {
	if r := m.Spec.Retention; r != nil && r.Duration > 0 {
		return r.Duration
	}
	return defaultRetention
}

// registryArgs are mirror-registry's command line (not the deprecated spec.cacheTTL).
func registryArgs(m *mirrorsv1alpha1.RegistryMirror) []string {
	args := []string{
		"--config=" + configMountPath + "/" + configFileName,
		"--retention=" + retention(m).String(),
		"--max-disk-percent=" + strconv.Itoa(int(ptr.Deref(m.Spec.MaxDiskPercent, defaultMaxDiskPercent))),
		"--pinned-file=" + configMountPath + "/" + pinnedImagesKey,
	}
	if len(m.Spec.WarmPlatforms) > 0 {
		// Unset: mirror-registry's default, its own node's platform.
		args = append(args, "--warm-platforms="+strings.Join(m.Spec.WarmPlatforms, ","))
	}
	return args
}

// replicaLabels adds the replica label for i > 0: replica 0's selector cannot change.
func replicaLabels(labels map[string]string, i int32) map[string]string {
	if i > 0 {
		labels[labelReplica] = strconv.Itoa(int(i))
	}
	return labels
}

// desiredStatefulSet runs registry replica i, one pod, on its cache volume; a new
// configHash (of config.yml) rolls it. Replica i > 0 prefers a node without another
// replica of the mirror: two on one node fail together.
func desiredStatefulSet(m *mirrorsv1alpha1.RegistryMirror, img Images, configHash string, i int32) *appsv1ac.StatefulSetApplyConfiguration {
	podSpec := corev1ac.PodSpec()
	if i > 0 {
		podSpec = podSpec.WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(corev1ac.PodAntiAffinity().
			WithPreferredDuringSchedulingIgnoredDuringExecution(corev1ac.WeightedPodAffinityTerm().
				WithWeight(100).
				WithPodAffinityTerm(corev1ac.PodAffinityTerm().
					WithTopologyKey(corev1.LabelHostname).
					WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(m, componentReg)))))))
	}
	// The operator's own image installs the credential helper the registry runs.
	helper := corev1ac.Container().WithName("install-credential-helper").WithImage(img.NodeAgent).
		WithCommand(operatorBinary).WithArgs("install-credential-helper", helperMountPath).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("helper").WithMountPath(helperMountPath)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")})).
		WithSecurityContext(restrictedContainerSecurity())
	pod := corev1ac.PodTemplateSpec().
		WithLabels(replicaLabels(commonLabels(m, componentReg), i)).
		WithAnnotations(map[string]string{annotationConfigHash: configHash}).
		WithSpec(podSpec.
			// Service links would put REGISTRY_* variables (from a Service named "registry")
			// into the environment, which the registry reads as configuration.
			WithEnableServiceLinks(false).
			WithAutomountServiceAccountToken(false).
			// Longer than the registry's drain, so it saves its last uses before it is killed.
			WithTerminationGracePeriodSeconds(registryGracePeriod).
			WithSecurityContext(registryPodSecurity(img)).
			WithInitContainers(helper).
			WithContainers(registryContainer(m, img)).
			WithVolumes(registryVolumes(m, i)...))
	return stampHash(owned(appsv1ac.StatefulSet(replicaStatefulSetName(m, i), m.Namespace), m,
		replicaLabels(commonLabels(m, componentReg), i)).
		WithSpec(appsv1ac.StatefulSetSpec().WithReplicas(1).WithServiceName(headlessName(m)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(replicaLabels(selectorLabels(m, componentReg), i))).
			WithTemplate(pod)))
}

func registryContainer(m *mirrorsv1alpha1.RegistryMirror, img Images) *corev1ac.ContainerApplyConfiguration {
	// "/" answers 200 only while the registry's storage health check passes.
	root := corev1ac.HTTPGetAction().WithPath("/").WithPort(intstr.FromString("http"))
	c := corev1ac.Container().WithName("registry").WithImage(img.Registry).WithCommand(registryBinary).WithArgs(registryArgs(m)...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(RegistryPort).WithProtocol(corev1.ProtocolTCP)).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("cache").WithMountPath(cacheMountPath),
			corev1ac.VolumeMount().WithName("config").WithMountPath(configMountPath).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
			corev1ac.VolumeMount().WithName("helper").WithMountPath(helperMountPath).WithReadOnly(true),
		).
		WithReadinessProbe(corev1ac.Probe().WithHTTPGet(root).WithPeriodSeconds(10).WithFailureThreshold(3)).
		WithLivenessProbe(corev1ac.Probe().WithHTTPGet(root).WithInitialDelaySeconds(10).WithPeriodSeconds(20).WithFailureThreshold(6)).
		WithSecurityContext(restrictedContainerSecurity())
	if m.Spec.CredentialsSecretRef != nil {
		c = c.WithVolumeMounts(corev1ac.VolumeMount().WithName("credentials").WithMountPath(registrycreds.DefaultDir).WithReadOnly(true))
	}
	if r := m.Spec.Resources; r != nil {
		res := corev1ac.ResourceRequirements()
		if len(r.Limits) > 0 {
			res = res.WithLimits(r.Limits)
		}
		if len(r.Requests) > 0 {
			res = res.WithRequests(r.Requests)
		}
		c = c.WithResources(res)
	}
	return c
}

// registryVolumes are the registry pod's; the credential helper reads the Secret's files.
func registryVolumes(m *mirrorsv1alpha1.RegistryMirror, i int32) []*corev1ac.VolumeApplyConfiguration {
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("cache").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(replicaPVCName(m, i))),
		corev1ac.Volume().WithName("config").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(configMapName(m))),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		corev1ac.Volume().WithName("helper").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	}
	if ref := m.Spec.CredentialsSecretRef; ref != nil {
		volumes = append(volumes, corev1ac.Volume().WithName("credentials").WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(ref.Name).WithDefaultMode(0o440).WithItems(
			corev1ac.KeyToPath().WithKey("username").WithPath("username"),
			corev1ac.KeyToPath().WithKey("password").WithPath("password"))))
	}
	return volumes
}

// nodeAgentArgs: a relay to the registry Service and, with configureNodes, the hosts.toml.
func nodeAgentArgs(m *mirrorsv1alpha1.RegistryMirror, hostPort int32, caps []string) nodeagent.Args {
	a := nodeagent.DefaultArgs()
	a.Listen = ":" + strconv.Itoa(agentPort)
	a.HealthListen = ":" + strconv.Itoa(agentHealthPort)
	a.Target = fmt.Sprintf("%s.%s.svc:%d", serviceName(m), m.Namespace, RegistryPort)
	a.Owner = m.Namespace + "/" + m.Name
	if m.Spec.ConfigureNodes {
		a.HostsDir = hostsMountPath
		a.Server = upstreamURL(m)
		a.Mirror = nodeEndpoint(hostPort)
		a.Capabilities = slices.Clone(caps)
	}
	return a
}

// desiredDaemonSet runs the node agent on every node, tainted or not, on 127.0.0.1 only,
// with a hostPath of one directory for hosts.toml.
func desiredDaemonSet(m *mirrorsv1alpha1.RegistryMirror, img Images, hostPort int32, hostsPath string, caps []string) *appsv1ac.DaemonSetApplyConfiguration {
	container := corev1ac.Container().WithName("node-agent").WithImage(img.NodeAgent).WithCommand(operatorBinary).
		WithArgs(append([]string{nodeagent.Subcommand}, nodeAgentArgs(m, hostPort, caps).CommandLine()...)...).
		WithPorts(
			corev1ac.ContainerPort().WithName("mirror").WithContainerPort(agentPort).
				WithHostPort(hostPort).WithHostIP(nodeLoopbackIP).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("health").WithContainerPort(agentHealthPort).WithProtocol(corev1.ProtocolTCP),
		).
		WithReadinessProbe(corev1ac.Probe().WithPeriodSeconds(10).
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/readyz").WithPort(intstr.FromString("health")))).
		WithLivenessProbe(corev1ac.Probe().WithPeriodSeconds(20).WithFailureThreshold(3).
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString("health")))).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")})).
		WithSecurityContext(restrictedContainerSecurity())

	podSecurity := corev1ac.PodSecurityContext().
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	spec := corev1ac.PodSpec().WithAutomountServiceAccountToken(false).WithEnableServiceLinks(false).
		WithTerminationGracePeriodSeconds(15).WithTolerations(corev1ac.Toleration().WithOperator(corev1.TolerationOpExists))
	if m.Spec.ConfigureNodes {
		// Writing into the root-owned certs.d directory needs UID 0, but no capability
		// (docs/SECURITY.md, Pod security).
		podSecurity = podSecurity.WithRunAsNonRoot(false).WithRunAsUser(0).WithRunAsGroup(0)
		container = container.WithVolumeMounts(corev1ac.VolumeMount().WithName("hosts-dir").WithMountPath(hostsMountPath))
		spec = spec.WithVolumes(corev1ac.Volume().WithName("hosts-dir").WithHostPath(
			corev1ac.HostPathVolumeSource().WithPath(hostsPath).WithType(corev1.HostPathDirectoryOrCreate)))
	} else {
		podSecurity = podSecurity.WithRunAsNonRoot(true)
	}
	spec = spec.WithSecurityContext(podSecurity).WithContainers(container)
	return stampHash(owned(appsv1ac.DaemonSet(daemonSetName(m), m.Namespace), m, commonLabels(m, componentAgent)).
		WithSpec(appsv1ac.DaemonSetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(m, componentAgent))).
			WithUpdateStrategy(appsv1ac.DaemonSetUpdateStrategy().
				WithType(appsv1.RollingUpdateDaemonSetStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDaemonSet().WithMaxUnavailable(intstr.FromInt32(1)))).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(commonLabels(m, componentAgent)).WithSpec(spec))))
}

// renderRegistryConfig renders config.yml: proxy mode, plain HTTP (TLS is the network's),
// a drain on SIGTERM, a storage health check that gates "/". The proxy has no username or
// password: the registry asks the credential helper (proxy.exec, internal/registrycreds), so no
// secret is written into the ConfigMap and the registry starts while the upstream is down. Nor a
// ttl: mirror-registry keeps content by use instead (--retention).
func renderRegistryConfig(m *mirrorsv1alpha1.RegistryMirror) string {
	type object = map[string]any
	mirror := m.Namespace + "/" + m.Name
	b, err := yaml.Marshal(object{
		"version": "0.1",
		"log":     object{"level": "info", "formatter": "text", "fields": object{"service": "registry", "mirror": mirror}},
		"storage": object{"filesystem": object{"rootdirectory": cacheMountPath}},
		"http": object{"addr": fmt.Sprintf(":%d", RegistryPort), "headers": object{"X-Content-Type-Options": []string{"nosniff"}},
			"draintimeout": registryDrainTimeout.String()},
		"health": object{"storagedriver": object{"enabled": true, "interval": "10s", "threshold": 3}},
		// lifetime: how long a rotated Secret can go unused.
		"proxy": object{"remoteurl": upstreamURL(m),
			"exec": object{"command": helperMountPath + "/" + registrycreds.HelperName, "lifetime": "30s"}},
	})
	if err != nil {
		panic(fmt.Sprintf("marshalling the registry configuration: %v", err)) // plain data, cannot fail
	}
	return "# Rendered by the Quartet operator for RegistryMirror " + mirror + "; edits are overwritten.\n" + string(b)
}
