package registrymirror

import (
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	"github.com/quartet-operator/quartet/controllers/registrymirror/nodeagent"
	"github.com/quartet-operator/quartet/internal/registrycreds"
)

// Fixed facts of the operands. The registry listens on RegistryPort in its pod and behind
// both Services; the node agent listens on agentPort in its pod, published on the node's
// loopback address at the mirror's host port.
const (
	RegistryPort    = 5000
	agentPort       = 5000
	agentHealthPort = 8081
	// registryUID is the registry pod's UID, GID and fsGroup where the platform assigns
	// none (see Images.AssignedUIDs). A fresh volume is writable by a non-root UID only
	// through fsGroup; and the caches of Quartet 0.2.0, whose registry image (docker.io/library/registry)
	// had no USER, were written by UID 1000 into directories only their owner may write
	// (mode 0755), so the registry keeps that UID rather than its image's USER 65532: it
	// must add to and delete from those directories after an upgrade.
	registryUID     = 1000
	configFileName  = "config.yml"
	configMountPath = "/etc/distribution"
	cacheMountPath  = "/var/lib/registry"
	// DefaultHostsRoot is containerd's usual registry config_path on nodes.
	DefaultHostsRoot = "/etc/containerd/certs.d"
	hostsMountPath   = "/run/quartet/hosts-dir"
	helperMountPath  = "/quartet/bin"
	nodeLoopbackIP   = "127.0.0.1"
	defaultStorage   = "10Gi"
	registryBinary   = "/mirror-registry"
	operatorBinary   = "/manager"
	defaultNodeImage = "quay.io/quartet-operator/quartet:v0.3.0"
	defaultRegImage  = "quay.io/quartet-operator/mirror-registry:v0.3.0"

	// defaultRetention and defaultMaxDiskPercent are spec.retention's and
	// spec.maxDiskPercent's defaults (the API server fills them in; these serve objects
	// that skipped defaulting).
	defaultRetention      = 30 * 24 * time.Hour
	defaultMaxDiskPercent = 85
	// registryDrainTimeout is the registry's http.draintimeout: on SIGTERM it lets open
	// requests finish for this long, then saves its last-use state file on the cache
	// volume. registryGracePeriod, the pod's terminationGracePeriodSeconds, leaves 10 s
	// beyond it for the save before the kubelet kills it.
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

	// annotationAppliedHash holds a hash of everything the operator applied to a child, so
	// a field the operator stops setting is noticed and removed (see needsApply).
	annotationAppliedHash = "mirrors.quartet.dev/applied-hash"
	// labelReplica marks registry replica i > 0's StatefulSet, pod and cache PVC with i.
	labelReplica = "mirrors.quartet.dev/replica"

	// annotationConfigHash on the registry pod template rolls the StatefulSet when the
	// rendered registry configuration changes (a ConfigMap change alone restarts nothing).
	annotationConfigHash = "mirrors.quartet.dev/config-hash"
)

// Images are the operand images (RELATED_IMAGE_* environment variables, as OLM expects)
// and how the cluster runs them.
type Images struct {
	// Registry is the mirror-registry image (cmd/mirror-registry: the CNCF distribution
	// registry with retention by use).
	Registry string
	// NodeAgent is the operator's own image; its binary runs `node-agent` (package nodeagent).
	NodeAgent string
	// AssignedUIDs is true where the platform gives every pod a UID and fsGroup from its
	// namespace's range and refuses any other (OpenShift: the restricted-v2 SCC's
	// MustRunAsRange and MustRunAs). The registry pod then names none; elsewhere it names
	// registryUID. The node agent never names a non-root UID: the operator image's USER
	// 65532 serves where nothing is assigned.
	AssignedUIDs bool
}

// Names of a mirror's children: deterministic, so a pass finds them by name.
func serviceName(m *mirrorsv1alpha1.RegistryMirror) string  { return m.Name + "-registry" }
func headlessName(m *mirrorsv1alpha1.RegistryMirror) string { return m.Name + "-registry-headless" }
func statefulSetName(m *mirrorsv1alpha1.RegistryMirror) string {
	return m.Name + "-registry"
}
func pvcName(m *mirrorsv1alpha1.RegistryMirror) string { return m.Name + "-registry-cache" }

// replicaStatefulSetName and replicaPVCName name registry replica i's StatefulSet and
// cache volume. Replica 0's are the names a mirror of one replica has always had, so a
// mirror that grows keeps its registry and its cache; replica i > 0 adds "-<i>".
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

// replicaPodAddress is where the manager asks registry replica i itself (not the
// Service, which picks any replica): its one pod's name under the headless Service.
func replicaPodAddress(m *mirrorsv1alpha1.RegistryMirror, i int32) string {
	return fmt.Sprintf("%s-0.%s.%s.svc:%d", replicaStatefulSetName(m, i), headlessName(m), m.Namespace, RegistryPort)
}

// replicas is spec.replicas, or 1 when the object skipped defaulting.
func replicas(m *mirrorsv1alpha1.RegistryMirror) int32 {
	if r := m.Spec.Replicas; r != nil && *r > 0 {
		return *r
	}
	return 1
}
func configMapName(m *mirrorsv1alpha1.RegistryMirror) string { return m.Name + "-registry-config" }
func daemonSetName(m *mirrorsv1alpha1.RegistryMirror) string { return m.Name + "-node" }
func networkPolicyName(m *mirrorsv1alpha1.RegistryMirror) string {
	return m.Name + "-registry"
}

// child is one object a mirror owns: what it should be and an empty object to read it into.
type child struct {
	kind    string
	name    string
	desired runtime.ApplyConfiguration
	live    client.Object
	// replica is the registry replica a StatefulSet or cache PVC serves (0 for the others).
	replica int32
}

// reach is where a mirror's children reach beyond its registry: the node side (hostPort
// 0: none; hostsPath, the node directory the agents write hosts.toml into, see hostsPath;
// capabilities, hosts.toml's) and the operator's namespace, from where the manager probes
// the registry of a private upstream's mirror.
type reach struct {
	hostPort          int32
	hostsPath         string
	capabilities      []string
	operatorNamespace string
	// pinnedImages is the registry's pinned-images file (renderPinnedImages).
	pinnedImages string
}

// desiredChildren lists the mirror's objects in apply order: what the registry pods mount
// comes before the StatefulSets, one StatefulSet and cache PVC per replica. Without a host
// port (no node access, see nodeaccess.go, or no free port) there is no DaemonSet to apply;
// without upstream credentials no NetworkPolicy.
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

// desiredNetworkPolicy is the private-image boundary of a mirror whose upstream needs
// credentials: its registry pods accept connections only from pods of the mirror's own
// namespace (its node agents among them) and of the operator's namespace (the manager's
// probe). Whoever else could reach the cache would pull the upstream's private images
// without its credentials. (Enforced where the network plugin implements NetworkPolicy.)
func desiredNetworkPolicy(m *mirrorsv1alpha1.RegistryMirror, operatorNamespace string) *networkingv1ac.NetworkPolicyApplyConfiguration {
	peers := []*networkingv1ac.NetworkPolicyPeerApplyConfiguration{
		networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()),
	}
	if operatorNamespace != "" && operatorNamespace != m.Namespace {
		peers = append(peers, networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(
			metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: operatorNamespace})))
	}
	return stampHash(networkingv1ac.NetworkPolicy(networkPolicyName(m), m.Namespace).
		WithLabels(commonLabels(m, componentReg)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(m, componentReg))).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(networkingv1ac.NetworkPolicyIngressRule().
				WithFrom(peers...).
				WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(RegistryPort))))))
}

// hostsPath is the upstream's containerd hosts directory on the nodes: hostsDir (see
// HostsDir) under root, the nodes' containerd config_path (DefaultHostsRoot when empty).
func hostsPath(root, hostsDir string) string {
	if root == "" {
		root = DefaultHostsRoot
	}
	return strings.TrimSuffix(root, "/") + "/" + hostsDir
}

// Endpoint is the in-cluster address of the mirror.
func Endpoint(m *mirrorsv1alpha1.RegistryMirror) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", serviceName(m), m.Namespace, RegistryPort)
}

// nodeEndpoint is the mirror's address on every node, where the node agent listens.
func nodeEndpoint(hostPort int32) string {
	return fmt.Sprintf("http://%s:%d", nodeLoopbackIP, hostPort)
}

// upstreamURL is spec.upstream without a trailing slash.
func upstreamURL(m *mirrorsv1alpha1.RegistryMirror) string {
	return strings.TrimSuffix(m.Spec.Upstream, "/")
}

// HostsDir is the directory under /etc/containerd/certs.d that containerd consults for
// images of the upstream: the registry host (with its port, if any). Docker Hub's API host
// serves the "docker.io" namespace, which is the name image references use.
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

func ownerReference(m *mirrorsv1alpha1.RegistryMirror) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(mirrorsv1alpha1.GroupVersion.String()).
		WithKind("RegistryMirror").
		WithName(m.Name).
		WithUID(m.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// stampHash sets the applied-hash annotation to a hash of everything else in ac (which
// must not carry the annotation yet). Called last by every builder.
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

// desiredConfigMap holds the registry's config.yml and its pinned images. Only config.yml
// rolls the registry pod (its hash is the pod's annotation); the registry re-reads the
// pinned images when the kubelet updates the file.
func desiredConfigMap(m *mirrorsv1alpha1.RegistryMirror, config, pinnedImages string) *corev1ac.ConfigMapApplyConfiguration {
	return stampHash(corev1ac.ConfigMap(configMapName(m), m.Namespace).
		WithLabels(commonLabels(m, componentReg)).
		WithOwnerReferences(ownerReference(m)).
		WithData(map[string]string{configFileName: config, pinnedImagesKey: pinnedImages}))
}

func servicePort() *corev1ac.ServicePortApplyConfiguration {
	return corev1ac.ServicePort().WithName("http").WithProtocol(corev1.ProtocolTCP).
		WithPort(RegistryPort).WithTargetPort(intstr.FromString("http"))
}

// desiredService is the ClusterIP Service clients and node agents use.
func desiredService(m *mirrorsv1alpha1.RegistryMirror) *corev1ac.ServiceApplyConfiguration {
	return stampHash(corev1ac.Service(serviceName(m), m.Namespace).
		WithLabels(commonLabels(m, componentReg)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(selectorLabels(m, componentReg)).
			WithPorts(servicePort())))
}

// desiredHeadlessService governs the StatefulSet (stable pod DNS name).
func desiredHeadlessService(m *mirrorsv1alpha1.RegistryMirror) *corev1ac.ServiceApplyConfiguration {
	return stampHash(corev1ac.Service(headlessName(m), m.Namespace).
		WithLabels(commonLabels(m, componentReg)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(corev1ac.ServiceSpec().
			WithClusterIP(corev1.ClusterIPNone).
			WithSelector(selectorLabels(m, componentReg)).
			WithPorts(servicePort())))
}

// storageRequest is spec.storage, or the 10Gi default when the object skipped defaulting.
func storageRequest(m *mirrorsv1alpha1.RegistryMirror) resource.Quantity {
	if m.Spec.Storage.IsZero() {
		return resource.MustParse(defaultStorage)
	}
	return m.Spec.Storage
}

// desiredPVC is the cache volume. The mirror owns it directly (not through the
// StatefulSet's volumeClaimTemplates) so that growing spec.storage resizes it — claim
// templates are immutable — and so deleting the mirror deletes the cache.
//
// Replica i > 0's volume carries the replica label, so scaling down finds it
// (extraReplicas).
func desiredPVC(m *mirrorsv1alpha1.RegistryMirror, i int32) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(corev1.ReadWriteOnce).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: storageRequest(m)}))
	if m.Spec.StorageClassName != nil {
		spec = spec.WithStorageClassName(*m.Spec.StorageClassName)
	}
	return stampHash(corev1ac.PersistentVolumeClaim(replicaPVCName(m, i), m.Namespace).
		WithLabels(replicaLabels(commonLabels(m, componentReg), i)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(spec))
}

// restrictedContainerSecurity is the container part of the restricted pod security standard.
func restrictedContainerSecurity() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

// registryPodSecurity is the registry pod's part of the restricted pod security standard,
// with a UID and fsGroup of its own only where the platform assigns none: the cache volume
// is writable through the fsGroup either way.
func registryPodSecurity(img Images) *corev1ac.PodSecurityContextApplyConfiguration {
	sc := corev1ac.PodSecurityContext().
		WithRunAsNonRoot(true).
		WithFSGroupChangePolicy(corev1.FSGroupChangeOnRootMismatch).
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if img.AssignedUIDs {
		return sc
	}
	return sc.WithRunAsUser(registryUID).WithRunAsGroup(registryUID).WithFSGroup(registryUID)
}

// retention is spec.retention, or its default when the object skipped defaulting.
func retention(m *mirrorsv1alpha1.RegistryMirror) time.Duration {
	if r := m.Spec.Retention; r != nil && r.Duration > 0 {
		return r.Duration
	}
	return defaultRetention
}

// maxDiskPercent is spec.maxDiskPercent (0: no disk bound), or its default when the object
// skipped defaulting.
func maxDiskPercent(m *mirrorsv1alpha1.RegistryMirror) int32 {
	if p := m.Spec.MaxDiskPercent; p != nil {
		return *p
	}
	return defaultMaxDiskPercent
}

// registryArgs are mirror-registry's command line: the rendered config.yml, and the
// retention and disk bound of the spec. The state file stays at its default, on the cache
// volume (<rootdirectory>/quartet/last-use), so it lives as long as the cache it describes.
// The pinned images are the ConfigMap's pinnedImagesKey (see inuse.go), warmed for
// spec.warmPlatforms. spec.cacheTTL is not passed: it is deprecated and ignored.
func registryArgs(m *mirrorsv1alpha1.RegistryMirror) []string {
	args := []string{
		"--config=" + configMountPath + "/" + configFileName,
		"--retention=" + retention(m).String(),
		"--max-disk-percent=" + strconv.Itoa(int(maxDiskPercent(m))),
		"--pinned-file=" + configMountPath + "/" + pinnedImagesKey,
	}
	if len(m.Spec.WarmPlatforms) > 0 {
		// Unset: mirror-registry's default, its own node's platform.
		args = append(args, "--warm-platforms="+strings.Join(m.Spec.WarmPlatforms, ","))
	}
	return args
}

// replicaLabels adds the replica label to labels of replica i > 0's objects and pods;
// replica 0's stay as a mirror of one replica has them, so its StatefulSet (whose selector
// cannot change) and its pod are not touched when the mirror grows.
func replicaLabels(labels map[string]string, i int32) map[string]string {
	if i > 0 {
		labels[labelReplica] = strconv.Itoa(int(i))
	}
	return labels
}

// desiredStatefulSet runs registry replica i in proxy mode on its cache volume, one pod.
// configHash is the hash of the rendered config.yml; a new hash rolls the pod. Replica
// i > 0 selects its pod by the replica label too, and prefers a node without another
// registry pod of the mirror: two replicas on one node fail together.
func desiredStatefulSet(m *mirrorsv1alpha1.RegistryMirror, img Images, configHash string, i int32) *appsv1ac.StatefulSetApplyConfiguration {
	container := corev1ac.Container().
		WithName("registry").
		WithImage(img.Registry).
		WithCommand(registryBinary).
		WithArgs(registryArgs(m)...).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(RegistryPort).WithProtocol(corev1.ProtocolTCP)).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("cache").WithMountPath(cacheMountPath),
			corev1ac.VolumeMount().WithName("config").WithMountPath(configMountPath).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"),
		).
		// "/" answers 200 only while the registry's storage health check passes.
		WithReadinessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/").WithPort(intstr.FromString("http"))).
			WithPeriodSeconds(10).WithFailureThreshold(3)).
		WithLivenessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/").WithPort(intstr.FromString("http"))).
			WithInitialDelaySeconds(10).WithPeriodSeconds(20).WithFailureThreshold(6)).
		WithSecurityContext(restrictedContainerSecurity())
	volumes := []*corev1ac.VolumeApplyConfiguration{
		corev1ac.Volume().WithName("cache").WithPersistentVolumeClaim(
			corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(replicaPVCName(m, i))),
		corev1ac.Volume().WithName("config").WithConfigMap(
			corev1ac.ConfigMapVolumeSource().WithName(configMapName(m))),
		corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
		corev1ac.Volume().WithName("helper").WithEmptyDir(corev1ac.EmptyDirVolumeSource()),
	}
	container = container.WithVolumeMounts(corev1ac.VolumeMount().WithName("helper").WithMountPath(helperMountPath).WithReadOnly(true))
	if ref := m.Spec.CredentialsSecretRef; ref != nil {
		// The credential helper reads the Secret's username and password files on each
		// call; the kubelet updates them when the Secret changes. The operator never reads
		// the Secret itself.
		volumes = append(volumes, corev1ac.Volume().WithName("credentials").WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(ref.Name).WithDefaultMode(0o440).WithItems(
			corev1ac.KeyToPath().WithKey("username").WithPath("username"),
			corev1ac.KeyToPath().WithKey("password").WithPath("password"))))
		container = container.WithVolumeMounts(corev1ac.VolumeMount().WithName("credentials").WithMountPath(registrycreds.DefaultDir).WithReadOnly(true))
	}
	// The operator's own image installs the credential helper the registry runs.
	helper := corev1ac.Container().
		WithName("install-credential-helper").
		WithImage(img.NodeAgent).
		WithCommand(operatorBinary).
		WithArgs("install-credential-helper", helperMountPath).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("helper").WithMountPath(helperMountPath)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")})).
		WithSecurityContext(restrictedContainerSecurity())
	if r := m.Spec.Resources; r != nil {
		res := corev1ac.ResourceRequirements()
		if len(r.Limits) > 0 {
			res = res.WithLimits(r.Limits)
		}
		if len(r.Requests) > 0 {
			res = res.WithRequests(r.Requests)
		}
		container = container.WithResources(res)
	}

	podSpec := corev1ac.PodSpec()
	if i > 0 {
		podSpec = podSpec.WithAffinity(corev1ac.Affinity().WithPodAntiAffinity(corev1ac.PodAntiAffinity().
			WithPreferredDuringSchedulingIgnoredDuringExecution(corev1ac.WeightedPodAffinityTerm().
				WithWeight(100).
				WithPodAffinityTerm(corev1ac.PodAffinityTerm().
					WithTopologyKey(corev1.LabelHostname).
					WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(m, componentReg)))))))
	}
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
			WithContainers(container).
			WithVolumes(volumes...))

	return stampHash(appsv1ac.StatefulSet(replicaStatefulSetName(m, i), m.Namespace).
		WithLabels(replicaLabels(commonLabels(m, componentReg), i)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(1).
			WithServiceName(headlessName(m)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(replicaLabels(selectorLabels(m, componentReg), i))).
			WithTemplate(pod)))
}

// nodeAgentArgs are the node agent's command line: a relay from agentPort to the
// registry Service and, with spec.configureNodes, the hosts.toml to keep in the hostPath
// mounted at hostsMountPath.
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

// desiredDaemonSet runs the node agent on every node: a TCP relay from the node's
// 127.0.0.1:<hostPort> to the registry Service and, with spec.configureNodes, the
// writer of containerd's hosts.toml through a hostPath mount of exactly one directory.
func desiredDaemonSet(m *mirrorsv1alpha1.RegistryMirror, img Images, hostPort int32, hostsPath string, caps []string) *appsv1ac.DaemonSetApplyConfiguration {
	container := corev1ac.Container().
		WithName("node-agent").
		WithImage(img.NodeAgent).
		WithCommand(operatorBinary).
		WithArgs(append([]string{nodeagent.Subcommand}, nodeAgentArgs(m, hostPort, caps).CommandLine()...)...).
		WithPorts(
			// hostIP 127.0.0.1: the mirror is published on each node's loopback only.
			corev1ac.ContainerPort().WithName("mirror").WithContainerPort(agentPort).
				WithHostPort(hostPort).WithHostIP(nodeLoopbackIP).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName("health").WithContainerPort(agentHealthPort).WithProtocol(corev1.ProtocolTCP),
		).
		WithReadinessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/readyz").WithPort(intstr.FromString("health"))).
			WithPeriodSeconds(10)).
		WithLivenessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString("health"))).
			WithPeriodSeconds(20).WithFailureThreshold(3)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")})).
		WithSecurityContext(restrictedContainerSecurity())

	podSecurity := corev1ac.PodSecurityContext().
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	spec := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithTerminationGracePeriodSeconds(15).
		// Every node pulls images, so the agent runs on every node, tainted or not.
		WithTolerations(corev1ac.Toleration().WithOperator(corev1.TolerationOpExists))
	if m.Spec.ConfigureNodes {
		// Writing into the root-owned certs.d directory needs UID 0 — but no capability:
		// the directory's owner may write to it without CAP_DAC_OVERRIDE. The one fixed UID
		// that stays where the platform assigns UIDs (docs/SECURITY.md, Pod security).
		podSecurity = podSecurity.WithRunAsNonRoot(false).WithRunAsUser(0).WithRunAsGroup(0)
		// The node's <containerd hosts root>/<host> (containerd spells host:port with a
		// colon) appears at a fixed path in the container.
		container = container.WithVolumeMounts(corev1ac.VolumeMount().WithName("hosts-dir").WithMountPath(hostsMountPath))
		spec = spec.WithVolumes(corev1ac.Volume().WithName("hosts-dir").WithHostPath(
			corev1ac.HostPathVolumeSource().WithPath(hostsPath).WithType(corev1.HostPathDirectoryOrCreate)))
	} else {
		// The relay runs as whoever the platform assigns, else as the image's USER 65532.
		podSecurity = podSecurity.WithRunAsNonRoot(true)
	}
	spec = spec.WithSecurityContext(podSecurity).WithContainers(container)

	return stampHash(appsv1ac.DaemonSet(daemonSetName(m), m.Namespace).
		WithLabels(commonLabels(m, componentAgent)).
		WithOwnerReferences(ownerReference(m)).
		WithSpec(appsv1ac.DaemonSetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(m, componentAgent))).
			WithUpdateStrategy(appsv1ac.DaemonSetUpdateStrategy().
				WithType(appsv1.RollingUpdateDaemonSetStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDaemonSet().WithMaxUnavailable(intstr.FromInt32(1)))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(commonLabels(m, componentAgent)).
				WithSpec(spec))))
}

// hostPortOf reads the node agent's host port from a live DaemonSet (0 if none).
func hostPortOf(spec *corev1.PodSpec) int32 {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "mirror" && p.HostPort != 0 {
				return p.HostPort
			}
		}
	}
	return 0
}
