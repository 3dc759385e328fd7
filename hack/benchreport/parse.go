package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// parse reads the output of go test -bench with benchfmt: a result per benchmark, in the
// order they first ran, each metric the median of the benchmark's rounds when it ran more
// than once (go test -count); the CPU go test named; and the lines that say a test failed.
func parse(in io.Reader, fileName string) (results []result, cpu string, failed []string, err error) {
	text, failed, err := joinFigures(in)
	if err != nil {
		return nil, "", nil, err
	}
	index := map[[2]string]int{}      // package and name → position in results
	var values []map[string][]float64 // per result: unit → a value per round that reported it
	r := benchfmt.NewReader(bytes.NewReader(text), fileName)
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			// A line go test would not write: left out.
			fmt.Fprintln(os.Stderr, "benchreport: skipped:", rec)
		case *benchfmt.Result:
			cpu = rec.GetConfig("cpu")
			k := [2]string{rec.GetConfig("pkg"), benchName(rec.Name)}
			i, ok := index[k]
			if !ok {
				i, index[k] = len(results), len(results)
				results = append(results, result{Pkg: k[0], Name: k[1]})
				values = append(values, map[string][]float64{})
			}
			results[i].Rounds++
			for _, v := range rec.Values {
				// benchfmt tidies units (ns/op to sec/op, MB-rss to B-rss); the report keeps go
				// test's own, in the order go test printed them.
				unit, value := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, value = v.OrigUnit, v.OrigValue
				}
				if _, seen := values[i][unit]; !seen {
					results[i].Metrics = append(results[i].Metrics, [2]string{"", unit})
				}
				values[i][unit] = append(values[i][unit], value)
			}
		}
	}
	for i, res := range results {
		for j, m := range res.Metrics {
			res.Metrics[j][0] = summarize(m[1], values[i][m[1]], res.Rounds)
		}
	}
	return results, cpu, failed, r.Err()
}

// joinFigures returns go test's output as benchfmt should read it, and the lines that say a
// benchmark or a package failed. It mends two things benchfmt does not: a benchmark that
// writes to stdout or stderr while it runs splits its line, because go test prints the
// name before it runs the benchmark and the figures after ("BenchmarkX-2 \t<log>...\n
// <log>\n       1\t<ns> ns/op\t..."), so the figures are joined to the name again; and a
// line longer than benchfmt's scanner takes (64 KiB, log output) is left out, where it
// would stop benchfmt's reading.
func joinFigures(in io.Reader) (text []byte, failed []string, err error) {
	var (
		out     bytes.Buffer
		pending string // a benchmark whose figures have not been seen yet
	)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "--- FAIL: Benchmark"), strings.HasPrefix(line, "FAIL\t"):
			failed = append(failed, line)
		case strings.HasPrefix(line, "Benchmark"):
			pending = ""
			if !isFigures(fields[1:]) {
				pending = fields[0]
				continue
			}
		case pending != "" && isFigures(fields):
			line, pending = pending+"\t"+line, ""
		}
		if len(line) < bufio.MaxScanTokenSize {
			out.WriteString(line)
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), failed, sc.Err()
}

// isFigures tells the figures go test prints after a benchmark's name: the number of
// iterations, then the time per iteration first of the value-unit pairs.
func isFigures(fields []string) bool {
	if len(fields) < 3 || fields[2] != "ns/op" {
		return false
	}
	_, err := strconv.Atoi(fields[0])
	return err == nil
}

// benchName is a benchmark's name as go test prints it, without the -GOMAXPROCS suffix.
func benchName(n benchfmt.Name) string {
	base, parts := n.Parts()
	parts = slices.DeleteFunc(parts, func(p []byte) bool { return p[0] == '-' })
	return "Benchmark" + string(base) + string(bytes.Join(parts, nil))
}

// summarize prints one metric of a benchmark: its value as go test printed it when the
// benchmark ran once; otherwise the median of its rounds ± their spread, the 95% confidence
// interval as benchstat shows it when there are rounds enough for one, else the farthest a
// round lies from the median.
func summarize(unit string, values []float64, rounds int) string {
	if rounds == 1 && len(values) == 1 {
		return formatMetric(unit, values[0])
	}
	s := benchmath.NewSample(slices.Clone(values), &benchmath.DefaultThresholds)
	sum := benchmath.AssumeNothing.Summary(s, 0.95)
	if math.IsInf(sum.Lo, 0) || math.IsInf(sum.Hi, 0) {
		sum.Lo, sum.Hi = s.Values[0], s.Values[len(s.Values)-1]
	}
	cell := formatMetric(unit, sum.Center) + " ± " + sum.PctRangeString()
	if len(values) < rounds {
		cell += fmt.Sprintf(" (%d of %d rounds)", len(values), rounds)
	}
	return cell
}

// formatMetric prints v as go test prints a metric of that unit (testing.BenchmarkResult's
// String and MemString).
func formatMetric(unit string, v float64) string {
	switch unit {
	case "B/op", "allocs/op":
		if v == math.Trunc(v) {
			return strconv.FormatFloat(v, 'f', 0, 64)
		}
	case "MB/s":
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return formatFigure(v)
}

// formatFigure prints v as go test prints a benchmark's metrics (testing's prettyPrint):
// four significant digits from 0.001 on, seven decimals below, no exponent.
func formatFigure(v float64) string {
	prec := 0
	for _, from := range []float64{999.95, 99.995, 9.9995, 0.99995, 0.099995, 0.0099995, 0.00099995} {
		if v == 0 || math.Abs(v) >= from {
			break
		}
		prec++
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}
