#!/usr/bin/env bash
# Builds the CNCF distribution registry (github.com/distribution/distribution/v3,
# cmd/registry) from the Go module proxy into bin/registry/<version>/registry, pinned by
# hack/tools/registry/go.mod. The RegistryMirror tests run it with the configuration the
# operator renders. Skips the build when the binary exists.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
REGISTRY_VERSION=${REGISTRY_VERSION:-v3.0.0}
out_dir="$root/bin/registry/$REGISTRY_VERSION"
out="$out_dir/registry"
if [ -x "$out" ]; then
  echo "registry: $REGISTRY_VERSION present"
  exit 0
fi
pinned=$(cd "$root/hack/tools/registry" && go list -m -f '{{.Version}}' github.com/distribution/distribution/v3)
if [ "$pinned" != "$REGISTRY_VERSION" ]; then
  echo "registry: hack/tools/registry pins $pinned, not $REGISTRY_VERSION" >&2
  exit 1
fi
mkdir -p "$out_dir"
echo "registry: building $REGISTRY_VERSION"
start=$SECONDS
(cd "$root/hack/tools/registry" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" -o "$out.tmp" github.com/distribution/distribution/v3/cmd/registry)
mv "$out.tmp" "$out"
echo "registry: built $REGISTRY_VERSION in $((SECONDS - start))s"
