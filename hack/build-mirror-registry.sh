#!/usr/bin/env bash
# Builds mirror-registry (cmd/mirror-registry, a Go module of its own: distribution v3.0.0
# with retention by use) into bin/mirror-registry/v<VERSION>/mirror-registry, with the build
# command of cmd/mirror-registry/Dockerfile. The RegistryMirror tests run it with the command
# line and configuration the operator renders. Its source is this repository's, so it is
# built every time; Go's build cache makes an unchanged build a matter of seconds.
# Prints the binary's path on stdout (the tests read it), everything else on stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
VERSION=${VERSION:-$(awk '$1 == "VERSION" && $2 == "?=" { print $3 }' "$root/Makefile")}
if [ -z "$VERSION" ]; then
  echo "mirror-registry: no VERSION (the Makefile's VERSION ?= line)" >&2
  exit 1
fi
out_dir=$root/bin/mirror-registry/v$VERSION
mkdir -p "$out_dir"
start=$SECONDS
# go build leaves an up-to-date binary as it is and replaces a stale one by renaming.
(cd "$root/cmd/mirror-registry" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out_dir/mirror-registry" .)
echo "mirror-registry: v$VERSION from cmd/mirror-registry ($((SECONDS - start))s)" >&2
echo "$out_dir/mirror-registry"
