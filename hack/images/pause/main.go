// Command pause is the sandbox ("pause") container of the real-node cluster: the image
// registry.k8s.io/pause:3.10 that make images builds (hack/images) and containerd's
// sandbox_image points at. It holds the pod's namespaces open and does nothing else: it blocks
// until SIGTERM or SIGINT and then exits 0. Unlike the upstream C pause it does not reap
// zombies (pods here do not share their process namespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (quartet, Go) 3.10\n")
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
