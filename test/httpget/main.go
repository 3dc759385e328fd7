// Command httpget is the HTTP client of the e2e test image (quay.io/quartet-operator/e2e:dev),
// because Debian's static busybox wget crashes on every request: it prints the response's
// status code on the first line and its body after it, and exits 0 whatever the status
// (2 when no response came). Tests read what a pod sees, for example the manager's
// metrics endpoint with and without a ServiceAccount token:
//
//	httpget -k -bearer-file /var/run/secrets/kubernetes.io/serviceaccount/token https://svc:8443/metrics
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	insecure := flag.Bool("k", false, "Do not verify the server's certificate.")
	bearerFile := flag.String("bearer-file", "", "Send the token in this file as Authorization: Bearer.")
	timeout := flag.Duration("timeout", 10*time.Second, "Time limit of the request.")
	maxBody := flag.Int64("max-body", 1<<20, "Bytes of the body to print at most.")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: httpget [-k] [-bearer-file F] [-timeout D] URL")
		os.Exit(2)
	}
	req, err := http.NewRequest(http.MethodGet, flag.Arg(0), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpget:", err)
		os.Exit(2)
	}
	if *bearerFile != "" {
		tok, err := os.ReadFile(*bearerFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "httpget:", err)
			os.Exit(2)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: *insecure}, //nolint:gosec // -k, for self-signed test endpoints
	}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode)
	_, _ = io.Copy(os.Stdout, io.LimitReader(resp.Body, *maxBody))
}
