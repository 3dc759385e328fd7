#!/usr/bin/env bash
# make images: builds every container image the real-node cluster pulls, offline and
# reproducibly, and pushes them into a CNCF distribution registry store on disk
# (bin/images/registry) that the node's own registry serves later.
#
# Inputs: binaries built from the Go module proxy (this repository's, and the pinned tools in
# bin/tools/ and bin/registry/), Debian packages fetched with `apt-get download` and unpacked
# into bin/images/work/debs/ (busybox-static, ca-certificates; nothing is installed on the host),
# and the repository's bundle/, catalog/ and hack/olm/bundles/. No container engine: GNU tar
# makes each layer from a staging tree (fixed mtime, owners, order), crane appends the layers to
# an empty image and sets the config (entrypoint, user, env, labels, platform).
#
# The releases of hack/olm/releases run their own code: each one's operator image is built from
# its commit (a temporary `git worktree`, removed afterwards, with the same build command), as
# that commit's Dockerfile says, and its bundle image from its frozen bundle with the labels of
# that commit's bundle.Dockerfile. v0.1.0 (reconstructed) is the oldest release's operator image
# under another tag. A clone without that history fails here (git fetch --unshallow).
#
# The RegistryMirror's registry image (MIRROR_REGISTRY_IMG) is cmd/mirror-registry, built as its
# Dockerfile (cmd/mirror-registry/Dockerfile) builds it, on the manager's base.
#
# Each image is pushed under its published name minus the host, e.g.
# quay.io/quartet-operator/quartet:v0.3.0 as 127.0.0.1:PORT/quartet-operator/quartet:v0.3.0
# (containerd's hosts.toml on the node maps quay.io, docker.io and registry.k8s.io to it).
# bin/images/images.txt lists "published-name digest"; a rebuild compares its digests with the
# previous list and says which changed. IMAGES_CHECK=1 (make images-check) fails when any did.
#
# The Makefile passes the tool paths (CRANE, OPM, ...) and image names; the defaults match it.
# QUARTET_IMAGES_DIR puts the store, the list and the work files elsewhere than bin/images (a
# second build that must not replace the store a running real node pulls from); the
# Debian packages are then fetched again unless copied into its work/debs/.
set -euo pipefail
umask 022
export LC_ALL=C
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
start=$SECONDS
say() { echo "images: [$((SECONDS - start))s] $*"; }

OLM_VERSION=${OLM_VERSION:-v0.46.0}
OPERATOR_SDK_VERSION=${OPERATOR_SDK_VERSION:-v1.42.2}
OPM_VERSION=${OPM_VERSION:-v1.74.0}
CRANE=${CRANE:-$root/bin/tools/crane-v0.22.1}
GRPC_HEALTH_PROBE=${GRPC_HEALTH_PROBE:-$root/bin/tools/grpc_health_probe-v0.4.40}
OPM=${OPM:-$root/bin/tools/opm-$OPM_VERSION}
SCORECARD_TEST=${SCORECARD_TEST:-$root/bin/tools/scorecard-test-$OPERATOR_SDK_VERSION}
REGISTRY=${REGISTRY:-$root/bin/registry/v3.0.0/registry}
OLM_BINS=(olm catalog package-server copy-content cpb) # bin/tools/<name>-$OLM_VERSION

IMAGE_TAG_BASE=${IMAGE_TAG_BASE:-quay.io/quartet-operator/quartet}
IMG=${IMG:-$IMAGE_TAG_BASE:v0.3.0}
BUNDLE_IMG=${BUNDLE_IMG:-$IMAGE_TAG_BASE-bundle:v0.3.0}
CATALOG_IMG=${CATALOG_IMG:-$IMAGE_TAG_BASE-catalog:v0.3.0}
# The releases ("<version> <commit>", oldest first) and the reconstructed first version.
RELEASES_FILE=${RELEASES_FILE:-hack/olm/releases}
FIRST_VERSION=0.1.0
IMG_FIRST=$IMAGE_TAG_BASE:v$FIRST_VERSION
BUNDLE_IMG_FIRST=$IMAGE_TAG_BASE-bundle:v$FIRST_VERSION
BUNDLE_FIRST_DIR=hack/olm/bundles/quartet.v$FIRST_VERSION
OPM_IMG=${OPM_IMG:-quay.io/operator-framework/opm:$OPM_VERSION}
OLM_IMG=${OLM_IMG:-quay.io/operator-framework/olm:$OLM_VERSION}
REGISTRY_IMG=${REGISTRY_IMG:-docker.io/library/registry:3.0.0}
MIRROR_REGISTRY_IMG=${MIRROR_REGISTRY_IMG:-quay.io/quartet-operator/mirror-registry:v0.3.0}
PAUSE_IMG=${PAUSE_IMG:-registry.k8s.io/pause:3.10}
SCORECARD_TEST_IMG=${SCORECARD_TEST_IMG:-quay.io/operator-framework/scorecard-test:$OPERATOR_SDK_VERSION}
SCORECARD_UNTAR_IMG=${SCORECARD_UNTAR_IMG:-quay.io/operator-framework/scorecard-untar:quartet}
E2E_IMG=${E2E_IMG:-quay.io/quartet-operator/e2e:dev}
COREDNS_VERSION=${COREDNS_VERSION:-v1.12.4}
COREDNS=${COREDNS:-$root/bin/tools/coredns-$COREDNS_VERSION}
COREDNS_IMG=${COREDNS_IMG:-registry.k8s.io/coredns/coredns:$COREDNS_VERSION}
# operator-sdk run bundle hard-codes this image (no flag) for its catalog pod's init container,
# which runs sh, cat and gzip: a busybox stand-in under that name.
UBI_IMG=${UBI_IMG:-registry.access.redhat.com/ubi9/ubi:9.7}
# An empty file-based catalog (opm + an empty /configs + the FBC label): the index image
# `operator-sdk run bundle --index-image` adds a bundle to (its default, opm:latest, must be
# pulled from quay.io by the operator-sdk process itself).
EMPTY_INDEX_IMG=${EMPTY_INDEX_IMG:-quay.io/quartet-operator/empty-index:$OPM_VERSION}

out=${QUARTET_IMAGES_DIR:-$root/bin/images}
store=$out/registry
work=$out/work
list=$out/images.txt
PATH_ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

mkdir -p "$out"
release_versions=() release_commits=()
while read -r v c; do
  release_versions+=("$v")
  release_commits+=("$c")
done < <(awk '!/^#/ && NF { print $1, $2 }' "$RELEASES_FILE")
if [ ${#release_versions[@]} -eq 0 ]; then
  echo "images: $RELEASES_FILE lists no release" >&2
  exit 1
fi

# Everything this script leaves running or checked out goes on exit, failed or not.
regpid=
worktrees=()
cleanup() {
  if [ -n "$regpid" ]; then
    kill "$regpid" 2>/dev/null || true
    wait "$regpid" 2>/dev/null || true
    regpid=
  fi
  local wt
  for wt in "${worktrees[@]}"; do
    if [ -e "$wt" ]; then
      git worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
    fi
  done
  [ ${#worktrees[@]} -eq 0 ] || git worktree prune
  worktrees=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM # the EXIT trap runs on these too

# One build at a time (make cluster-up NODE=real runs make images too).
exec 9>"$out/.lock"
if ! flock -n 9; then
  say "waiting for another make images to finish"
  flock 9
fi

missing=()
for f in "$CRANE" "$GRPC_HEALTH_PROBE" "$OPM" "$SCORECARD_TEST" "$REGISTRY" "$COREDNS"; do [ -x "$f" ] || missing+=("$f"); done
for b in "${OLM_BINS[@]}"; do [ -x "$root/bin/tools/$b-$OLM_VERSION" ] || missing+=("$root/bin/tools/$b-$OLM_VERSION"); done
if [ ${#missing[@]} -gt 0 ]; then
  printf 'images: missing %s (run make images, which builds them)\n' "${missing[@]}" >&2
  exit 1
fi
# The opm image is FROM scratch: opm must be the static build of hack/build-olm-tools.sh (an
# older bin/tools/opm-* may be a dynamic one; it is rebuilt then).
if ldd "$OPM" >/dev/null 2>&1; then
  if [ "$OPM" = "$root/bin/tools/opm-$OPM_VERSION" ]; then
    say "$OPM is not statically linked: rebuilding it"
    rm -f "$OPM"
    OPM_VERSION=$OPM_VERSION hack/build-olm-tools.sh opm
  else
    echo "images: $OPM is not statically linked (see hack/build-olm-tools.sh)" >&2
    exit 1
  fi
fi
mkdir -p "$work" "$store"

# --- Debian packages: fetched once into bin/images/work/debs/<pkg>/, never installed ---------
deb() { # deb PACKAGE: prints the directory the package is unpacked into
  local pkg=$1 dir=$work/debs/$1
  if [ ! -d "$dir/root" ]; then
    mkdir -p "$dir"
    if ! compgen -G "$dir/*.deb" >/dev/null; then
      if ! apt-cache show "$pkg" >/dev/null 2>&1; then apt-get update -qq >&2; fi
      if ! (cd "$dir" && apt-get download -qq "$pkg" 2>"$dir/apt.log") || ! compgen -G "$dir/*.deb" >/dev/null; then
        cat "$dir/apt.log" >&2
        echo "images: apt-get download $pkg failed" >&2
        exit 1
      fi
    fi
    rm -rf "$dir/root.tmp"
    dpkg-deb -x "$dir"/*.deb "$dir/root.tmp"
    mv "$dir/root.tmp" "$dir/root"
  fi
  echo "$dir/root"
}
busybox_root=$(deb busybox-static)
cacerts_root=$(deb ca-certificates)
for d in "$work"/debs/*/; do say "debian $(basename "$d") $(dpkg-deb -f "$d"/*.deb Version)"; done

# --- Go binaries of this repository (the Go build cache makes unchanged rebuilds cheap) -------
gobuild() { # gobuild OUT PACKAGE: static, trimmed, no VCS stamp (as the Dockerfile's build)
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -buildvcs=false -trimpath -ldflags="-s -w" -o "$1" "$2"
}
mkdir -p "$work/bin"
say "building manager, mirror-registry, pause, fakerates, httpget"
gobuild "$work/bin/manager" .
(cd cmd/mirror-registry && gobuild "$work/bin/mirror-registry" .) # a Go module of its own
gobuild "$work/bin/pause" ./hack/images/pause
gobuild "$work/bin/fakerates" ./hack/fakerates
gobuild "$work/bin/httpget" ./hack/httpget

# release_build VERSION COMMIT: the release's manager, built in a temporary worktree of COMMIT
# with the same command, and its Dockerfile, bundle.Dockerfile and LICENSE, into
# $work/release-vVERSION/.
release_build() {
  local v=$1 c=$2 dir=$work/release-v$1 wt=$work/worktree-v$1 since=$SECONDS
  if ! git cat-file -e "$c^{commit}" 2>/dev/null; then
    echo "images: release $v's commit $c is not in this clone (a shallow clone? git fetch --unshallow)" >&2
    exit 1
  fi
  if [ -e "$wt" ]; then git worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"; fi
  git worktree prune
  rm -rf "$dir"
  mkdir -p "$dir"
  worktrees+=("$wt")
  git worktree add --quiet --detach "$wt" "$c"
  (cd "$wt" && gobuild "$dir/manager" .)
  cp "$wt/Dockerfile" "$wt/bundle.Dockerfile" "$dir/"
  if [ -f "$wt/LICENSE" ]; then cp "$wt/LICENSE" "$dir/LICENSE"; fi
  git worktree remove --force "$wt"
  git worktree prune
  say "built release $v's manager from ${c:0:12} in a temporary worktree ($((SECONDS - since))s)"
}
for i in "${!release_versions[@]}"; do
  release_build "${release_versions[$i]}" "${release_commits[$i]}"
done
worktrees=()

# --- layers: a staging tree per layer, normalised, then GNU tar ------------------------------
tarflags=(--format=gnu --sort=name --mtime=@0 --numeric-owner --no-acls --no-selinux --no-xattrs)
mkdir -p "$work/layers"
L() { echo "$work/layers/$1.tar"; }
stage() { # stage NAME: prints a fresh, empty staging directory
  rm -rf "$work/stage/$1"
  mkdir -p "$work/stage/$1"
  echo "$work/stage/$1"
}
normalize() { # normalize DIR: directories 0755, files 0755 if owner-executable else 0644
  find "$1" -type d -exec chmod 0755 {} +
  find "$1" -type f -perm -u+x -exec chmod 0755 {} +
  find "$1" -type f ! -perm -u+x -exec chmod 0644 {} +
}
layer() { # layer NAME [PATH:UID:GID]...: tars stage/NAME to layers/NAME.tar; entries 0:0 except PATHs
  local dir=$work/stage/$1 tarball=$work/layers/$1.tar s p uid gid
  shift
  local -a top excl=()
  mapfile -t top < <(find "$dir" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort)
  for s in "$@"; do excl+=("--exclude=${s%%:*}"); done
  rm -f "$tarball"
  tar "${tarflags[@]}" --create --file="$tarball" --directory="$dir" --owner=0 --group=0 "${excl[@]}" -- "${top[@]}"
  for s in "$@"; do
    IFS=: read -r p uid gid <<<"$s"
    tar "${tarflags[@]}" --append --file="$tarball" --directory="$dir" --owner="$uid" --group="$gid" --no-recursion -- "$p"
  done
}

passwd_base='root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin'

# base: what gcr.io/distroless/static:nonroot gives the manager: root, nobody and nonroot (65532)
# users, CA certificates (Debian's ca-certificates, concatenated as update-ca-certificates
# does), nsswitch.conf, /tmp 1777, /root 0700 and /home/nonroot 0700 owned by 65532.
d=$(stage base)
mkdir -p "$d/etc/ssl/certs" "$d/tmp" "$d/root" "$d/home/nonroot"
echo "$passwd_base" >"$d/etc/passwd"
printf '%s\n' root:x:0: nobody:x:65534: tty:x:5: staff:x:50: nonroot:x:65532: >"$d/etc/group"
echo 'hosts: files dns' >"$d/etc/nsswitch.conf"
for crt in $(cd "$cacerts_root/usr/share/ca-certificates" && find . -name '*.crt' | sort); do
  awk 1 "$cacerts_root/usr/share/ca-certificates/$crt" # each ends with a newline
done >"$d/etc/ssl/certs/ca-certificates.crt"
normalize "$d"
chmod 1777 "$d/tmp"
chmod 0700 "$d/root" "$d/home/nonroot"
layer base home/nonroot:65532:65532

# busybox: Debian's static busybox with every applet (sh, cp, tar, gzip, wget, id, ...) as a
# symlink in /bin.
d=$(stage busybox)
mkdir -p "$d/bin"
cp "$busybox_root/bin/busybox" "$d/bin/busybox"
for a in $("$busybox_root/bin/busybox" --list); do
  [ "$a" = busybox ] || ln -s busybox "$d/bin/$a"
done
normalize "$d"
layer busybox

# manager: the Dockerfile's COPY LICENSE /licenses/LICENSE and COPY --from=builder
# /workspace/manager .
d=$(stage manager)
mkdir -p "$d/licenses"
cp LICENSE "$d/licenses/LICENSE"
cp "$work/bin/manager" "$d/manager"
normalize "$d"
layer manager

# mirror-registry: cmd/mirror-registry/Dockerfile's COPY LICENSE /licenses/LICENSE and
# COPY --from=builder /workspace/mirror-registry .
d=$(stage mirror-registry)
mkdir -p "$d/licenses"
cp LICENSE "$d/licenses/LICENSE"
cp "$work/bin/mirror-registry" "$d/mirror-registry"
normalize "$d"
layer mirror-registry

# The releases' managers, as each release's Dockerfile copies it (with /licenses/LICENSE only
# where that Dockerfile has the COPY).
for v in "${release_versions[@]}"; do
  d=$(stage "manager-v$v")
  if grep -q '^COPY LICENSE /licenses/LICENSE$' "$work/release-v$v/Dockerfile"; then
    mkdir -p "$d/licenses"
    cp "$work/release-v$v/LICENSE" "$d/licenses/LICENSE"
  fi
  cp "$work/release-v$v/manager" "$d/manager"
  normalize "$d"
  layer "manager-v$v"
done

# bundles: bundle.Dockerfile's three COPYs, for the current version (bundle/), each release
# (its frozen bundle) and v0.1.0 (reconstructed), all in hack/olm/bundles/.
bundle_layer() { # bundle_layer NAME SOURCE-DIR
  local d
  d=$(stage "$1")
  mkdir -p "$d/manifests" "$d/metadata" "$d/tests/scorecard"
  cp -R "$2/manifests/." "$d/manifests/"
  cp -R "$2/metadata/." "$d/metadata/"
  cp -R "$2/tests/scorecard/." "$d/tests/scorecard/"
  normalize "$d"
  layer "$1"
}
bundle_layer bundle-current bundle
for v in "${release_versions[@]}"; do
  bundle_layer "bundle-v$v" "hack/olm/bundles/quartet.v$v"
done
bundle_layer bundle-first "$BUNDLE_FIRST_DIR"

# opm: /bin/opm (static) and /bin/grpc_health_probe, as operator-registry's opm image.
d=$(stage opm)
mkdir -p "$d/bin"
cp "$OPM" "$d/bin/opm"
cp "$GRPC_HEALTH_PROBE" "$d/bin/grpc_health_probe"
normalize "$d"
layer opm

# catalog: catalog.Dockerfile's ADD catalog /configs and the serve cache that its builder stage
# makes with opm serve --cache-only (here with the same static opm, at /configs's final modes).
d=$(stage catalog-configs)
mkdir -p "$d/configs"
cp -R catalog/. "$d/configs/"
normalize "$d"
layer catalog-configs
d=$(stage empty-configs)
mkdir -p "$d/configs"
normalize "$d"
layer empty-configs
# opm's pogreb cache is not reproducible (pogreb draws a random hash seed from crypto/rand for
# each new database), so a cache made from the same opm and the same /configs is kept and reused.
cache_key=$(cat "$OPM" "$(L catalog-configs)" | sha256sum | cut -d' ' -f1)
if [ -f "$(L catalog-cache)" ] && [ "$(cat "$work/catalog-cache.key" 2>/dev/null)" = "$cache_key" ]; then
  say "catalog serve cache: opm and /configs unchanged, reusing the previous one"
else
  d=$(stage catalog-cache)
  mkdir -p "$d/tmp"
  chmod 1777 "$d/tmp"
  # On the host, opm serve would create /dev/termination-log and listen on localhost:6060
  # (pprof) by default: both are turned away.
  "$OPM" serve "$work/stage/catalog-configs/configs" --cache-dir="$d/tmp/cache" --cache-only \
    --termination-log="$work/opm-termination.log" --pprof-addr= >"$work/opm-cache.log" 2>&1 ||
    { cat "$work/opm-cache.log" >&2; exit 1; }
  layer catalog-cache
  echo "$cache_key" >"$work/catalog-cache.key"
fi

# olm: OLM's Dockerfile: its five binaries in /bin, and /bin/cp (busybox) for bundle-unpack Jobs.
d=$(stage olm)
mkdir -p "$d/bin"
for b in "${OLM_BINS[@]}"; do cp "$root/bin/tools/$b-$OLM_VERSION" "$d/bin/$b"; done
normalize "$d"
layer olm

# registry: the distribution registry and the distribution module's example configuration.
regcfg=$(cd hack/tools/registry && go list -m -f '{{.Dir}}' github.com/distribution/distribution/v3)/cmd/registry/config-example.yml
d=$(stage registry)
mkdir -p "$d/bin" "$d/etc/distribution" "$d/var/lib/registry"
cp "$REGISTRY" "$d/bin/registry"
cp "$regcfg" "$d/etc/distribution/config.yml"
normalize "$d"
layer registry

# pause: /pause only.
d=$(stage pause)
cp "$work/bin/pause" "$d/pause"
normalize "$d"
layer pause

# scorecard-test and scorecard-untar: their Dockerfiles append a user line to /etc/passwd and
# create WORKDIR ${HOME}.
d=$(stage scorecard-test)
mkdir -p "$d/etc" "$d/opt/scorecard-test" "$d/usr/local/bin"
printf '%s\n%s\n' "$passwd_base" 'scorecard-test:x:1001:0:scorecard-test user:/opt/scorecard-test:/sbin/nologin' >"$d/etc/passwd"
cp "$SCORECARD_TEST" "$d/usr/local/bin/scorecard-test"
normalize "$d"
layer scorecard-test
d=$(stage scorecard-untar)
mkdir -p "$d/etc" "$d/opt/scorecard-untar"
printf '%s\n%s\n' "$passwd_base" 'scorecard-untar:x:1001:0:scorecard-untar user:/opt/scorecard-untar:/sbin/nologin' >"$d/etc/passwd"
normalize "$d"
layer scorecard-untar

# e2e: fakerates and httpget (busybox's static wget crashes) next to busybox.
d=$(stage e2e)
mkdir -p "$d/bin"
cp "$work/bin/fakerates" "$d/bin/fakerates"
cp "$work/bin/httpget" "$d/bin/httpget"
normalize "$d"
layer e2e

# coredns: the real node's cluster DNS (hack/build-node-tools.sh), as upstream's FROM scratch.
d=$(stage coredns)
cp "$COREDNS" "$d/coredns"
normalize "$d"
layer coredns

say "layers: $(du -sch "$work"/layers/*.tar | tail -1 | cut -f1) uncompressed"

# --- registry on a free loopback port, storage bin/images/registry ---------------------------
cat >"$work/registry.yml" <<EOF
version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $store
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:0
EOF
"$REGISTRY" serve "$work/registry.yml" >"$work/registry.log" 2>&1 9>&- & # 9: the lock stays ours
regpid=$!
port=
for _ in $(seq 100); do
  port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$work/registry.log" | head -1 | cut -d: -f2 || true)
  [ -n "$port" ] && break
  kill -0 "$regpid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  cat "$work/registry.log" >&2
  echo "images: the registry did not start" >&2
  exit 1
fi
reg=127.0.0.1:$port
say "registry $reg, storage $store"

: >"$work/crane.log"
cr() { # crane, its progress lines into bin/images/work/crane.log (shown when it fails)
  if ! "$CRANE" --insecure "$@" 2>>"$work/crane.log"; then
    tail -20 "$work/crane.log" >&2
    echo "images: crane $* failed" >&2
    return 1
  fi
}
loc() { echo "$reg/${1#*/}"; } # published name -> local name (host dropped)
scratch() { # scratch NAME LAYERS -- CRANE-MUTATE-FLAGS...: a FROM-scratch image
  local ref=$1 args=()
  shift
  while [ "$1" != -- ]; do args+=(-f "$(L "$1")"); shift; done
  shift
  cr append --oci-empty-base "${args[@]}" -t "$(loc "$ref")" >/dev/null
  cr mutate "$(loc "$ref")" --set-platform linux/amd64 "$@" -t "$(loc "$ref")" >/dev/null
  say "pushed $ref"
}
dockerfile_labels() { # dockerfile_labels FILE: --label flags from its LABEL lines (one k=v each)
  local kv
  grep '^LABEL ' "$1" | while read -r _ kv; do
    if [[ $kv != *=* || $kv == *[[:space:]\"\',]* ]]; then
      echo "images: $1: unsupported LABEL $kv" >&2
      exit 1
    fi
    echo "--label=$kv"
  done
}
catalog_labels=$(dockerfile_labels catalog.Dockerfile)
bundle_labels=$(dockerfile_labels bundle.Dockerfile)

# Upstream's opm image has a shell (distroless:debug's busybox): `operator-sdk run bundle`
# starts its catalog pod with `sh -c` in it.
scratch "$OPM_IMG" base busybox opm -- --entrypoint=/bin/opm --user=1001 --env="$PATH_ENV"
# shellcheck disable=SC2086 # one --label flag per word
cr mutate "$(loc "$OPM_IMG")" --append="$(L catalog-configs)" --append="$(L catalog-cache)" \
  --entrypoint=/bin/opm --cmd=serve --cmd=/configs --cmd=--cache-dir=/tmp/cache \
  $catalog_labels -t "$(loc "$CATALOG_IMG")" >/dev/null
say "pushed $CATALOG_IMG"
cr mutate "$(loc "$OPM_IMG")" --append="$(L empty-configs)" --entrypoint=/bin/opm --cmd=serve --cmd=/configs \
  --label=operators.operatorframework.io.index.configs.v1=/configs -t "$(loc "$EMPTY_INDEX_IMG")" >/dev/null
say "pushed $EMPTY_INDEX_IMG"
manager_config=(--entrypoint=/manager --user=65532:65532 --workdir=/ --env="$PATH_ENV" --env=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt)
scratch "$IMG" base manager -- "${manager_config[@]}"
scratch "$MIRROR_REGISTRY_IMG" base mirror-registry -- --entrypoint=/mirror-registry --user=65532:65532 --workdir=/ \
  --env="$PATH_ENV" --env=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt --exposed-ports=5000/tcp
# The labels (no spaces, checked above) are split into one flag each on purpose.
# shellcheck disable=SC2086
scratch "$BUNDLE_IMG" bundle-current -- $bundle_labels
release_images=()
for v in "${release_versions[@]}"; do
  scratch "$IMAGE_TAG_BASE:v$v" base "manager-v$v" -- "${manager_config[@]}"
  release_bundle_labels=$(dockerfile_labels "$work/release-v$v/bundle.Dockerfile")
  # shellcheck disable=SC2086
  scratch "$IMAGE_TAG_BASE-bundle:v$v" "bundle-v$v" -- $release_bundle_labels
  release_images+=("$IMAGE_TAG_BASE:v$v" "$IMAGE_TAG_BASE-bundle:v$v")
done
# v0.1.0: the oldest release's operator image, and the reconstructed bundle with its labels.
cr tag "$(loc "$IMAGE_TAG_BASE:v${release_versions[0]}")" "${IMG_FIRST##*:}"
say "tagged $IMG_FIRST (= $IMAGE_TAG_BASE:v${release_versions[0]})"
first_bundle_labels=$(dockerfile_labels "$work/release-v${release_versions[0]}/bundle.Dockerfile")
# shellcheck disable=SC2086
scratch "$BUNDLE_IMG_FIRST" bundle-first -- $first_bundle_labels
scratch "$OLM_IMG" base busybox olm -- --entrypoint=/bin/olm --user=1001 --workdir=/ \
  --exposed-ports=8080/tcp --exposed-ports=5443/tcp --label=stage=olm --env="$PATH_ENV"
scratch "$REGISTRY_IMG" base registry -- --entrypoint=registry --cmd=serve --cmd=/etc/distribution/config.yml \
  --exposed-ports=5000/tcp --env="$PATH_ENV"
scratch "$PAUSE_IMG" pause -- --entrypoint=/pause --user=65535:65535
scratch "$SCORECARD_TEST_IMG" base scorecard-test -- --entrypoint=/usr/local/bin/scorecard-test \
  --user=1001 --workdir=/opt/scorecard-test --env="$PATH_ENV" --env=HOME=/opt/scorecard-test \
  --env=USER_NAME=scorecard-test --env=USER_UID=1001
scratch "$SCORECARD_UNTAR_IMG" base busybox scorecard-untar -- --cmd=sh \
  --user=1001 --workdir=/opt/scorecard-untar --env="$PATH_ENV" --env=HOME=/opt/scorecard-untar \
  --env=USER_NAME=scorecard-untar --env=USER_UID=1001
scratch "$E2E_IMG" base busybox e2e -- --cmd=sh --user=65532:65532 --workdir=/ --env="$PATH_ENV"
scratch "$COREDNS_IMG" coredns -- --entrypoint=/coredns --user=65532:65532 --exposed-ports=53/udp --exposed-ports=53/tcp
scratch "$UBI_IMG" base busybox -- --cmd=sh --env="$PATH_ENV"

# --- the list, and the digests compared with the previous run --------------------------------
new=$work/images.txt.new
: >"$new.unsorted"
for ref in "$OPM_IMG" "$CATALOG_IMG" "$IMG" "$MIRROR_REGISTRY_IMG" "$IMG_FIRST" "$BUNDLE_IMG" "$BUNDLE_IMG_FIRST" "${release_images[@]}" "$OLM_IMG" \
  "$REGISTRY_IMG" "$PAUSE_IMG" "$SCORECARD_TEST_IMG" "$SCORECARD_UNTAR_IMG" "$E2E_IMG" "$COREDNS_IMG" "$UBI_IMG" "$EMPTY_INDEX_IMG"; do
  dig=$(cr digest "$(loc "$ref")")
  echo "$ref $dig" >>"$new.unsorted"
done
sort "$new.unsorted" >"$new"
rm "$new.unsorted"
cleanup

changed=0 had_prev=
if [ -f "$list" ]; then
  had_prev=1
  while read -r ref dig; do
    old=$(awk -v r="$ref" '$1 == r { print $2 }' "$list")
    if [ "$old" != "$dig" ]; then
      changed=$((changed + 1))
      say "CHANGED $ref ${old:-(new)} -> $dig"
    fi
  done <"$new"
  [ $changed -eq 0 ] && say "all $(wc -l <"$new") digests equal the previous run's ($list)"
fi
mv "$new" "$list"
say "wrote $list ($(du -sh "$store" | cut -f1) in $store)"
cat "$list"
if [ -n "${IMAGES_CHECK:-}" ]; then
  if [ -z "$had_prev" ]; then
    echo "images: IMAGES_CHECK: no previous $list to compare with" >&2
    exit 1
  fi
  if [ $changed -ne 0 ]; then
    echo "images: $changed digests differ from the previous build: not reproducible, or its inputs changed" >&2
    exit 1
  fi
fi
