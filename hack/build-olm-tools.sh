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
#        [olm-all] [operator-sdk-all] (default: operator-sdk opm olm); each builds the missing
#        binaries of one tools module with one go build; olm-all is olm and olm-image,
#        operator-sdk-all is operator-sdk and scorecard-test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bin/tools"
mkdir -p "$out"
OPERATOR_SDK_VERSION=${OPERATOR_SDK_VERSION:-v1.42.2}
OPM_VERSION=${OPM_VERSION:-v1.74.0}
OLM_VERSION=${OLM_VERSION:-v0.46.0}

# build module-dir version env-and-flags... -- name=package...: one go build of every missing
# binary of one tools module (shared packages compile once, the links run side by side).
build() {
  local dir=$1 ver=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local names=() pkgs=() b
  for b in "$@"; do
    if [ -x "$out/${b%%=*}-$ver" ]; then echo "olm-tools: ${b%%=*} $ver present"; continue; fi
    names+=("${b%%=*}") pkgs+=("${b#*=}")
  done
  [ ${#pkgs[@]} -gt 0 ] || return 0
  echo "olm-tools: building ${names[*]} $ver"
  local start=$SECONDS tmp
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  (cd "$root/hack/tools/$dir" && env "${envs[@]}" go build -trimpath -o "$tmp/" "${pkgs[@]}")
  local i
  for i in "${!pkgs[@]}"; do
    mv "$tmp/${pkgs[$i]##*/}" "$out/${names[$i]}-$ver"
  done
  rm -rf "$tmp"
  echo "olm-tools: built ${names[*]} in $((SECONDS - start))s"
}

sdk_env=(CGO_ENABLED=0 GOFLAGS="-tags=containers_image_openpgp -ldflags=-X=github.com/operator-framework/operator-sdk/internal/version.Version=$OPERATOR_SDK_VERSION")
olm_env=(CGO_ENABLED=0 GOFLAGS="-tags=json1")
olm_pkg=github.com/operator-framework/operator-lifecycle-manager
want=${*:-operator-sdk opm olm}
for t in $want; do
  case $t in
  operator-sdk)
    build operator-sdk "$OPERATOR_SDK_VERSION" "${sdk_env[@]}" -- operator-sdk=github.com/operator-framework/operator-sdk/cmd/operator-sdk ;;
  opm)
    build opm "$OPM_VERSION" CGO_ENABLED=1 GOFLAGS="-tags=json1,containers_image_openpgp,netgo,osusergo -ldflags=-extldflags=-static" -- \
      opm=github.com/operator-framework/operator-registry/cmd/opm ;;
  olm)
    build olm "$OLM_VERSION" "${olm_env[@]}" -- olm=$olm_pkg/cmd/olm catalog=$olm_pkg/cmd/catalog ;;
  olm-image)
    build olm "$OLM_VERSION" "${olm_env[@]}" -- package-server=$olm_pkg/cmd/package-server copy-content=$olm_pkg/cmd/copy-content cpb=$olm_pkg/util/cpb ;;
  olm-all) # olm and olm-image in one build
    build olm "$OLM_VERSION" "${olm_env[@]}" -- olm=$olm_pkg/cmd/olm catalog=$olm_pkg/cmd/catalog \
      package-server=$olm_pkg/cmd/package-server copy-content=$olm_pkg/cmd/copy-content cpb=$olm_pkg/util/cpb ;;
  scorecard-test)
    build operator-sdk "$OPERATOR_SDK_VERSION" CGO_ENABLED=0 -- scorecard-test=github.com/operator-framework/operator-sdk/images/scorecard-test ;;
  operator-sdk-all) # operator-sdk and scorecard-test in one build, with operator-sdk's tags and version
    build operator-sdk "$OPERATOR_SDK_VERSION" "${sdk_env[@]}" -- operator-sdk=github.com/operator-framework/operator-sdk/cmd/operator-sdk \
      scorecard-test=github.com/operator-framework/operator-sdk/images/scorecard-test ;;
  *) echo "olm-tools: unknown tool $t" >&2; exit 2 ;;
  esac
done
