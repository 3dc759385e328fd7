package realnode

import (
	"context"
	"fmt"
	"sort"
	"strings"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodProblem is a container that is not running as it should.
type PodProblem struct {
	Pod, Container, Reason, Message string
	Restarts                        int32
	// Hopeless says waiting cannot help: the image cannot be pulled, or the container
	// keeps crashing.
	Hopeless bool
	// Logs are the container's last lines (of its previous run when it restarted).
	Logs string
}

func (p PodProblem) String() string {
	s := fmt.Sprintf("pod %s container %s: %s", p.Pod, p.Container, p.Reason)
	if p.Message != "" {
		s += " (" + p.Message + ")"
	}
	if p.Restarts > 0 {
		s += fmt.Sprintf(", %d restarts", p.Restarts)
	}
	if p.Logs != "" {
		s += "; last log lines:\n    " + strings.ReplaceAll(strings.TrimSpace(p.Logs), "\n", "\n    ")
	}
	return s
}

// FindPodProblems lists the containers of ns's pods that wait with a reason or exited with
// an error, with their last log lines.
func (e *Env) FindPodProblems(ctx context.Context, ns string) []PodProblem {
	pods := &corev1.PodList{}
	if err := e.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
		return []PodProblem{{Pod: ns + "/*", Reason: "cannot list pods: " + err.Error()}}
	}
	var out []PodProblem
	for _, pod := range pods.Items {
		statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
		for _, st := range statuses {
			p := PodProblem{Pod: pod.Namespace + "/" + pod.Name, Container: st.Name, Restarts: st.RestartCount}
			switch {
			case st.State.Waiting != nil && st.State.Waiting.Reason != "" && st.State.Waiting.Reason != "PodInitializing" && st.State.Waiting.Reason != "ContainerCreating":
				p.Reason, p.Message = st.State.Waiting.Reason, st.State.Waiting.Message
				switch p.Reason {
				case "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
					p.Hopeless = true
				case "ErrImagePull":
					p.Hopeless = strings.Contains(p.Message, "not found") || strings.Contains(p.Message, "manifest unknown")
				case "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
					p.Hopeless = st.RestartCount >= 2 || p.Reason != "CrashLoopBackOff"
				}
				if last := st.LastTerminationState.Terminated; last != nil {
					p.Message = strings.TrimSpace(fmt.Sprintf("%s; last run: exit %d %s %s", p.Message, last.ExitCode, last.Reason, last.Message))
				}
			case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
				p.Reason = fmt.Sprintf("exited %d (%s)", st.State.Terminated.ExitCode, st.State.Terminated.Reason)
				p.Message = st.State.Terminated.Message
			default:
				continue
			}
			if p.Restarts > 0 || p.Reason == "CrashLoopBackOff" || strings.HasPrefix(p.Reason, "exited") {
				p.Logs = e.containerLogs(ctx, pod.Namespace, pod.Name, st.Name, st.RestartCount > 0 && st.State.Terminated == nil)
			}
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pod+out[i].Container < out[j].Pod+out[j].Container })
	return out
}

func (e *Env) containerLogs(ctx context.Context, ns, pod, container string, previous bool) string {
	b, err := e.Clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, Previous: previous, TailLines: ptr.To[int64](15),
	}).DoRaw(ctx)
	if err != nil {
		return "(logs unavailable: " + err.Error() + ")"
	}
	return string(b)
}

// PodProblems is FindPodProblems as one line per problem ("" when none).
func (e *Env) PodProblems(ctx context.Context, ns string) string {
	var lines []string
	for _, p := range e.FindPodProblems(ctx, ns) {
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

func hopelessProblems(ps []PodProblem) []PodProblem {
	var out []PodProblem
	for _, p := range ps {
		if p.Hopeless {
			out = append(out, p)
		}
	}
	return out
}

// DiagnoseInstall says where an OLM install in ns stands and what blocks it: the
// Subscription's conditions, its InstallPlans, the CSVs, OLM's bundle unpack Jobs and
// their pods, and the pods of ns.
func (e *Env) DiagnoseInstall(ctx context.Context, ns string) string {
	var b strings.Builder
	subs := &operatorsv1alpha1.SubscriptionList{}
	if err := e.Client.List(ctx, subs, client.InNamespace(ns)); err == nil {
		for _, s := range subs.Items {
			fmt.Fprintf(&b, "Subscription %s: state %q, currentCSV %q, installedCSV %q\n", s.Name, s.Status.State, s.Status.CurrentCSV, s.Status.InstalledCSV)
			for _, c := range s.Status.Conditions {
				if c.Status == corev1.ConditionTrue {
					fmt.Fprintf(&b, "  condition %s: %s: %s\n", c.Type, c.Reason, c.Message)
				}
			}
		}
	}
	plans := &operatorsv1alpha1.InstallPlanList{}
	if err := e.Client.List(ctx, plans, client.InNamespace(ns)); err == nil {
		for _, p := range plans.Items {
			fmt.Fprintf(&b, "InstallPlan %s %v: %s\n", p.Name, p.Spec.ClusterServiceVersionNames, p.Status.Phase)
			for _, c := range p.Status.Conditions {
				if c.Status == corev1.ConditionFalse || p.Status.Phase == operatorsv1alpha1.InstallPlanPhaseFailed {
					fmt.Fprintf(&b, "  condition %s=%s: %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
				}
			}
			for _, ref := range p.Status.BundleLookups {
				for _, c := range ref.Conditions {
					if c.Status == corev1.ConditionTrue {
						fmt.Fprintf(&b, "  bundle %s: %s: %s: %s\n", ref.Path, c.Type, c.Reason, c.Message)
					}
				}
			}
		}
	}
	csvs := &operatorsv1alpha1.ClusterServiceVersionList{}
	if err := e.Client.List(ctx, csvs, client.InNamespace(ns)); err == nil {
		for _, c := range csvs.Items {
			fmt.Fprintf(&b, "CSV %s: %s %s: %s\n", c.Name, c.Status.Phase, c.Status.Reason, c.Status.Message)
			for _, r := range c.Status.RequirementStatus {
				if r.Status != operatorsv1alpha1.RequirementStatusReasonPresent {
					fmt.Fprintf(&b, "  requirement %s %s: %s %s\n", r.Kind, r.Name, r.Status, r.Message)
				}
				for _, d := range r.Dependents {
					if d.Status != operatorsv1alpha1.DependentStatusReasonSatisfied {
						fmt.Fprintf(&b, "  requirement %s %s needs %s %s: %s\n", r.Kind, r.Name, d.Kind, d.Message, d.Status)
					}
				}
			}
		}
	}
	jobs := &batchv1.JobList{}
	if err := e.Client.List(ctx, jobs, client.InNamespace(OLMNamespace), client.HasLabels{"operatorframework.io/bundle-unpack-ref"}); err == nil {
		for _, j := range jobs.Items {
			var conds []string
			for _, c := range j.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Message))
			}
			fmt.Fprintf(&b, "bundle unpack Job %s/%s: active %d, succeeded %d, failed %d %s\n", j.Namespace, j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed, strings.Join(conds, ", "))
		}
	}
	for _, n := range []string{OLMNamespace, ns} {
		if p := e.PodProblems(ctx, n); p != "" {
			b.WriteString(p + "\n")
		}
	}
	return strings.TrimSpace(b.String())
}
