#!/usr/bin/env bash
# Measures a run of .ci/run as CI makes it (docs/CI.md, "Measuring a run"): a fresh clone of
# COMMIT (default HEAD; the full history, which the images of the older releases need) in a
# temporary folder, no bin/, run as `CI=true bash .ci/run </dev/null` as root.
#   cold (the default): Go's module and build caches are empty folders of the temporary
#     folder (GOMODCACHE, GOCACHE), as on a fresh machine.
#   --warm: this machine's Go caches, as a later run on the same machine.
#   --purge-node-deps: first remove the real node's Debian packages (containerd, runc, the
#     CNI plugins, conntrack), as a fresh machine lacks them; make node-deps installs them
#     again. Without it they are used as the machine has them.
#   --keep: keep the temporary folder (the clone, the caches, the stage logs).
# The output goes to the terminal and to ci.log in the temporary folder; the summary at its end
# has each stage's seconds. Needs root and an otherwise idle machine for figures that mean
# anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
warm="" purge="" keep="" commit=HEAD
for a in "$@"; do
  case $a in
  --warm) warm=1 ;;
  --purge-node-deps) purge=1 ;;
  --keep) keep=1 ;;
  -*) echo "ci-cold: unknown option $a" >&2; exit 2 ;;
  *) commit=$a ;;
  esac
done
sha=$(git -C "$root" rev-parse --verify "$commit^{commit}")
tmp=$(mktemp -d /tmp/ci-cold.XXXXXX)
cleanup() {
  if [ -n "$keep" ]; then echo "ci-cold: kept $tmp"; return; fi
  # The module cache is read-only: let go remove it.
  [ -d "$tmp/gomodcache" ] && GOMODCACHE="$tmp/gomodcache" go clean -modcache 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

git clone --quiet --no-local "$root" "$tmp/repo"
git -C "$tmp/repo" checkout --quiet --detach "$sha"
env_args=(CI=true)
if [ -z "$warm" ]; then
  mkdir -p "$tmp/gomodcache" "$tmp/gocache"
  env_args+=(GOMODCACHE="$tmp/gomodcache" GOCACHE="$tmp/gocache")
fi
if [ -n "$purge" ]; then
  echo "ci-cold: removing the real node's Debian packages"
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq containerd runc containernetworking-plugins conntrack >/dev/null
fi
echo "ci-cold: $(if [ -n "$warm" ]; then echo warm; else echo cold; fi) run of ${sha:0:12} in $tmp/repo, load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$SECONDS
rc=0
(cd "$tmp/repo" && env "${env_args[@]}" bash .ci/run </dev/null 2>&1) | tee "$tmp/ci.log" || rc=$?
echo "ci-cold: .ci/run exited $rc after $((SECONDS - start)) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
