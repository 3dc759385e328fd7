#!/usr/bin/env bash
# Builds the real control plane from the Go module proxy into bin/k8s/<version>/:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, plus kwok into
# bin/kwok/<version>/; with the argument "node" also the real node's kubelet and kube-proxy,
# with "only-node" only those two, with "no-kwok" without kwok (a real node does not use it)
# and with "only-kwok" kwok alone. Skips every binary that already exists, so only a
# fresh machine pays the cold build (about 10 minutes on 2 cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The release is the k8s.io/kubernetes requirement the binaries are built from; the
# Makefile reads the same line and passes it as K8S_VERSION.
gomod="$root/hack/tools/controlplane/go.mod"
required=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$gomod")
K8S_VERSION=${K8S_VERSION:-$required}
if [ -z "$required" ] || [ "$K8S_VERSION" != "$required" ]; then
  echo "controlplane: K8S_VERSION=$K8S_VERSION, but $gomod requires k8s.io/kubernetes ${required:-(none)}" >&2
  exit 1
fi
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
k8s_dir="$root/bin/k8s/$K8S_VERSION"
kwok_dir="$root/bin/kwok/$KWOK_VERSION"
mkdir -p "$k8s_dir" "$kwok_dir"

minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ver_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ver_flags="$ver_flags -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# name=package of each binary; with "node" (make node-tools, or make controlplane WITH_NODE=1)
# also the real node's kubelet and kube-proxy, from the same module and version.
bins=(etcd=go.etcd.io/etcd/server/v3 kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler kubectl=k8s.io/kubernetes/cmd/kubectl)
only_node="" with_kwok=1
for arg in "$@"; do
  case $arg in
  node) bins+=(kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy) ;;
  only-node) only_node=1 with_kwok=""; bins=(kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy) ;;
  no-kwok) with_kwok="" ;;
  only-kwok) bins=() ;;
  *) echo "controlplane: unknown argument $arg (node, only-node, no-kwok, only-kwok)" >&2; exit 2 ;;
  esac
done

# kwok (a module of its own, sharing no compiled package with the rest) builds beside them.
kwok_pid=""
if [ -n "$with_kwok" ]; then
  if [ -x "$kwok_dir/kwok" ]; then
    echo "controlplane: kwok present"
  else
    echo "controlplane: building kwok $KWOK_VERSION"
    (
      start=$SECONDS
      GOBIN="$kwok_dir" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
      echo "controlplane: built kwok in $((SECONDS - start))s"
    ) &
    kwok_pid=$!
  fi
fi

# One go build of every missing binary: the packages they share compile once, and the links
# run beside the compiles instead of one after another. go build -o DIR/ names each binary
# after its package path's last element (a /vN suffix dropped): etcd's is "server".
missing=() names=()
for b in "${bins[@]}"; do
  name=${b%%=*} pkg=${b#*=}
  if [ -x "$k8s_dir/$name" ]; then echo "controlplane: $name present"; continue; fi
  missing+=("$pkg") names+=("$name")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "controlplane: building ${names[*]}"
  start=$SECONDS
  tmp=$(mktemp -d "$k8s_dir/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$root/hack/tools/controlplane" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ver_flags" -o "$tmp/" "${missing[@]}")
  for i in "${!missing[@]}"; do
    exe=${missing[$i]}
    if [[ $exe =~ /v[0-9]+$ ]]; then exe=${exe%/v*}; fi
    mv "$tmp/${exe##*/}" "$k8s_dir/${names[$i]}"
  done
  echo "controlplane: built ${names[*]} in $((SECONDS - start))s"
fi
if [ -n "$kwok_pid" ]; then wait "$kwok_pid"; fi
[ -z "$with_kwok" ] && exit 0

# kwok's stage definitions ship in its module; keep a copy beside the binary.
if [ ! -f "$kwok_dir/stages.yaml" ]; then
  mod=$(cd "$root/hack/tools/controlplane" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  {
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      echo "---"; cat "$mod/kustomize/stage/$f"
    done
  } > "$kwok_dir/stages.yaml.tmp"
  mv "$kwok_dir/stages.yaml.tmp" "$kwok_dir/stages.yaml"
  echo "controlplane: wrote kwok stages"
fi
