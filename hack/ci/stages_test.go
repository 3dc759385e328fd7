// Package ci tests the stage runner of .ci/run (stages.sh): a stage that hangs fails CI by
// its name within the run's deadline, and no stage is skipped silently.
package ci

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// run runs script after sourcing stages.sh with bash, in a folder of its own, and returns
// what it printed, its exit code and how long it took.
func run(t *testing.T, script string) (string, int, time.Duration) {
	t.Helper()
	lib, err := filepath.Abs("stages.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", "set -uo pipefail\nsource "+lib+"\n"+script)
	cmd.Env = append(os.Environ(), "CI_DIR="+t.TempDir(), "CI_KILL_AFTER=2", "CI_MIN_START=3")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit %d after %s:\n%s", code, took.Round(100*time.Millisecond), out)
	return string(out), code, took
}

// summaryLine returns the summary's line of stage name.
func summaryLine(t *testing.T, out, name string) string {
	t.Helper()
	_, summary, ok := strings.Cut(out, "ci: summary")
	if !ok {
		t.Fatalf("no summary in:\n%s", out)
	}
	for _, l := range strings.Split(summary, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return l
		}
	}
	t.Fatalf("stage %s not in the summary:\n%s", name, summary)
	return ""
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lastLine is the run's closing line.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestHangingStageFailsByNameWithinTheDeadline: a run with a 20 s budget (5 s reserve), a
// stage that passes, then one that sleeps far past the budget, then one more. The sleeper is
// killed when the budget minus the reserve is used up, the summary names it as timed out,
// the stage after it is SKIPPED (no time left) and the run fails, within its budget.
func TestHangingStageFailsByNameWithinTheDeadline(t *testing.T) {
	t.Parallel()
	out, code, took := run(t, `
ci_begin 20 5
stage quick 10 -- true
stage hang 3600 -- sleep 3600
stage after-hang 600 -- true
ci_summary`)
	if code == 0 {
		t.Errorf("exit 0, want a failure")
	}
	if took > 20*time.Second {
		t.Errorf("the run took %s, past its 20 s budget", took)
	}
	// The hanging stage gets what is left of the 15 s before the reserve: about 14 s.
	m := regexp.MustCompile(`^\s*hang\s+(\d+)\s+FAILED hang: timed out after (\d+)s$`).FindStringSubmatch(summaryLine(t, out, "hang"))
	if m == nil {
		t.Fatalf("summary line of the hanging stage: %q", summaryLine(t, out, "hang"))
	}
	ran, limit := atoi(t, m[1]), atoi(t, m[2])
	if limit < 8 || limit > 15 || ran < limit || ran > limit+1 {
		t.Errorf("the hanging stage ran %d s with a timeout of %d s; want about 14 s of the 15 s before the reserve", ran, limit)
	}
	if l := summaryLine(t, out, "quick"); !strings.HasSuffix(l, " passed") {
		t.Errorf("summary line of the quick stage: %q", l)
	}
	if l := summaryLine(t, out, "after-hang"); !strings.Contains(l, "SKIPPED after-hang:") || !strings.Contains(l, "of the budget left") {
		t.Errorf("summary line of the stage after it: %q", l)
	}
	if got := lastLine(out); got != "1 passed, 1 failed, 1 skipped" {
		t.Errorf("closing line %q", got)
	}
}

// TestStageIgnoringSIGTERMIsKilled: a stage whose command (and its child) ignore SIGTERM is
// killed CI_KILL_AFTER (2 s here) after its own cap of 3 s, child included.
func TestStageIgnoringSIGTERMIsKilled(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "child-alive")
	out, code, took := run(t, `
ci_begin 600 15
stage stubborn 3 -- bash -c 'trap "" TERM; (trap "" TERM; sleep 8; touch `+marker+`) & sleep 60'
ci_summary`)
	if code == 0 {
		t.Errorf("exit 0, want a failure")
	}
	if took > 15*time.Second {
		t.Errorf("took %s: the stage was not killed 2 s after its 3 s cap", took)
	}
	if l := summaryLine(t, out, "stubborn"); !strings.Contains(l, "FAILED stubborn: timed out after 3s") {
		t.Errorf("summary line: %q", l)
	}
	time.Sleep(10*time.Second - took) // the child would have touched the marker by now
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the stage's child outlived the stage")
	}
}

// TestFailureAndNeeds: a failing stage is reported with its exit code, a stage needing it
// is SKIPPED with the reason, an independent one still runs, --after runs after the failure
// only, and the stages' own output is shown prefixed by their names.
func TestFailureAndNeeds(t *testing.T) {
	t.Parallel()
	out, code, _ := run(t, `
ci_begin 600 15
stage build 60 --after 'echo tearing down' -- bash -c 'echo compiling; exit 3'
stage tests 60 --needs build -- true
stage lint 60 --after 'echo never' -- bash -c 'echo linted'
ci_summary`)
	if code == 0 {
		t.Errorf("exit 0, want a failure")
	}
	for _, want := range []string{"[build] compiling", "[lint] linted", "[build/after] tearing down"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "never") {
		t.Errorf("--after ran after a stage that passed")
	}
	if l := summaryLine(t, out, "build"); !strings.Contains(l, "FAILED build: exit 3") {
		t.Errorf("summary line: %q", l)
	}
	if l := summaryLine(t, out, "tests"); !strings.Contains(l, "SKIPPED tests: needs build, which FAILED build: exit 3") {
		t.Errorf("summary line: %q", l)
	}
	if got := lastLine(out); got != "1 passed, 1 failed, 1 skipped" {
		t.Errorf("closing line %q", got)
	}
}

// TestFailedTestsNamedAboveTheSummary: the end of CI's output names what failed in a failed
// stage (go test's FAIL lines and testify's block, from the stage's log), above the
// summary; a stage that passed adds nothing there.
func TestFailedTestsNamedAboveTheSummary(t *testing.T) {
	t.Parallel()
	out, code, _ := run(t, `
ci_begin 600 15
stage e2e 60 -- bash -c 'printf "=== RUN   TestA\n    a_test.go:9: a log line\n    a_test.go:12: \n        \tError Trace:\t/src/a_test.go:12\n        \tError:      \tShould be true\n        \tTest:       \tTestA\n--- FAIL: TestA (1.00s)\n--- PASS: TestB (0.50s)\nFAIL\n"; exit 1'
stage lint 60 -- bash -c 'echo "--- FAIL: NotAFailure"'
ci_summary`)
	if code == 0 {
		t.Errorf("exit 0, want a failure")
	}
	failures, summary, ok := strings.Cut(out, "ci: summary")
	if !ok {
		t.Fatalf("no summary")
	}
	_, failures, ok = strings.Cut(failures, "ci: what failed in e2e")
	if !ok {
		t.Fatalf("no failures block for e2e above the summary")
	}
	for _, want := range []string{"[e2e] --- FAIL: TestA (1.00s)", "Error Trace:\t/src/a_test.go:12", "Error:      \tShould be true", "[e2e] FAIL"} {
		if !strings.Contains(failures, want) {
			t.Errorf("failures block lacks %q:\n%s", want, failures)
		}
	}
	for _, unwanted := range []string{"TestB", "a log line", "NotAFailure", "what failed in lint"} {
		if strings.Contains(failures, unwanted) {
			t.Errorf("failures block has %q:\n%s", unwanted, failures)
		}
	}
	if l := summaryLine(t, "ci: summary"+summary, "e2e"); !strings.Contains(l, "FAILED e2e: exit 1") {
		t.Errorf("summary line: %q", l)
	}
	if got := lastLine(out); got != "1 passed, 1 failed, 0 skipped" {
		t.Errorf("closing line %q", got)
	}
}

// TestLanesSideBySide: two lanes run at once (the real-node lane and the CPU lane of
// .ci/run); one waits for a stage of the other; all pass, the summary lists them in the
// order they started and the run exits 0. The stage is told its own limit.
func TestLanesSideBySide(t *testing.T) {
	t.Parallel()
	out, code, took := run(t, `
ci_begin 600 15
stage first 60 -- true
( stage slow 60 -- sleep 3; stage slow2 60 -- true ) &
echo "base nice=$(nice)"
( ci_wait_for slow && stage waiter 60 --nice 10 -- bash -c 'echo limit=$CI_STAGE_SECONDS nice=$(nice)' ) &
wait
ci_summary`)
	if code != 0 {
		t.Errorf("exit %d", code)
	}
	if took > 20*time.Second {
		t.Errorf("took %s", took)
	}
	// nice -n 10 adds to the niceness the run has (a make test may itself run niced), up to 19.
	base := regexp.MustCompile(`base nice=(\d+)`).FindStringSubmatch(out)
	if base == nil {
		t.Fatal("no base niceness printed")
	}
	want := fmt.Sprintf("[waiter] limit=60 nice=%d", min(atoi(t, base[1])+10, 19))
	if !strings.Contains(out, want) {
		t.Errorf("the stage was not told its limit, or not run 10 nicer than the run: want %q", want)
	}
	_, summary, _ := strings.Cut(out, "ci: summary")
	if i, j := strings.Index(summary, "slow "), strings.Index(summary, "waiter"); i < 0 || j < i {
		t.Errorf("summary not in start order:\n%s", summary)
	}
	if got := lastLine(out); got != "4 passed, 0 failed, 0 skipped" {
		t.Errorf("closing line %q", got)
	}
}
