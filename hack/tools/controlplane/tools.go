//go:build tools

// Package tools pins the control-plane binaries that the tests and the local
// cluster run: kube-apiserver, kube-controller-manager, kube-scheduler and etcd,
// and the real node's kubelet and kube-proxy, all built from the Go module proxy (see ../../../Makefile, target controlplane).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
