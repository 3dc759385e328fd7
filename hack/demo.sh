#!/usr/bin/env bash
# make demo: start a private local cluster (etcd, kube-apiserver, controller-manager,
# scheduler, kwok with one fake node), install the CRDs, run the manager, take the cluster
# admin's consent steps (copies everywhere, the mirror's node access), apply the samples and
# show what each controller did. Ctrl-C stops everything it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir="$root/bin/demo-cluster"
# make demo passes KUBECTL (bin/k8s/<K8S_VERSION>/kubectl, built by make controlplane).
kubectl=${KUBECTL:?run make demo: KUBECTL is not set}
export KUBECONFIG="$dir/kubeconfig"
pids=()

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# run shows a kubectl command as an admin types it, then runs it.
run() { echo "\$ kubectl $*"; "$kubectl" "$@"; }
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

say "installing the CRDs and the ClusterRole quartet-copyrator-target (consent to copies; every install ships it)"
"$kubectl" apply --server-side -f config/crd/bases >/dev/null
"$kubectl" wait --for condition=Established crd --all --timeout=60s
# The installs name it with config/default's namePrefix.
sed 's/^  name: copyrator-target$/  name: quartet-copyrator-target/' config/rbac/copyrator_target_role.yaml | "$kubectl" apply -f -

say "building the manager and the IMITATION exchange-rate server"
go build -o bin/manager .
go build -o bin/fakerates ./hack/fakerates
rates_log="$dir/logs/fakerates.log"
bin/fakerates -addr 127.0.0.1:0 >"$rates_log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q 'http://' "$rates_log" 2>/dev/null && break; sleep 0.1; done
rates_url=$(grep -o 'http://[0-9.:]*' "$rates_log" | head -1)
echo "The demo cluster has no internet: ExchangeRates are served by a LOCAL IMITATION of the"
echo "ECB feed and of Frankfurter's API at $rates_url (fixed demo rates, NOT real market data)."

say "running the manager (log: $dir/logs/manager.log)"
"$kubectl" create namespace quartet-system --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
# kwok's pods serve nothing: the mirror's probes would only say so (make demo NODE=real runs them).
POD_NAMESPACE=quartet-system bin/manager --metrics-bind-address=0 --health-probe-bind-address=0 \
  --exchangerate-source=ecb --exchangerate-url="$rates_url" --exchangerate-frankfurter-url="$rates_url" --registrymirror-probes=false \
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
metadata: {name: team-a, labels: {team: web}}
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
kind: Namespace
metadata: {name: registry-mirrors}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: demo-cache}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/quartet-demo-cache}
EOF
# A TLS Secret another tool made (nobody labels it for Copyrator): the sample ingress-ca
# copies only its public half, by name. A throwaway self-signed certificate, made now (the
# API server warns about a kubernetes.io/tls Secret whose data is not PEM).
tlsdir=$(mktemp -d)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 -subj /CN=shop.demo \
  -keyout "$tlsdir/tls.key" -out "$tlsdir/tls.crt" 2>/dev/null
"$kubectl" apply -f - <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: ingress-tls
  namespace: default
  labels: {app.kubernetes.io/part-of: shop}
type: kubernetes.io/tls
data:
  tls.crt: $(base64 -w0 <"$tlsdir/tls.crt")
  tls.key: $(base64 -w0 <"$tlsdir/tls.key")
  ca.crt: $(base64 -w0 <"$tlsdir/tls.crt")
EOF
rm -rf "$tlsdir"

say "the cluster admin's consent: what the samples may do beyond their own namespace"
echo "The sample CopyratorRule main-rule (namespace default) acts as ServiceAccount default/copyrator and copies"
echo "only where that ServiceAccount may create ConfigMaps. One ClusterRoleBinding lets it copy everywhere (kube-system,"
echo "kube-public, kube-node-lease and quartet-system stay protected unless labelled copyrator.flant.com/accept-copies=true):"
run create clusterrolebinding copyrator-platform --clusterrole=quartet-copyrator-target --serviceaccount=default:copyrator
echo "The sample RegistryMirror docker-hub (in registry-mirrors, a namespace only admins edit) reaches the nodes (a host"
echo "port on each, with configureNodes containerd's hosts.toml) only with the sample RegistryHostGrant for docker.io:"
run apply -f config/samples/mirrors_v1alpha1_registryhostgrant.yaml

say "applying the samples"
for f in config/samples/operators_v1_exchangerate.yaml config/samples/operators_v1_exchangerate_sources.yaml \
  config/samples/flant_v1_copyratorrule.yaml config/samples/flant_v1_copyratorrule_public_tls.yaml; do
  echo "--- $f"; "$kubectl" apply -n default -f "$f"
done
echo "--- config/samples/mirrors_v1alpha1_registrymirror.yaml, in registry-mirrors (the namespace the grant names)"
"$kubectl" apply -n registry-mirrors -f config/samples/mirrors_v1alpha1_registrymirror.yaml
echo "--- config/samples/blackadder_v1beta1_chaosagent.yaml, narrowed to namespaces labelled quartet-demo/chaos=true"
echo "    so the demo's chaos stays in chaos-demo (the sample as written targets every namespace but kube-system)"
sed 's/^spec:/spec:\n  namespaceSelector: {matchLabels: {quartet-demo\/chaos: "true"}}/' \
  config/samples/blackadder_v1beta1_chaosagent.yaml | "$kubectl" apply -f -
# A second agent whose only window opens within two hours (UTC): it acts on nothing now and says
# when it may.
opens=$(date -u -d '+2 hours' +%H:00)
closes=$(date -u -d '+3 hours' +%H:00)
echo "--- ChaosAgent office-hours: dry run, only between $opens and $closes UTC"
"$kubectl" apply -f - <<EOF
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: office-hours}
spec:
  dryRun: true
  tantrumMode: true
  pauseDuration: 30
  namespaceSelector: {matchLabels: {quartet-demo/chaos: "true"}}
  schedule:
    timeZone: UTC
    windows: [{days: [Mon, Tue, Wed, Thu, Fri, Sat, Sun], start: "$opens", end: "$closes"}]
EOF

show() {
  say "ExchangeRate: the rate ConfigMap (IMITATION upstream)"
  "$kubectl" get exchangerates -n default
  "$kubectl" get configmap exchange-rate-usd -n default -o jsonpath='{.data}{"\n"}' 2>/dev/null || echo "(not yet)"
  echo "several currencies from the ECB, cross-checked against Frankfurter v2 (exchange-rates-eur):"
  "$kubectl" get configmap exchange-rates-eur -n default -o jsonpath='{.data}{"\n"}' 2>/dev/null || echo "(not yet)"
  "$kubectl" get exchangerate exchange-rates-eur -n default -o jsonpath='{range .status.conditions[?(@.type=="Divergent")]}  {.type}={.status} ({.reason}): {.message}{"\n"}{end}' 2>/dev/null || true
  say "CopyratorRule: copies of default/shared-settings (everywhere the admin consented)"
  "$kubectl" get copyrators -n default
  "$kubectl" get configmaps -A -l copyrator.flant.com/rule=main-rule 2>/dev/null || true
  echo "refused (protected namespaces):"
  "$kubectl" get copyrators main-rule -n default -o jsonpath='{range .status.refused[*]}  {.namespace}: {.reason}{"\n"}{end}' 2>/dev/null || true
  echo "ingress-ca: the public half of default/ingress-tls, copied into team-a (labelled team=web), its type and keys:"
  "$kubectl" get secret ingress-tls -n team-a -o go-template='  {{.type}}: {{range $k, $v := .data}}{{$k}} {{end}}{{"\n"}}' 2>/dev/null || echo "  (not yet)"
  say "RegistryMirror: the six objects, the admin's grant and the mirror's status"
  "$kubectl" get registryhostgrants
  "$kubectl" get registrymirrors -n registry-mirrors
  "$kubectl" get services,statefulsets,daemonsets,pvc,configmaps -n registry-mirrors -l app.kubernetes.io/instance=docker-hub 2>/dev/null || true
  "$kubectl" get registrymirror docker-hub -n registry-mirrors -o jsonpath='{range .status.conditions[*]}  {.type}={.status} ({.reason}): {.message}{"\n"}{end}' 2>/dev/null || true
  say "ChaosAgent: what the agent did"
  "$kubectl" get chaosagents
  "$kubectl" get chaosagent office-hours -o jsonpath='office-hours: {range .status.conditions[?(@.type=="InWindow")]}{.type}={.status} ({.reason}): {.message}{end}{"\n"}' 2>/dev/null || true
  "$kubectl" get deployment web -n chaos-demo
  "$kubectl" get configmap settings -n chaos-demo -o jsonpath='{.data}{"\n"}' | cut -c1-160
  "$kubectl" get events -n chaos-demo --sort-by=.metadata.creationTimestamp 2>/dev/null | tail -5
}
sleep 5
show
say "the demo keeps running and refreshes every 30 s; press Ctrl-C to stop everything"
while true; do sleep 30; show; done
