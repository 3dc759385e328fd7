package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// A real node's daemons, the API server included, live in a network namespace of their
// own, so that nothing they do can reach beyond the machine. The host reaches the API
// server through a forwarder, as kind maps its API server port to the host's loopback:
// a listener on the host's 127.0.0.1 whose connections are dialled from inside the
// namespace.

// dialInNetns opens a TCP connection to addr from inside the network namespace bound at
// nsPath (the socket keeps that namespace after the thread switches back).
func dialInNetns(ctx context.Context, nsPath, addr string) (net.Conn, error) {
	var conn net.Conn
	err := ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		conn = c
		return err
	})
	return conn, err
}

// forward copies every connection accepted on ln to a connection dial opens, both ways,
// until ctx ends.
func forward(ctx context.Context, ln net.Listener, dial func(context.Context) (net.Conn, error)) {
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go func() {
			defer in.Close()
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			out, err := dial(dctx)
			cancel()
			if err != nil {
				return
			}
			defer out.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			go pipe(out, in)
			go pipe(in, out)
			wg.Wait()
		}()
	}
}

// ForwardCommand is the first argument that makes a program built on this package act
// as a detached forwarder (see RunForwarderIfAsked).
const ForwardCommand = "__quartet-forward"

// RunForwarderIfAsked turns the running program into a forwarder when its arguments are
// `ForwardCommand <netns path> <host listen address> <address inside the namespace>`:
// it forwards until SIGTERM and then exits. A program that starts a detached real-node
// cluster (hack/cluster) calls it first thing in main.
func RunForwarderIfAsked() {
	if len(os.Args) != 5 || os.Args[1] != ForwardCommand {
		return
	}
	nsPath, listen, target := os.Args[2], os.Args[3], os.Args[4]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		os.Exit(1)
	}
	fmt.Printf("forward: %s -> %s in %s\n", ln.Addr(), target, nsPath)
	forward(ctx, ln, func(ctx context.Context) (net.Conn, error) { return dialInNetns(ctx, nsPath, target) })
	os.Exit(0)
}
