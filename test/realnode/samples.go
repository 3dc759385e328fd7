package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	blackadderv1beta1 "github.com/quartet-operator/quartet/api/blackadder/v1beta1"
	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
	mirrorsv1alpha1 "github.com/quartet-operator/quartet/api/mirrors/v1alpha1"
	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// E2EImage is the test-support image (busybox applets, fakerates, httpget).
const E2EImage = "quay.io/quartet-operator/e2e:dev"

// StartFakeRates runs the imitation exchange-rate upstream (ECB and Frankfurter formats)
// as a pod behind a Service in ns and returns its base URL inside the cluster.
func (e *Env) StartFakeRates(ctx context.Context, ns string) (string, error) {
	return e.startFakeRates(ctx, ns, "fakerates", "")
}

// StartFakeRatesTLS is StartFakeRates over HTTPS, with tls.crt and tls.key of the Secret
// tlsSecret in ns (a certificate for fakerates-tls.<ns>.svc.cluster.local).
func (e *Env) StartFakeRatesTLS(ctx context.Context, ns, tlsSecret string) (string, error) {
	return e.startFakeRates(ctx, ns, "fakerates-tls", tlsSecret)
}

func (e *Env) startFakeRates(ctx context.Context, ns, name, tlsSecret string) (string, error) {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	labels := map[string]string{"app": name}
	args := []string{"/bin/fakerates", "-addr=:8089"}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	scheme := "http"
	if tlsSecret != "" {
		scheme = "https"
		args = append(args, "-tls-cert=/tls/tls.crt", "-tls-key=/tls/tls.key")
		volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tlsSecret}}}}
		mounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}}
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Volumes: volumes, Containers: []corev1.Container{{
					Name: "fakerates", Image: E2EImage, Command: args, VolumeMounts: mounts,
					Ports:          []corev1.ContainerPort{{ContainerPort: 8089}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8089)}}, PeriodSeconds: 1},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 8089, TargetPort: intstr.FromInt32(8089)}}},
	}
	for _, o := range []client.Object{dep, svc} {
		if err := e.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	if err := e.WaitDeploymentAvailable(ctx, ns, name, 2*time.Minute); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s://%s.%s.svc.cluster.local:8089", scheme, name, ns), nil
}

// Sample reads one of config/samples (the manifests users apply) into an object of the
// given type, in namespace ns when it is namespaced.
func (e *Env) Sample(file string, into client.Object, ns string) error {
	b, err := os.ReadFile(filepath.Join(e.Root, "config", "samples", file))
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("config/samples/%s: %w", file, err)
	}
	if ns != "" {
		into.SetNamespace(ns)
	}
	return nil
}

// UnstructuredSample reads a sample as written, whatever its version.
func (e *Env) UnstructuredSample(file string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(filepath.Join(e.Root, "config", "samples", file))
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, yaml.Unmarshal(b, &u.Object)
}

// conditionTrue reports whether the condition is True for the current generation.
func conditionTrue(conds []metav1.Condition, t string, generation int64) (bool, string) {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return false, t + " not set"
	}
	return c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation, fmt.Sprintf("%s=%s %s: %s", t, c.Status, c.Reason, c.Message)
}

// WaitExchangeRate waits until the ExchangeRate is Ready and its ConfigMap holds a rate,
// and returns the rate.
func (e *Env) WaitExchangeRate(ctx context.Context, ns, name string, timeout time.Duration) (string, error) {
	var rate string
	err := WaitFor(ctx, "ExchangeRate "+ns+"/"+name+" Ready with a rate", timeout, func(ctx context.Context) (bool, string, error) {
		er := &operatorsv1.ExchangeRate{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, er); err != nil {
			return false, "", err
		}
		ok, detail := conditionTrue(er.Status.Conditions, "Ready", er.Generation)
		if !ok {
			return false, detail, nil
		}
		cm := &corev1.ConfigMap{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return false, detail, err
		}
		rate = cm.Data["rate"]
		return rate != "", detail + "; ConfigMap data " + fmt.Sprint(cm.Data), nil
	})
	return rate, err
}

// WaitCopies waits until every target namespace holds a copy of the ConfigMap source
// made by the CopyratorRule rule.
func (e *Env) WaitCopies(ctx context.Context, rule *flantv1.CopyratorRule, source string, targets []string, timeout time.Duration) error {
	return WaitFor(ctx, fmt.Sprintf("copies of %s/%s in %v", rule.Namespace, source, targets), timeout, func(ctx context.Context) (bool, string, error) {
		var missing []string
		for _, ns := range targets {
			cm := &corev1.ConfigMap{}
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: source}, cm); err != nil {
				missing = append(missing, ns)
				continue
			}
			if cm.Labels["copyrator.flant.com/rule"] != rule.Name {
				missing = append(missing, ns+" (not a copy)")
			}
		}
		r := &flantv1.CopyratorRule{}
		_ = e.Client.Get(ctx, client.ObjectKeyFromObject(rule), r)
		return len(missing) == 0, fmt.Sprintf("missing in %v; rule status %+v", missing, r.Status.Conditions), nil
	})
}

// WaitMirrorReady waits until the RegistryMirror is Ready: its registry StatefulSet and its
// node agents run for real.
func (e *Env) WaitMirrorReady(ctx context.Context, ns, name string, timeout time.Duration) error {
	return WaitFor(ctx, "RegistryMirror "+ns+"/"+name+" Ready", timeout, func(ctx context.Context) (bool, string, error) {
		m := &mirrorsv1alpha1.RegistryMirror{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return false, "", err
		}
		if h := hopelessProblems(e.FindPodProblems(ctx, ns)); len(h) > 0 {
			return false, "", Failed{Reason: fmt.Sprint(h)}
		}
		ok, detail := conditionTrue(m.Status.Conditions, "Ready", m.Generation)
		return ok && m.Status.ReadyReplicas == 1 && m.Status.NodesReady == m.Status.NodesDesired && m.Status.NodesDesired > 0,
			fmt.Sprintf("%s; registry %d ready, nodes %d/%d; pods: %s", detail, m.Status.ReadyReplicas, m.Status.NodesReady, m.Status.NodesDesired, e.PodProblems(ctx, ns)), nil
	})
}

// WaitMirrorOfflineUpstream waits until a RegistryMirror whose upstream cannot be reached
// from this offline machine (the sample's Docker Hub) runs for real — its registry and node
// agents ready, the registry answering through its Service — and says why it is not Ready:
// Ready=False, UpstreamNeverReached, UpstreamReachable=False, NeverReached.
func (e *Env) WaitMirrorOfflineUpstream(ctx context.Context, ns, name string, timeout time.Duration) error {
	return WaitFor(ctx, "RegistryMirror "+ns+"/"+name+" running, its upstream never reached", timeout, func(ctx context.Context) (bool, string, error) {
		m := &mirrorsv1alpha1.RegistryMirror{}
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return false, "", err
		}
		if h := hopelessProblems(e.FindPodProblems(ctx, ns)); len(h) > 0 {
			return false, "", Failed{Reason: fmt.Sprint(h)}
		}
		ready := meta.FindStatusCondition(m.Status.Conditions, "Ready")
		up := meta.FindStatusCondition(m.Status.Conditions, "UpstreamReachable")
		ok := ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == "UpstreamNeverReached" &&
			ready.ObservedGeneration == m.Generation && up != nil && up.Reason == "NeverReached" &&
			m.Status.ReadyReplicas == 1 && m.Status.NodesReady == m.Status.NodesDesired && m.Status.NodesDesired > 0
		return ok, fmt.Sprintf("Ready %+v; UpstreamReachable %+v; registry %d ready, nodes %d/%d", ready, up,
			m.Status.ReadyReplicas, m.Status.NodesReady, m.Status.NodesDesired), nil
	})
}

// WaitChaosRounds waits until the ChaosAgent has run at least n rounds and returns it.
func (e *Env) WaitChaosRounds(ctx context.Context, name string, n int64, timeout time.Duration) (*blackadderv1beta1.ChaosAgent, error) {
	a := &blackadderv1beta1.ChaosAgent{}
	err := WaitFor(ctx, fmt.Sprintf("ChaosAgent %s: %d rounds", name, n), timeout, func(ctx context.Context) (bool, string, error) {
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, a); err != nil {
			return false, "", err
		}
		return a.Status.Rounds >= n, fmt.Sprintf("rounds %d, conditions %+v", a.Status.Rounds, a.Status.Conditions), nil
	})
	return a, err
}
