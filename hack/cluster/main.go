// Command cluster starts and stops the local development cluster behind `make cluster-up`
// and `make cluster-down`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and either kwok with fake nodes (-node kwok) or one real node (-node real: kubelet,
// kube-proxy, containerd in a network namespace of its own; needs root), detached from
// the shell. `down` stops it and restores everything a real node changed on the host,
// also when an earlier run was killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quartet-operator/quartet/test/localcluster"
)

func main() {
	// A detached real node's API server forwarder is this program run again.
	localcluster.RunForwarderIfAsked()
	dir := flag.String("dir", "", "cluster folder (default <repo>/bin/dev-cluster)")
	nodes := flag.Int("nodes", 1, "number of fake nodes")
	node := flag.String("node", localcluster.NodeKwok, "node kind: kwok (fake nodes) or real (kubelet + containerd; root)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: cluster [-dir D] [-node kwok|real] [-nodes N] up|down|status\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *dir, *node, *nodes); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(cmd, dir, node string, nodes int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if dir == "" {
		root, err := localcluster.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "bin", "dev-cluster")
	}
	dir, _ = filepath.Abs(dir)
	existing, loadErr := localcluster.LoadState(dir)
	switch cmd {
	case "up":
		if loadErr == nil {
			if existing.Alive(ctx) {
				fmt.Printf("cluster: already running at %s; kubeconfig %s\n", existing.APIServerURL, existing.Kubeconfig)
				return nil
			}
			fmt.Println("cluster: found a stale cluster; stopping what is left of it")
			_ = existing.Stop()
		}
		binDir, kwokDir, err := localcluster.DefaultBinDirs()
		if err != nil {
			return err
		}
		c, err := localcluster.Start(ctx, localcluster.Options{
			Dir: dir, BinDir: binDir, KwokDir: kwokDir, Full: true, Node: node, Nodes: nodes, Detach: true,
			Log: func(f string, a ...any) { fmt.Printf(f+"\n", a...) },
		})
		if err != nil {
			return err
		}
		for _, p := range c.Processes {
			fmt.Printf("cluster: started %-24s pid %-7d log %s\n", p.Name, p.PID, p.Log)
		}
		fmt.Printf("cluster: up at %s\ncluster: export KUBECONFIG=%s\n", c.APIServerURL, c.Kubeconfig)
		return nil
	case "down":
		if loadErr != nil {
			// A real node whose start was killed has no state.json; its host changes are
			// still undone.
			if err := localcluster.CleanupStaleRealNodes(func(f string, a ...any) { fmt.Printf(f+"\n", a...) }); err != nil {
				return err
			}
			fmt.Println("cluster: nothing to stop (no state.json in " + dir + ")")
			return nil
		}
		for i := len(existing.Processes) - 1; i >= 0; i-- {
			fmt.Printf("cluster: stopping %s (pid %d)\n", existing.Processes[i].Name, existing.Processes[i].PID)
		}
		if err := existing.Stop(); err != nil {
			return err
		}
		_ = os.RemoveAll(filepath.Join(dir, "etcd"))
		if existing.Node != nil {
			fmt.Println("cluster: down; no component left running; host kernel settings, mounts, cgroups and paths restored")
			return nil
		}
		fmt.Println("cluster: down; no component left running")
		return nil
	case "status":
		if loadErr != nil {
			fmt.Println("cluster: not running")
			return nil
		}
		fmt.Printf("cluster: %s alive=%v kubeconfig %s\n", existing.APIServerURL, existing.Alive(ctx), existing.Kubeconfig)
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}
