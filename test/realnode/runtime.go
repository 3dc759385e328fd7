package realnode

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ContainerPID returns the host PID of a running container's main process, as containerd
// knows it (`ctr task ls` on the node's containerd).
func (e *Env) ContainerPID(ctx context.Context, pod *corev1.Pod, container string) (int, error) {
	var id string
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container {
			id = strings.TrimPrefix(st.ContainerID, "containerd://")
		}
	}
	if id == "" {
		return 0, fmt.Errorf("pod %s/%s has no running container %s", pod.Namespace, pod.Name, container)
	}
	out, err := e.Cluster.NodeCommand(ctx, "ctr", "--address", e.Cluster.Node.ContainerdSocket, "--namespace", "k8s.io", "task", "ls").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ctr task ls: %v: %s", err, out)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == id {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("container %s not among containerd's tasks:\n%s", id, out)
}

// ProcessSecurity is what the kernel says about a running process.
type ProcessSecurity struct {
	UID, GID       string // effective IDs
	CapEff         string // effective capability mask (hex)
	Seccomp        string // 2 = filter mode
	NoNewPrivs     string
	RootReadOnly   bool // the container's / is mounted read-only
	RootMountEntry string
}

// InspectProcess reads /proc/<pid>/status and mountinfo from the host.
func InspectProcess(pid int) (ProcessSecurity, error) {
	var s ProcessSecurity
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		switch k {
		case "Uid":
			s.UID = fields[1]
		case "Gid":
			s.GID = fields[1]
		case "CapEff":
			s.CapEff = fields[0]
		case "Seccomp":
			s.Seccomp = fields[0]
		case "NoNewPrivs":
			s.NoNewPrivs = fields[0]
		}
	}
	mi, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			s.RootMountEntry = line
			s.RootReadOnly = strings.HasPrefix(f[5], "ro,") || f[5] == "ro"
		}
	}
	return s, nil
}

// RunPod runs a one-shot pod (the e2e image, restricted security context) with the
// given ServiceAccount and shell script, waits until it ends and returns its log.
func (e *Env) RunPod(ctx context.Context, ns, name, serviceAccount, script string) (string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:      corev1.RestartPolicyNever,
			ServiceAccountName: serviceAccount,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "main", Image: E2EImage, Command: []string{"sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := e.Client.Create(ctx, pod); err != nil {
		return "", err
	}
	defer func() { _ = e.Client.Delete(context.Background(), pod) }()
	var phase corev1.PodPhase
	if err := WaitFor(ctx, "pod "+ns+"/"+name+" done", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		p, err := e.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, string(phase), nil
	}); err != nil {
		return "", err
	}
	logs, err := e.Clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "", err
	}
	if phase != corev1.PodSucceeded {
		return string(logs), fmt.Errorf("pod %s/%s %s:\n%s", ns, name, phase, logs)
	}
	return string(logs), nil
}
