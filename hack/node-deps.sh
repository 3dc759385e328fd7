#!/usr/bin/env bash
# Installs the Debian packages a real node needs (containerd, runc, the CNI plugins,
# iptables, conntrack), only when one is missing. Run by `make node-deps`, which
# `make cluster-up NODE=real` and the real-node tests depend on. Needs root.
set -euo pipefail
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v nsenter >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
if [ ${#need[@]} -eq 0 ]; then
  echo "node-deps: containerd $(containerd --version | awk '{print $3}'), runc, CNI plugins, iptables, conntrack present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "node-deps: missing ${need[*]}; installing them needs root" >&2
  exit 1
fi
echo "node-deps: installing ${need[*]}"
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
# Bounded: a stalled mirror fails here, naming apt, instead of hanging the caller.
timeout --kill-after=10 300 apt-get update -qq
timeout --kill-after=10 600 apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "node-deps: installed in $((SECONDS - start))s"
