#!/usr/bin/env bash
# Regenerates the file-based catalog catalog/quartet/ (run by `make catalog`), the upgrade chain
# quartet.v0.1.0 -> the releases of hack/olm/releases (each frozen as it shipped) -> the current
# bundle/:
#   1. reconstructs the v0.1.0 bundle from the oldest release's frozen bundle into
#      hack/olm/bundles/quartet.v0.1.0 (hack/olm/reconstruct: same operator, ChaosAgent serving
#      and storing v1alpha1 only), so v0.1.0 stays what it was whatever bundle/ becomes;
#   2. `opm init` the package, `opm render` every bundle directory, sets each bundle's image
#      to its bundle image name (opm leaves it empty for a directory) and migrates its objects
#      to olm.csv.metadata;
#   3. writes the stable channel: each version replaces the one before it, with skipRange
#      '>=0.1.0 <version' (an install of any older version goes straight to the newest);
#   4. `opm validate` and `opm generate dockerfile` (catalog.Dockerfile).
# Everything is offline; the bundle images are names only (`make images` or `make bundle-build`
# makes them). The frozen bundles are read, never written.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

: "${OPM:?path to opm}" "${OPERATOR_SDK:?path to operator-sdk}"
IMAGE_TAG_BASE=${IMAGE_TAG_BASE:-quay.io/quartet-operator/quartet}
VERSION=${VERSION:-0.3.0}
BUNDLE_IMG=${BUNDLE_IMG:-$IMAGE_TAG_BASE-bundle:v$VERSION}
OPM_IMAGE_VERSION=${OPM_IMAGE_VERSION:-v1.74.0}
PACKAGE=quartet
CHANNEL=stable
FIRST=0.1.0
bundles=hack/olm/bundles

if [ ! -f bundle/manifests/$PACKAGE.clusterserviceversion.yaml ]; then
  echo "catalog: bundle/ is missing; run \`make bundle\` first" >&2
  exit 1
fi
mapfile -t released < <(awk '!/^#/ && NF { print $1 }' hack/olm/releases)
if [ ${#released[@]} -eq 0 ]; then
  echo "catalog: hack/olm/releases lists no release" >&2
  exit 1
fi
for v in "${released[@]}"; do
  if [ ! -f "$bundles/$PACKAGE.v$v/manifests/$PACKAGE.clusterserviceversion.yaml" ]; then
    echo "catalog: the frozen bundle of release $v ($bundles/$PACKAGE.v$v) is missing" >&2
    exit 1
  fi
  if [ "$v" = "$VERSION" ]; then
    echo "catalog: VERSION $VERSION is already released (hack/olm/releases): bump VERSION" >&2
    exit 1
  fi
done

go run ./hack/olm/reconstruct -from "$bundles/$PACKAGE.v${released[0]}" -to "$bundles/$PACKAGE.v$FIRST" \
  -version "$FIRST" -image "$IMAGE_TAG_BASE:v$FIRST"
for v in "$FIRST" "${released[@]}"; do
  "$OPERATOR_SDK" bundle validate "$bundles/$PACKAGE.v$v"
done

out=catalog/$PACKAGE
rm -rf catalog
mkdir -p "$out"

"$OPM" init "$PACKAGE" --default-channel="$CHANNEL" --icon=config/manifests/icon.svg \
  --description=hack/olm/package-description.md --output=yaml >"$out/package.yaml"

# render DIR IMAGE FILE: the bundle in DIR, published as IMAGE, its objects migrated to one
# olm.csv.metadata property (what catalogs for OpenShift 4.17 and later require instead of
# olm.bundle.object; OLM reads the manifests from the bundle image). opm migrates only a
# bundle that has an image, and a directory renders without one, so the rendered entry gets
# its image first and is rendered again, as a file-based catalog, with the migration.
render() {
  local tmp
  tmp=$(mktemp -d)
  "$OPM" render "$1" --output=yaml | sed "s#^image: \"\"\$#image: $2#" >"$tmp/bundle.yaml"
  grep -q "^image: $2\$" "$tmp/bundle.yaml" || { echo "catalog: could not set the image of $1" >&2; rm -rf "$tmp"; exit 1; }
  "$OPM" render "$tmp" --migrate-level=bundle-object-to-csv-metadata --output=yaml >"$3"
  rm -rf "$tmp"
  if grep -q "olm.bundle.object" "$3" || ! grep -q "olm.csv.metadata" "$3"; then
    echo "catalog: $1 did not migrate to olm.csv.metadata" >&2
    exit 1
  fi
}
versions=("$FIRST" "${released[@]}" "$VERSION")
for v in "$FIRST" "${released[@]}"; do
  render "$bundles/$PACKAGE.v$v" "$IMAGE_TAG_BASE-bundle:v$v" "$out/bundle-v$v.yaml"
done
render bundle "$BUNDLE_IMG" "$out/bundle-v$VERSION.yaml"

{
  printf -- '---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n- name: %s.v%s\n' "$PACKAGE" "$CHANNEL" "$PACKAGE" "$FIRST"
  prev=$FIRST
  for v in "${versions[@]:1}"; do
    printf -- "- name: %s.v%s\n  replaces: %s.v%s\n  skipRange: '>=%s <%s'\n" "$PACKAGE" "$v" "$PACKAGE" "$prev" "$FIRST" "$v"
    prev=$v
  done
} >"$out/channel-$CHANNEL.yaml"

"$OPM" validate catalog
rm -f catalog.Dockerfile
"$OPM" generate dockerfile catalog --base-image "quay.io/operator-framework/opm:$OPM_IMAGE_VERSION" \
  --builder-image "quay.io/operator-framework/opm:$OPM_IMAGE_VERSION"
echo "catalog: $out holds ${versions[*]/#/$PACKAGE.v} in channel $CHANNEL, each replacing the one before; valid"
