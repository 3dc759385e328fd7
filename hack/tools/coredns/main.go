// Command coredns is CoreDNS v1.12.4 with only the plugins a cluster's DNS needs
// (kubernetes, cache, errors, health, ready, log, loop, reload, loadbalance), built from
// the Go module proxy for the real node's cluster DNS (test/localcluster). It has no
// forward plugin: names outside the cluster do not resolve, so nothing leaves the machine.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
