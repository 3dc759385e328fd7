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
	type key struct{ pkg, name string }
	var (
		order   []key
		samples = map[key]*sample{}
	)
	r := benchfmt.NewReader(bytes.NewReader(text), fileName)
	for r.Scan() {
		switch rec := r.Result().(type) {
		case *benchfmt.SyntaxError:
			// A line go test would not write; the old parser skipped such lines too.
			fmt.Fprintln(os.Stderr, "benchreport: skipped:", rec)
		case *benchfmt.Result:
			cpu = rec.GetConfig("cpu")
			k := key{rec.GetConfig("pkg"), benchName(rec.Name)}
			s, ok := samples[k]
			if !ok {
				s = &sample{values: map[string][]float64{}}
				samples[k] = s
				order = append(order, k)
			}
			s.rounds++
			for _, v := range rec.Values {
				// benchfmt tidies units (ns/op to sec/op, MB-rss to B-rss); the report keeps go
				// test's own.
				unit, value := v.Unit, v.Value
				if v.OrigUnit != "" {
					unit, value = v.OrigUnit, v.OrigValue
				}
				if _, seen := s.values[unit]; !seen {
					s.units = append(s.units, unit)
				}
				s.values[unit] = append(s.values[unit], value)
			}
		}
	}
	if err := r.Err(); err != nil {
		return nil, "", nil, err
	}
	for _, k := range order {
		s := samples[k]
		res := result{pkg: k.pkg, name: k.name, rounds: s.rounds}
		for _, unit := range s.units {
			res.metrics = append(res.metrics, [2]string{summarize(unit, s.values[unit], s.rounds), unit})
		}
		results = append(results, res)
	}
	return results, cpu, failed, nil
}

// sample is what the rounds of one benchmark measured.
type sample struct {
	rounds int
	units  []string             // in the order go test printed them
	values map[string][]float64 // unit → a value per round that reported it
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
	if len(parts) > 0 && parts[len(parts)-1][0] == '-' {
		parts = parts[:len(parts)-1]
	}
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
