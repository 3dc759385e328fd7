#!/usr/bin/env bash
# Builds the OLM tooling from the Go module proxy into bin/tools/, each from its own tools
# module under hack/tools/ (they cannot share the operator's go.mod), skipping what exists:
#   operator-sdk v1.42.2, opm v1.74.0, OLM v0.46.0 (olm and catalog operators).
# For the images of make images (hack/images/build.sh) also, on request only:
#   olm-image: OLM's package-server, copy-content and cpb (the rest of OLM's own image);
#   scorecard-test: operator-sdk's images/scorecard-test.
# opm is linked statically (cgo sqlite, glibc's libc.a) so the same binary runs on the host
# and in the FROM-scratch opm image.
# Usage: hack/build-olm-tools.sh [operator-sdk] [opm] [olm] [olm-image] [scorecard-test]
#        (default: operator-sdk opm olm)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bin/tools"
mkdir -p "$out"
OPERATOR_SDK_VERSION=${OPERATOR_SDK_VERSION:-v1.42.2}
OPM_VERSION=${OPM_VERSION:-v1.74.0}
OLM_VERSION=${OLM_VERSION:-v0.46.0}

build() { # name module-dir version package env-and-flags...
  local name=$1 dir=$2 ver=$3 pkg=$4; shift 4
  local bin="$out/$name-$ver"
  if [ -x "$bin" ]; then echo "olm-tools: $name $ver present"; return; fi
  echo "olm-tools: building $name $ver"
  local start=$SECONDS
  (cd "$root/hack/tools/$dir" && env "$@" go build -trimpath -o "$bin.tmp" "$pkg")
  mv "$bin.tmp" "$bin"
  echo "olm-tools: built $name in $((SECONDS - start))s"
}

want=${*:-operator-sdk opm olm}
for t in $want; do
  case $t in
  operator-sdk)
    build operator-sdk operator-sdk "$OPERATOR_SDK_VERSION" github.com/operator-framework/operator-sdk/cmd/operator-sdk \
      CGO_ENABLED=0 GOFLAGS="-tags=containers_image_openpgp -ldflags=-X=github.com/operator-framework/operator-sdk/internal/version.Version=$OPERATOR_SDK_VERSION" ;;
  opm)
    build opm opm "$OPM_VERSION" github.com/operator-framework/operator-registry/cmd/opm \
      CGO_ENABLED=1 GOFLAGS="-tags=json1,containers_image_openpgp,netgo,osusergo -ldflags=-extldflags=-static" ;;
  olm)
    build olm olm "$OLM_VERSION" github.com/operator-framework/operator-lifecycle-manager/cmd/olm CGO_ENABLED=0 GOFLAGS="-tags=json1"
    build catalog olm "$OLM_VERSION" github.com/operator-framework/operator-lifecycle-manager/cmd/catalog CGO_ENABLED=0 GOFLAGS="-tags=json1" ;;
  olm-image)
    build package-server olm "$OLM_VERSION" github.com/operator-framework/operator-lifecycle-manager/cmd/package-server CGO_ENABLED=0 GOFLAGS="-tags=json1"
    build copy-content olm "$OLM_VERSION" github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content CGO_ENABLED=0 GOFLAGS="-tags=json1"
    build cpb olm "$OLM_VERSION" github.com/operator-framework/operator-lifecycle-manager/util/cpb CGO_ENABLED=0 GOFLAGS="-tags=json1" ;;
  scorecard-test)
    build scorecard-test operator-sdk "$OPERATOR_SDK_VERSION" github.com/operator-framework/operator-sdk/images/scorecard-test CGO_ENABLED=0 ;;
  *) echo "olm-tools: unknown tool $t" >&2; exit 2 ;;
  esac
done
