// Command hostpath-provisioner gives the real-node local cluster dynamic storage, as kind
// does with local-path-provisioner (which the Go module proxy does not serve): a
// PersistentVolumeClaim of the StorageClass it serves gets a hostPath PersistentVolume
// backed by a fresh folder under -dir on the node, writable by any UID (as
// local-path-provisioner makes them, since hostPath volumes get no fsGroup ownership),
// removed again when the volume is released. The controller logic (claims, retries,
// leader-free single instance) is sigs.k8s.io/sig-storage-lib-external-provisioner's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v10/controller"
)

type hostPath struct{ dir string }

func (h hostPath) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	path := filepath.Join(h.dir, o.PVName)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// MkdirAll honours the umask; the volume must be writable by the pod's UID.
	if err := os.Chmod(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: *o.StorageClass.ReclaimPolicy,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path},
			},
		},
	}
	if o.SelectedNode != nil {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{o.SelectedNode.Labels[corev1.LabelHostname]},
			}}}},
		}}
	}
	klog.InfoS("Provisioned volume", "pv", o.PVName, "claim", klog.KObj(o.PVC), "path", path)
	return pv, controller.ProvisioningFinished, nil
}

func (h hostPath) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return errors.New("not a hostPath volume")
	}
	path := filepath.Clean(pv.Spec.HostPath.Path)
	if !strings.HasPrefix(path, filepath.Clean(h.dir)+"/") {
		return fmt.Errorf("refusing to delete %s: not under %s", path, h.dir)
	}
	klog.InfoS("Deleted volume", "pv", pv.Name, "path", path)
	return os.RemoveAll(path)
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	dir := flag.String("dir", "", "folder the volumes are created in")
	name := flag.String("name", "quartet.dev/hostpath", "provisioner name StorageClasses refer to")
	klog.InitFlags(nil)
	flag.Parse()
	if *dir == "" {
		klog.Fatal("-dir is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pc := controller.NewProvisionController(klog.Background(), cs, *name, hostPath{dir: *dir}, controller.LeaderElection(false))
	pc.Run(ctx)
}
