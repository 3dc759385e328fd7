#!/usr/bin/env bash
# Builds the real node's cluster add-ons from the Go module proxy into bin/tools/, each from
# its own tools module under hack/tools/, skipping what exists:
#   coredns v1.12.4 (cluster DNS; only the plugins a cluster needs, no forwarder) and
#   hostpath-provisioner (dynamic hostPath volumes, sig-storage-lib-external-provisioner v10).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bin/tools"
mkdir -p "$out"
COREDNS_VERSION=${COREDNS_VERSION:-v1.12.4}

build() { # name module-dir output flags...
  local name=$1 dir=$2 bin=$3; shift 3
  if [ -x "$bin" ]; then echo "node-tools: $name present"; return; fi
  echo "node-tools: building $name"
  local start=$SECONDS
  (cd "$root/hack/tools/$dir" && CGO_ENABLED=0 go build -trimpath "$@" -o "$bin.tmp" .)
  mv "$bin.tmp" "$bin"
  echo "node-tools: built $name in $((SECONDS - start))s"
}

pinned=$(cd "$root/hack/tools/coredns" && go list -m -f '{{.Version}}' github.com/coredns/coredns)
if [ "$pinned" != "$COREDNS_VERSION" ]; then
  echo "node-tools: hack/tools/coredns pins $pinned, not $COREDNS_VERSION" >&2
  exit 1
fi
build "coredns $COREDNS_VERSION" coredns "$out/coredns-$COREDNS_VERSION" -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
build hostpath-provisioner hostpath-provisioner "$out/hostpath-provisioner" -ldflags "-s -w"
