# shellcheck shell=bash
# The stage runner of .ci/run (sourced): every stage runs under a timeout taken from what is
# left of the run's budget, so a stage that hangs fails by its name and the run still ends in
# time; the closing summary lists each stage with its seconds and result, then the plain
# "N passed, N failed, N skipped" line. hack/ci/stages_test.go runs it with tiny budgets
# (a hanging stage, one that ignores SIGTERM, one that no longer fits, lanes side by side).
#
#   ci_begin BUDGET [RESERVE]     the run must end within BUDGET seconds; RESERVE of them
#                                 (default 150) stay for the kill grace and the teardown
#   stage NAME CAP [opts] -- CMD  run CMD as stage NAME for at most CAP seconds (less when
#                                 less of the budget is left); opts:
#                                   --needs A,B   skip unless stages A and B passed
#                                   --after CMD   run CMD (under its own timeout) when the
#                                                 stage did not pass: a real-node stage's
#                                                 teardown, so the next one can start
#                                   --nice N      run CMD at niceness N (a stage beside others)
#   ci_wait_for NAME...           block until the named stages (of another lane) have ended
#   ci_summary                    print what failed (the failed tests of each failed stage)
#                                 and the summary; returns 1 unless every stage passed
#
# Policy (docs/CI.md): no stage is skipped silently. A stage is skipped only when it cannot
# start, because less than a minute of the budget is left or a stage it needs did not pass;
# it is then listed as SKIPPED with the reason, and a skip fails the run like a failure.
# (The minute is CI_MIN_START seconds, 60 by default.)
# A stage that runs past its timeout gets SIGTERM, and SIGKILL CI_KILL_AFTER seconds later
# (default 30), on its whole process group.

ci_begin() {
  CI_BUDGET=$1
  CI_RESERVE=${2:-150}
  CI_KILL_AFTER=${CI_KILL_AFTER:-30}
  CI_MIN_START=${CI_MIN_START:-60}
  CI_START=$(date +%s)
  CI_DEADLINE=$((CI_START + CI_BUDGET))
  CI_DIR=${CI_DIR:-$(mktemp -d -t ci-stages.XXXXXX)}
  mkdir -p "$CI_DIR/logs"
  : >"$CI_DIR/results"
  export CI_BUDGET CI_RESERVE CI_KILL_AFTER CI_MIN_START CI_START CI_DEADLINE CI_DIR
  ci_say "budget ${CI_BUDGET}s, ending by $(date -d "@$CI_DEADLINE" +%T); stage logs in $CI_DIR/logs"
}

ci_now() { echo $(($(date +%s) - CI_START)); }

ci_say() { echo "ci: [$(ci_now)s] $*"; }

# ci_left: seconds a stage starting now may run, keeping the reserve.
ci_left() { echo $((CI_DEADLINE - CI_RESERVE - $(date +%s))); }

# _ci_record NAME START SECONDS RESULT: one line per stage; the summary sorts by start.
_ci_record() {
  printf '%s\t%s\t%s\t%s\n' "$2" "$1" "$3" "$4" >>"$CI_DIR/results"
}

# ci_result NAME: the stage's result (passed, FAILED ..., SKIPPED ...), empty while it runs.
ci_result() {
  awk -F'\t' -v n="$1" '$2 == n { r = $4 } END { print r }' "$CI_DIR/results"
}

stage() {
  local name=$1 cap=$2
  shift 2
  local needs="" after="" nice_level=""
  while [ $# -gt 0 ]; do
    case $1 in
    --needs) needs=$2; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --nice) nice_level=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "stage $name: unknown option $1" >&2; return 2 ;;
    esac
  done
  local begin
  begin=$(ci_now)
  local n
  for n in ${needs//,/ }; do
    local r
    r=$(ci_result "$n")
    if [ "$r" != passed ]; then
      _ci_record "$name" "$begin" - "SKIPPED $name: needs $n, which ${r:-did not run}"
      ci_say "SKIPPED $name: needs $n, which ${r:-did not run}"
      return 1
    fi
  done
  local left secs
  left=$(ci_left)
  secs=$((cap < left ? cap : left))
  if [ "$left" -lt "$CI_MIN_START" ]; then
    _ci_record "$name" "$begin" - "SKIPPED $name: ${left}s of the budget left, it may take ${cap}s"
    ci_say "SKIPPED $name: ${left}s of the budget left (after the ${CI_RESERVE}s reserve), it may take ${cap}s"
    return 1
  fi
  local log="$CI_DIR/logs/$name.log"
  : >"$log"
  ci_say "stage $name (timeout ${secs}s): $*"
  # CI_STAGE_SECONDS tells the command its own limit (go test -timeout below it, so a hung
  # test panics with its name and stacks before the stage is killed).
  local runner=(env --default-signal=INT,QUIT CI_STAGE_SECONDS="$secs")
  [ -n "$nice_level" ] && runner=(nice -n "$nice_level" "${runner[@]}")
  local start=$SECONDS rc=0
  # In the background (so its output can be followed by PID); env restores SIGINT and
  # SIGQUIT, which a background job of a script starts with ignored. timeout runs the
  # command in a process group of its own and signals the whole group.
  timeout --kill-after="$CI_KILL_AFTER" "$secs" "${runner[@]}" "$@" >"$log" 2>&1 </dev/null &
  local pid=$!
  tail -n +1 -s 0.5 --pid="$pid" -f "$log" | sed -u "s|^|[$name] |" &
  local tailer=$!
  wait "$pid" || rc=$?
  wait "$tailer" || true
  local took=$((SECONDS - start)) result
  case $rc in
  0) result=passed ;;
  124 | 137) result="FAILED $name: timed out after ${secs}s" ;;
  *) result="FAILED $name: exit $rc" ;;
  esac
  _ci_record "$name" "$begin" "$took" "$result"
  if [ $rc -eq 0 ]; then ci_say "passed $name (${took}s)"; else ci_say "$result (${took}s)"; fi
  if [ $rc -ne 0 ] && [ -n "$after" ]; then
    ci_say "after $name: $after"
    timeout --kill-after=10 300 bash -c "$after" 2>&1 | sed -u "s|^|[$name/after] |" || true
  fi
  return $rc
}

# ci_wait_for NAME...: wait until each named stage has a result (it ended or was skipped).
ci_wait_for() {
  local n
  for n in "$@"; do
    while [ -z "$(ci_result "$n")" ]; do
      if [ "$(date +%s)" -ge "$CI_DEADLINE" ]; then return 1; fi
      sleep 2
    done
  done
}

# _ci_failures NAME: what a failed stage's log says failed, at most 60 lines: go test's
# "--- FAIL" and "FAIL" lines, testify's blocks (Error Trace, Error, Test, Messages: the
# lines indented with a tab) and panics (a test's timeout among them). The summary prints
# them above its table, so the end of CI's output names the failed tests.
_ci_failures() {
  grep -E -e '^ *--- FAIL|^FAIL|^panic: |^ +'$'\t' "$CI_DIR/logs/$1.log" 2>/dev/null | head -n 60
}

ci_summary() {
  local passed failed skipped name
  awk -F'\t' '$4 ~ /^FAILED/ { print $2 }' "$CI_DIR/results" | while read -r name; do
    echo
    echo "ci: what failed in $name (its log: $CI_DIR/logs/$name.log)"
    _ci_failures "$name" | sed "s|^|  [$name] |"
  done
  echo
  echo "ci: summary ($(ci_now)s of the ${CI_BUDGET}s budget)"
  printf '  %-22s %8s  %s\n' stage seconds result
  sort -t$'\t' -k1,1n -s "$CI_DIR/results" | while IFS=$'\t' read -r _ name secs result; do
    printf '  %-22s %8s  %s\n' "$name" "$secs" "$result"
  done
  passed=$(awk -F'\t' '$4 == "passed"' "$CI_DIR/results" | wc -l)
  failed=$(awk -F'\t' '$4 ~ /^FAILED/' "$CI_DIR/results" | wc -l)
  skipped=$(awk -F'\t' '$4 ~ /^SKIPPED/' "$CI_DIR/results" | wc -l)
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ] && [ "$skipped" -eq 0 ]
}
