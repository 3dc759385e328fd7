#!/usr/bin/env bash
# Regenerates the file-based catalog catalog/quartet/ (run by `make catalog`):
#   1. reconstructs the v0.1.0 bundle from bundle/ into hack/olm/bundles/quartet.v0.1.0
#      (hack/olm/reconstruct: same operator, ChaosAgent serving and storing v1alpha1 only);
#   2. `opm init` the package, `opm render` both bundle directories, sets each bundle's
#      image to its bundle image name (opm leaves it empty for a directory);
#   3. writes the stable channel: quartet.v0.2.0 replaces quartet.v0.1.0, skipRange
#      '>=0.1.0 <0.2.0';
#   4. `opm validate` and `opm generate dockerfile` (catalog.Dockerfile).
# Everything is offline; the bundle images are names only (`make bundle-build` makes them).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

: "${OPM:?path to opm}" "${OPERATOR_SDK:?path to operator-sdk}"
IMAGE_TAG_BASE=${IMAGE_TAG_BASE:-quay.io/quartet-operator/quartet}
VERSION=${VERSION:-0.2.0}
BUNDLE_IMG=${BUNDLE_IMG:-$IMAGE_TAG_BASE-bundle:v$VERSION}
OPM_IMAGE_VERSION=${OPM_IMAGE_VERSION:-v1.74.0}
PACKAGE=quartet
CHANNEL=stable
PREVIOUS=0.1.0
previous_dir=hack/olm/bundles/$PACKAGE.v$PREVIOUS

if [ ! -f bundle/manifests/$PACKAGE.clusterserviceversion.yaml ]; then
  echo "catalog: bundle/ is missing; run \`make bundle\` first" >&2
  exit 1
fi

go run ./hack/olm/reconstruct -from bundle -to "$previous_dir" -version "$PREVIOUS" -image "$IMAGE_TAG_BASE:v$PREVIOUS"
"$OPERATOR_SDK" bundle validate "$previous_dir"

out=catalog/$PACKAGE
rm -rf catalog
mkdir -p "$out"

"$OPM" init "$PACKAGE" --default-channel="$CHANNEL" --icon=config/manifests/icon.svg \
  --description=hack/olm/package-description.md --output=yaml >"$out/package.yaml"

# render DIR IMAGE FILE: the bundle in DIR, published as IMAGE.
render() {
  "$OPM" render "$1" --output=yaml | sed "s#^image: \"\"\$#image: $2#" >"$3"
  grep -q "^image: $2\$" "$3" || { echo "catalog: could not set the image of $1" >&2; exit 1; }
}
render "$previous_dir" "$IMAGE_TAG_BASE-bundle:v$PREVIOUS" "$out/bundle-v$PREVIOUS.yaml"
render bundle "$BUNDLE_IMG" "$out/bundle-v$VERSION.yaml"

cat >"$out/channel-$CHANNEL.yaml" <<EOF
---
schema: olm.channel
package: $PACKAGE
name: $CHANNEL
entries:
- name: $PACKAGE.v$PREVIOUS
- name: $PACKAGE.v$VERSION
  replaces: $PACKAGE.v$PREVIOUS
  skipRange: '>=$PREVIOUS <$VERSION'
EOF

"$OPM" validate catalog
rm -f catalog.Dockerfile
"$OPM" generate dockerfile catalog --base-image "quay.io/operator-framework/opm:$OPM_IMAGE_VERSION" \
  --builder-image "quay.io/operator-framework/opm:$OPM_IMAGE_VERSION"
echo "catalog: $out holds $PACKAGE.v$PREVIOUS ($IMAGE_TAG_BASE-bundle:v$PREVIOUS) and $PACKAGE.v$VERSION ($BUNDLE_IMG) in channel $CHANNEL; valid"
