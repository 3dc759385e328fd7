#!/usr/bin/env bash
# make demo: start a private local cluster (etcd, kube-apiserver, controller-manager,
# scheduler, kwok with one fake node), install the CRDs, run the manager, apply the samples
# and show what each controller did. Ctrl-C stops everything it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir="$root/bin/demo-cluster"
# make demo passes KUBECTL (bin/k8s/<K8S_VERSION>/kubectl, built by make controlplane).
kubectl=${KUBECTL:?run make demo: KUBECTL is not set}
export KUBECONFIG="$dir/kubeconfig"
pids=()

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() {
  trap - EXIT INT TERM
  say "stopping the demo"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  go run ./hack/cluster -dir "$dir" down || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting a private local cluster in $dir"
go run ./hack/cluster -dir "$dir" down >/dev/null 2>&1 || true
go run ./hack/cluster -dir "$dir" up
"$kubectl" get nodes -o wide

say "installing the CRDs"
"$kubectl" apply --server-side -f config/crd/bases >/dev/null
"$kubectl" wait --for condition=Established crd --all --timeout=60s

say "building the manager and the IMITATION exchange-rate server"
go build -o bin/manager .
go build -o bin/fakerates ./hack/fakerates
rates_log="$dir/logs/fakerates.log"
bin/fakerates -addr 127.0.0.1:0 >"$rates_log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q 'http://' "$rates_log" 2>/dev/null && break; sleep 0.1; done
rates_url=$(grep -o 'http://[0-9.:]*' "$rates_log" | head -1)
echo "The demo cluster has no internet: ExchangeRates are served by a LOCAL IMITATION of the"
echo "ECB feed at $rates_url (fixed demo rates, NOT real market data)."

say "running the manager (log: $dir/logs/manager.log)"
"$kubectl" create namespace quartet-system --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
# kwok's pods serve nothing: the mirror's probes would only say so (make demo NODE=real runs them).
POD_NAMESPACE=quartet-system bin/manager --metrics-bind-address=0 --health-probe-bind-address=0 \
  --exchangerate-source=ecb --exchangerate-url="$rates_url" --registrymirror-probes=false \
  >"$dir/logs/manager.log" 2>&1 &
pids+=($!)
sleep 2
grep -E 'Registered controller|not implemented' "$dir/logs/manager.log" || true

say "preparing something to act on"
"$kubectl" apply -f - <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: chaos-demo
  labels: {quartet-demo/chaos: "true"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: chaos-demo}
spec:
  replicas: 12
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: chaos-demo}
data: {greeting: hello, colour: blue}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shared-settings
  namespace: default
  labels: {copyrator: "true"}
data: {log-level: info}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: demo-cache}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/quartet-demo-cache}
EOF

say "applying the samples"
for f in config/samples/operators_v1_exchangerate.yaml config/samples/flant_v1_copyratorrule.yaml \
         config/samples/mirrors_v1alpha1_registrymirror.yaml; do
  echo "--- $f"; "$kubectl" apply -n default -f "$f"
done
echo "--- config/samples/blackadder_v1beta1_chaosagent.yaml, narrowed to namespaces labelled quartet-demo/chaos=true"
echo "    so the demo's chaos stays in chaos-demo (the sample as written targets every namespace but kube-system)"
sed 's/^spec:/spec:\n  namespaceSelector: {matchLabels: {quartet-demo\/chaos: "true"}}/' \
  config/samples/blackadder_v1beta1_chaosagent.yaml | "$kubectl" apply -f -

show() {
  say "ExchangeRate: the rate ConfigMap (IMITATION upstream)"
  "$kubectl" get exchangerates -n default
  "$kubectl" get configmap exchange-rate-usd -n default -o jsonpath='{.data}{"\n"}' 2>/dev/null || echo "(not yet)"
  say "CopyratorRule: copies of default/shared-settings"
  "$kubectl" get copyrators -n default
  "$kubectl" get configmaps -A -l copyrator.flant.com/rule=main-rule 2>/dev/null || true
  say "RegistryMirror: the six objects and the mirror's status"
  "$kubectl" get registrymirrors -n default
  "$kubectl" get services,statefulsets,daemonsets,pvc,configmaps -n default -l app.kubernetes.io/instance=docker-hub 2>/dev/null | grep -v '^service/kubernetes' || true
  say "ChaosAgent: what the agent did"
  "$kubectl" get chaosagents
  "$kubectl" get deployment web -n chaos-demo
  "$kubectl" get configmap settings -n chaos-demo -o jsonpath='{.data}{"\n"}' | cut -c1-160
  "$kubectl" get events -n chaos-demo --sort-by=.metadata.creationTimestamp 2>/dev/null | tail -5
}
sleep 5
show
say "the demo keeps running and refreshes every 30 s; press Ctrl-C to stop everything"
while true; do sleep 30; show; done
