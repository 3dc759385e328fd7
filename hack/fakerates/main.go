// Command fakerates serves IMITATION exchange rates on a local port, in the formats of the
// ECB (/stats/eurofxref/eurofxref-daily.xml) and Frankfurter (/v1/latest, /v2/rates), so a
// cluster without internet (the demo cluster) can run ExchangeRates:
//
//	go run ./hack/fakerates -addr 127.0.0.1:8089
//	manager --exchangerate-url=http://127.0.0.1:8089 --exchangerate-frankfurter-url=http://127.0.0.1:8089
//
// The rates are made up and dated the last weekday; do not use them for anything real.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/quartet-operator/quartet/test/fakeupstream"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "Address to listen on (port 0 picks a free one).")
	date := flag.String("date", "", "Publication date to serve (YYYY-MM-DD; default the last weekday, UTC, as the ECB publishes on working days).")
	tlsCert := flag.String("tls-cert", "", "Serve HTTPS with this certificate (PEM; with -tls-key).")
	tlsKey := flag.String("tls-key", "", "Private key of -tls-cert (PEM).")
	override := flag.String("rates", "", "Rates to serve instead of the defaults, per 1 EUR (USD=1.2,GBP=0.9); the other currencies keep theirs.")
	flag.Parse()
	rates := fakeupstream.DefaultRates()
	for _, kv := range strings.Split(*override, ",") {
		if cur, v, ok := strings.Cut(kv, "="); ok {
			rates[strings.TrimSpace(cur)] = strings.TrimSpace(v)
		} else if strings.TrimSpace(kv) != "" {
			fmt.Fprintf(os.Stderr, "fakerates: -rates: %q is not CUR=VALUE\n", kv)
			os.Exit(2)
		}
	}
	if *date == "" {
		*date = lastWeekday(time.Now().UTC()).Format("2006-01-02")
	}
	var srv *fakeupstream.Server
	var err error
	if *tlsCert != "" || *tlsKey != "" {
		srv, err = fakeupstream.StartTLS(*addr, *date, rates, *tlsCert, *tlsKey)
	} else {
		srv, err = fakeupstream.Start(*addr, *date, rates)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakerates:", err)
		os.Exit(1)
	}
	fmt.Printf("fakerates: serving IMITATION exchange rates (not real, dated %s) at %s\n", *date, srv.URL())
	fmt.Printf("fakerates:   ECB format:         %s%s\n", srv.URL(), fakeupstream.ECBPath)
	fmt.Printf("fakerates:   Frankfurter format: %s%s?base=EUR\n", srv.URL(), fakeupstream.FrankfurterPath)
	fmt.Printf("fakerates:   Frankfurter v2:     %s%s?base=EUR\n", srv.URL(), fakeupstream.FrankfurterV2Path)
	fmt.Printf("fakerates: run the manager with --exchangerate-url=%s --exchangerate-frankfurter-url=%s\n", srv.URL(), srv.URL())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	_ = srv.Close()
}

func lastWeekday(t time.Time) time.Time {
	for t.Weekday() == time.Saturday || t.Weekday() == time.Sunday {
		t = t.AddDate(0, 0, -1)
	}
	return t
}
