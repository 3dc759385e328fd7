package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// mayStayEmpty names the dashboard queries ("file: panel [legend]") that the run's workload
// legitimately leaves without a series, and why.
var mayStayEmpty = map[string]string{
	"quartet-copyratorrule.json: Look-alikes and orphans [look-alikes]": "no test labels an object as a copy by hand: the counter has no series until a look-alike shows up",
}

// grafanaVar is a Grafana variable in a query: $name, ${name}, $__rate_interval.
var grafanaVar = regexp.MustCompile(`\$\{?([A-Za-z_]+)\}?`)

// checkDashboards runs every query of config/grafana's dashboards, as Grafana would with
// every variable at All and $__rate_interval at 1m (four times Prometheus's 2 s scrape and
// more), over the whole run in the package's Prometheus, and returns an error naming each
// query without a series (but those of mayStayEmpty).
func checkDashboards(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(env.Root, "config", "grafana", "*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no dashboards in config/grafana: %v", err)
	}
	var empty, lines []string
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr   string `json:"expr"`
					Legend string `json:"legendFormat"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				key := fmt.Sprintf("%s: %s [%s]", filepath.Base(f), p.Title, tg.Legend)
				expr := grafanaVar.ReplaceAllStringFunc(tg.Expr, func(v string) string {
					if strings.Contains(v, "__rate_interval") {
						return "1m"
					}
					return ".+"
				})
				series, err := seriesOver(ctx, expr, prom.since, time.Now())
				if err != nil {
					return fmt.Errorf("%s: %s: %w", key, expr, err)
				}
				n++
				why, allowed := mayStayEmpty[key]
				switch {
				case series > 0:
					lines = append(lines, fmt.Sprintf("%4d series  %s", series, key))
				case allowed:
					lines = append(lines, fmt.Sprintf("   0 series  %s (may stay empty: %s)", key, why))
				default:
					empty = append(empty, key+": "+expr)
				}
			}
		}
	}
	sort.Strings(lines)
	fmt.Printf("dashboards: %d queries over the run (%s):\n  %s\n", n, time.Since(prom.since).Round(time.Second), strings.Join(lines, "\n  "))
	if len(empty) > 0 {
		return fmt.Errorf("dashboard queries without a series after the run:\n  %s", strings.Join(empty, "\n  "))
	}
	return nil
}

// seriesOver returns how many series expr has between start and end (a range query, as
// a dashboard's time range runs it).
func seriesOver(ctx context.Context, expr string, start, end time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}, "step": {"15"}}
	var out struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := promGet(prom.client, "/api/v1/query_range?"+q.Encode(), &out); err != nil {
		return 0, err
	}
	return len(out.Data.Result), nil
}
