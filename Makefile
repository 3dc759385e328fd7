# Quartet — four day-2 controllers in one operator.
# `make help` lists the targets. Everything the targets need is built from the Go module
# proxy into bin/ (ignored by git) the first time and reused afterwards.

VERSION ?= 0.3.0
IMAGE_TAG_BASE ?= quay.io/quartet-operator/quartet
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
REGISTRY_IMG ?= docker.io/library/registry:3.0.0
# The RegistryMirror's registry (cmd/mirror-registry): RELATED_IMAGE_REGISTRY's default in
# config/manager/manager.yaml, of the same version.
MIRROR_REGISTRY_IMG ?= quay.io/quartet-operator/mirror-registry:v$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
CHANNELS ?= stable
DEFAULT_CHANNEL ?= stable
CONTAINER_TOOL ?= docker

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT := $(shell pwd)
LOCALBIN ?= $(ROOT)/bin
TOOLBIN ?= $(LOCALBIN)/tools

# The Kubernetes release is written once: the k8s.io/kubernetes requirement the control
# plane and the real node's kubelet are built from. Scripts are handed it (or the paths
# derived from it) by the targets below; Go code reads the same go.mod
# (test/localcluster.KubernetesVersion).
K8S_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2 }' hack/tools/controlplane/go.mod)
ifeq ($(K8S_VERSION),)
$(error no k8s.io/kubernetes requirement in hack/tools/controlplane/go.mod)
endif
KWOK_VERSION ?= v0.8.0
CONTROLLER_TOOLS_VERSION ?= v0.20.1
KUSTOMIZE_VERSION ?= v5.8.2
OPERATOR_SDK_VERSION ?= v1.42.2
OPM_VERSION ?= v1.74.0
OLM_VERSION ?= v0.46.0
HELM_VERSION ?= v4.3.1
# Prometheus 3.16 (its Go module versions are v0.<minor>.<patch>): promtool tests the alerts
# in make test; the server scrapes the in-cluster manager in make e2e.
PROMETHEUS_VERSION ?= v0.316.0
# make lint: golangci-lint with kube-api-linter compiled in, both pinned by hack/tools/lint/go.mod.
GOLANGCI_LINT_VERSION := $(shell awk '$$1 == "github.com/golangci/golangci-lint/v2" { print $$2 }' hack/tools/lint/go.mod)
KUBE_API_LINTER_VERSION := $(shell awk '$$1 == "sigs.k8s.io/kube-api-linter" { print $$2 }' hack/tools/lint/go.mod)

CONTROLPLANE_DIR := $(LOCALBIN)/k8s/$(K8S_VERSION)
KWOK_DIR := $(LOCALBIN)/kwok/$(KWOK_VERSION)
export KUBEBUILDER_ASSETS := $(CONTROLPLANE_DIR)
export QUARTET_KWOK_DIR := $(KWOK_DIR)
DEV_CLUSTER := $(LOCALBIN)/dev-cluster
# The cluster targets (install, uninstall, deploy, undeploy, run) act on the caller's cluster:
# kubectl from PATH and $KUBECONFIG (kubectl's default, ~/.kube/config, when unset).
# CLUSTER=dev: the local cluster of make cluster-up instead, with the project's kubectl.
CLUSTER ?=
ifeq ($(CLUSTER),dev)
KUBECTL ?= $(CONTROLPLANE_DIR)/kubectl
override KUBECONFIG := $(DEV_CLUSTER)/kubeconfig
export KUBECONFIG
else ifeq ($(CLUSTER),)
KUBECTL ?= kubectl
else
$(error CLUSTER=$(CLUSTER): the one named cluster is dev (make cluster-up); leave CLUSTER unset to use $$KUBECONFIG)
endif

CONTROLLER_GEN ?= $(TOOLBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(TOOLBIN)/kustomize-$(KUSTOMIZE_VERSION)
OPERATOR_SDK ?= $(TOOLBIN)/operator-sdk-$(OPERATOR_SDK_VERSION)
OPM ?= $(TOOLBIN)/opm-$(OPM_VERSION)
HELM ?= $(TOOLBIN)/helm-$(HELM_VERSION)
PROMTOOL ?= $(TOOLBIN)/promtool-$(PROMETHEUS_VERSION)
PROMETHEUS ?= $(TOOLBIN)/prometheus-$(PROMETHEUS_VERSION)
GOLANGCI_LINT ?= $(TOOLBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)-kal-$(KUBE_API_LINTER_VERSION)
# The list make images writes last: the real-node targets' stamp (see IMAGES_INPUTS).
IMAGES_DIR := $(or $(QUARTET_IMAGES_DIR),$(LOCALBIN)/images)
IMAGES_STAMP := $(IMAGES_DIR)/images.txt

# One compile of each library: the tests, go run, go vet, the tools and hack/images (the
# images' binaries, as the Dockerfiles build them) all build with cgo off and -trimpath, so Go's
# build cache holds one copy of each package instead of two. Nothing in the repository uses
# cgo or -race; opm, the one tool that needs cgo, sets CGO_ENABLED=1 itself
# (hack/build-olm-tools.sh). GOFLAGS keeps what `go env GOFLAGS` already says.
export CGO_ENABLED := 0
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(shell go env GOFLAGS)))

# Tests: integration suites start their own control plane; give them room on 2 cores.
TEST_TIMEOUT ?= 40m
GO_TEST_FLAGS ?= -count=1 -timeout $(TEST_TIMEOUT)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the API types and markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="." paths="./api/..." paths="./controllers/..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deep-copy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint (.golangci.yml): errcheck, govet, ineffassign, staticcheck, unused, forbidigo, importas, loggercheck, thelper and gofmt on all Go code (cmd/mirror-registry's module too); kube-api-linter on api/.
	$(GOLANGCI_LINT) run ./...
	cd cmd/mirror-registry && $(GOLANGCI_LINT) run ./...
	cd hack/dashboards && $(GOLANGCI_LINT) run ./...

.PHONY: test
# What make test needs, built two at a time (on a fresh machine the control plane's one go
# build beside the smaller tools and go vet), then the tests. go test runs no vet of its own
# (-vet=off): go vet ran already.
.PHONY: test-deps
test-deps: controlplane registry mirror-registry vet $(KUSTOMIZE) $(HELM) $(PROMTOOL)
test: ## go vet, unit tests and integration tests against the real API server; cmd/mirror-registry's and hack/dashboards' own tests.
	$(MAKE) --no-print-directory -j2 -Oline test-deps
	HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) PROMTOOL=$(PROMTOOL) go test -vet=off $(GO_TEST_FLAGS) ./...
	cd cmd/mirror-registry && go vet ./... && go test -vet=off $(GO_TEST_FLAGS) ./...
	cd hack/dashboards && go vet ./... && go test -vet=off $(GO_TEST_FLAGS) ./...

FUZZTIME ?= 15s
# go test turns its -timeout off while fuzzing unless it is given: a hung fuzz run panics
# with its stacks after FUZZ_TIMEOUT (raise it with a FUZZTIME of minutes).
FUZZ_TIMEOUT ?= 10m
# fuzz-target runs one fuzz target, its output shown as it comes, and fails when go test finds
# no such target in the package (go test passes with "no fuzz tests to fuzz", which would
# hide a moved target).
fuzz-target = log=$$(mktemp); rc=0; \
	go test -run '^$$' -fuzz '^$(1)$$' -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) $(2) 2>&1 | tee $$log || rc=$$?; \
	if grep -q 'no fuzz tests to fuzz' $$log; then echo "fuzz target $(1) not found in $(2)" >&2; rc=1; fi; rm -f $$log; exit $$rc
.PHONY: fuzz
fuzz: ## Run every fuzz target of a parser of outside data for FUZZTIME each.
	$(call fuzz-target,FuzzParseECB,./controllers/exchangerate/)
	$(call fuzz-target,FuzzParseFrankfurter,./controllers/exchangerate/)
	$(call fuzz-target,FuzzParseFrankfurterV2,./controllers/exchangerate/)
	$(call fuzz-target,FuzzEmbeddedIPv4,./internal/egress/)
	$(call fuzz-target,FuzzRender,./internal/hoststoml/)
	$(call fuzz-target,FuzzHostsDir,./controllers/registrymirror/)
	$(call fuzz-target,FuzzHostsTOMLOwner,./cmd/nodeagent/)
	$(call fuzz-target,FuzzRestoreAnnotations,./controllers/chaosagent/)
	$(call fuzz-target,FuzzSchedule,./controllers/chaosagent/)
	cd cmd/mirror-registry; $(call fuzz-target,FuzzDecodeLastUse,./internal/retention/)
	cd cmd/mirror-registry; $(call fuzz-target,FuzzParsePins,./internal/retention/)

.PHONY: test-unit
test-unit: ## Unit tests only (no API server).
	QUARTET_SKIP_INTEGRATION=1 go test -count=1 ./...
	cd cmd/mirror-registry && go test -count=1 ./...
	cd hack/dashboards && go test -count=1 ./...

# BENCH_COUNT: rounds of every benchmark (go test -count); with more than one, the report
# shows each figure's median and spread. The timeouts grow with it.
BENCH_COUNT ?= 1
# BENCH selects the benchmarks (go test -bench); the report keeps the others' figures from the run before.
BENCH ?= .
.PHONY: bench
bench: controlplane $(if $(filter real,$(NODE)),registry node-deps node-tools olm-tools $(HELM) $(IMAGES_STAMP)) ## Benchmarks against the local cluster; NODE=real adds the real node's (root); QUARTET_PEER_* name peer binaries (docs/PERFORMANCE.md, Peers); BENCH_COUNT=n runs n rounds, reported as median ± spread; BENCH=<regexp> runs some (the others' figures are kept); QUARTET_STORM_MB and QUARTET_STORM_CLIENTS scale the mirror registry's storm (default 256 and 1,10,50,200); figures go to docs/PERFORMANCE.md.
	{ go test -run '^$$' -bench '$(BENCH)' -benchtime 1x -count $(BENCH_COUNT) -timeout $$((120 * $(BENCH_COUNT)))m ./test/benchutil/ ./controllers/... ./test/process/ && \
	  (cd cmd/mirror-registry && go test -run '^$$' -bench '$(BENCH)' -benchtime 1x -count $(BENCH_COUNT) -timeout $$((60 * $(BENCH_COUNT)))m .) && \
	  $(if $(filter real,$(NODE)),QUARTET_REAL_NODE=1 OPM=$(OPM) OPERATOR_SDK=$(OPERATOR_SDK) HELM=$(HELM) go test -run '^$$' -bench . -benchtime 1x -count $(BENCH_COUNT) -timeout $$((60 * $(BENCH_COUNT)))m ./test/e2e/,true); } | tee bin/bench.txt
	go run ./hack/benchreport bin/bench.txt docs/PERFORMANCE.md

##@ Local cluster

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok (skips what exists); WITH_NODE=1 adds the real node's kubelet and kube-proxy to the same go build.
	K8S_VERSION=$(K8S_VERSION) KWOK_VERSION=$(KWOK_VERSION) hack/build-controlplane.sh $(if $(WITH_NODE),node)

# A real node needs no kwok: the real-node targets build the control plane without it, so
# .ci/run can build kwok beside them (make kwok) without two builds of it at once.
.PHONY: controlplane-bins
controlplane-bins: ## The control plane of make controlplane without kwok; WITH_NODE=1 adds the kubelet and kube-proxy.
	K8S_VERSION=$(K8S_VERSION) hack/build-controlplane.sh no-kwok $(if $(WITH_NODE),node)

.PHONY: kwok
kwok: ## Build kwok alone (make controlplane builds it too).
	K8S_VERSION=$(K8S_VERSION) KWOK_VERSION=$(KWOK_VERSION) hack/build-controlplane.sh only-kwok

REGISTRY_VERSION ?= v3.0.0
REGISTRY_BIN := $(LOCALBIN)/registry/$(REGISTRY_VERSION)/registry
.PHONY: registry
registry: $(REGISTRY_BIN) ## Build the CNCF distribution registry (for the RegistryMirror proof test; skips when present).
$(REGISTRY_BIN):
	REGISTRY_VERSION=$(REGISTRY_VERSION) hack/build-registry.sh

# After the CNCF registry: both compile distribution v3.0.0 at the same versions, so the
# second build reuses the first's packages from Go's build cache (2 s instead of minutes
# when make -j2 would otherwise compile them twice at once).
.PHONY: mirror-registry
mirror-registry: | $(REGISTRY_BIN)
mirror-registry: ## Build the RegistryMirror's registry, cmd/mirror-registry, into bin/mirror-registry/v$(VERSION)/ (the tests run it).
	VERSION=$(VERSION) hack/build-mirror-registry.sh >/dev/null

# NODE=kwok: fake nodes (pods never run; scale tests). NODE=real: one real node (kubelet,
# kube-proxy, containerd, runc, CNI bridge) in a network namespace of its own; needs root.
NODE ?= kwok
REAL_NODE_DEPS := $(if $(filter real,$(NODE)),node-deps node-tools $(IMAGES_STAMP))

.PHONY: cluster-up
cluster-up: controlplane-bins $(if $(filter real,$(NODE)),,kwok) $(REAL_NODE_DEPS) ## Start the local cluster in the background (idempotent; NODE=kwok|real); kubeconfig in bin/dev-cluster/kubeconfig.
	go run ./hack/cluster -dir $(DEV_CLUSTER) -node $(NODE) up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and restore everything a real node changed on the host.
	go run ./hack/cluster -dir $(DEV_CLUSTER) down

.PHONY: node-tools
node-tools: node-addons ## Build the real node's kubelet and kube-proxy (bin/k8s) and add-ons (CoreDNS, hostPath volume provisioner; bin/tools), skipping what exists.
	K8S_VERSION=$(K8S_VERSION) hack/build-controlplane.sh only-node

COREDNS_VERSION ?= v1.12.4
COREDNS := $(TOOLBIN)/coredns-$(COREDNS_VERSION)
HOSTPATH_PROVISIONER := $(TOOLBIN)/hostpath-provisioner
.PHONY: node-addons
node-addons: $(COREDNS) $(HOSTPATH_PROVISIONER) ## Build the real node's add-ons (CoreDNS, hostPath volume provisioner) into bin/tools (skips what exists); their images need them.
$(COREDNS) $(HOSTPATH_PROVISIONER) &:
	COREDNS_VERSION=$(COREDNS_VERSION) hack/build-node-tools.sh

.PHONY: node-deps
node-deps: ## Install the Debian packages a real node needs (containerd, runc, CNI plugins, iptables, conntrack) when missing.
	hack/node-deps.sh

.PHONY: demo
ifeq ($(NODE),real)
demo: controlplane-bins registry node-deps node-tools olm-tools $(HELM) $(IMAGES_STAMP) ## Run everything on the local cluster and show what happened; NODE=real: on a real node, Quartet installed by OLM (root); Ctrl-C stops all.
	OPM=$(OPM) OPERATOR_SDK=$(OPERATOR_SDK) HELM=$(HELM) go run ./hack/demoreal $(DEMO_ARGS)
else
demo:
	$(MAKE) --no-print-directory -j2 -Oline controlplane manifests
	KUBECTL=$(CONTROLPLANE_DIR)/kubectl hack/demo.sh
endif

##@ Build

.PHONY: build
build: ## Build bin/manager.
	CGO_ENABLED=0 go build -trimpath -o bin/manager .

.PHONY: run
run: cluster-check manifests ## Run the manager against $$KUBECONFIG (or ~/.kube/config; CLUSTER=dev: the local cluster).
	go run . --metrics-bind-address=0 --health-probe-bind-address=:8081

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: docker-build-mirror-registry
docker-build-mirror-registry: ## Build the RegistryMirror's registry image MIRROR_REGISTRY_IMG from cmd/mirror-registry/Dockerfile (needs a container engine).
	$(CONTAINER_TOOL) build -f cmd/mirror-registry/Dockerfile -t $(MIRROR_REGISTRY_IMG) .

.PHONY: docker-push-mirror-registry
docker-push-mirror-registry: ## Push the RegistryMirror's registry image.
	$(CONTAINER_TOOL) push $(MIRROR_REGISTRY_IMG)

# make images: every image the real-node cluster pulls, built without a container engine
# (hack/images, a Go program on go-containerregistry) into the registry store bin/images/registry.
GRPC_HEALTH_PROBE_VERSION ?= v0.4.40
GRPC_HEALTH_PROBE ?= $(TOOLBIN)/grpc_health_probe-$(GRPC_HEALTH_PROBE_VERSION)
SCORECARD_TEST ?= $(TOOLBIN)/scorecard-test-$(OPERATOR_SDK_VERSION)
OLM_IMAGE_BINS := $(foreach b,olm catalog package-server copy-content cpb,$(TOOLBIN)/$(b)-$(OLM_VERSION))
IMAGES_ENV = GRPC_HEALTH_PROBE=$(GRPC_HEALTH_PROBE) OPM=$(OPM) SCORECARD_TEST=$(SCORECARD_TEST) \
	OPM_VERSION=$(OPM_VERSION) OLM_VERSION=$(OLM_VERSION) OPERATOR_SDK_VERSION=$(OPERATOR_SDK_VERSION) IMAGE_TAG_BASE=$(IMAGE_TAG_BASE) \
	IMG=$(IMG) BUNDLE_IMG=$(BUNDLE_IMG) CATALOG_IMG=$(CATALOG_IMG) REGISTRY_IMG=$(REGISTRY_IMG) MIRROR_REGISTRY_IMG=$(MIRROR_REGISTRY_IMG)

IMAGES_TOOLS = $(REGISTRY_BIN) $(COREDNS) $(HOSTPATH_PROVISIONER) $(GRPC_HEALTH_PROBE) $(OPM) $(OLM_IMAGE_BINS) $(SCORECARD_TEST)
.PHONY: images-tools
images-tools: $(IMAGES_TOOLS) ## Build the binaries make images puts in images (make -j2 builds two at a time).

.PHONY: images
images: $(IMAGES_TOOLS) ## Build all images of the real-node cluster offline into bin/images/registry (list: bin/images/images.txt).
	$(IMAGES_ENV) go run ./hack/images

# The real-node targets need the images built from the current tree, not a rebuild each time
# (13-22 s when nothing changed): the list hack/images writes last is the stamp, older than
# none of the files the images are made of (everything but docs and tests; the tools' binaries).
IMAGES_INPUTS = $(wildcard $(shell git ls-files -co --exclude-standard -- . ':!docs/' ':!*.md' ':!*_test.go' ':!**/testdata/**' ':!bin'))
$(IMAGES_STAMP): $(IMAGES_INPUTS) $(IMAGES_TOOLS)
	$(IMAGES_ENV) go run ./hack/images
	touch $@

.PHONY: images-check
images-check: images ## Build the images again and fail unless every digest equals the previous build's.
	IMAGES_CHECK=1 $(IMAGES_ENV) go run ./hack/images

##@ Deployment

# cluster-check stops a cluster target, saying what is missing, before it builds anything:
# kubectl (KUBECTL, from PATH) and a kubeconfig ($KUBECONFIG's files, else ~/.kube/config).
.PHONY: cluster-check
cluster-check:
	@command -v "$(KUBECTL)" >/dev/null || { echo "make: no kubectl ($(KUBECTL)): put kubectl on PATH or set KUBECTL=<path>; for the local cluster: make cluster-up, then CLUSTER=dev" >&2; exit 1; }
	@cfg="$${KUBECONFIG:-$$HOME/.kube/config}"; found=; IFS=:; for f in $$cfg; do [ -f "$$f" ] && found=1; done; \
	  [ -n "$$found" ] || { echo "make: no kubeconfig ($$cfg): set KUBECONFIG; for the local cluster: make cluster-up, then CLUSTER=dev" >&2; exit 1; }; \
	  echo "make: acting on context $$("$(KUBECTL)" config current-context 2>/dev/null || echo '(none)') of $$cfg" >&2

.PHONY: install
install: cluster-check manifests $(KUSTOMIZE) ## Install the CRDs into $$KUBECONFIG's cluster (or ~/.kube/config's; CLUSTER=dev: the local cluster).
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: cluster-check manifests $(KUSTOMIZE) ## Remove the CRDs (and every CR) from that cluster.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: helm
helm: manifests dashboards $(KUSTOMIZE) ## Regenerate the Helm chart charts/quartet from config/ (hack/helmchart), the dashboards included.
	$(KUSTOMIZE) build config/default | go run ./hack/helmchart -out charts/quartet -version $(VERSION) -image $(IMAGE_TAG_BASE) -dashboards config/grafana

.PHONY: dashboards
dashboards: ## Regenerate the Grafana dashboards config/grafana/*.json from hack/dashboards (Grafana Foundation SDK).
	cd hack/dashboards && go run . -out ../../config/grafana

.PHONY: deploy
deploy: cluster-check manifests $(KUSTOMIZE) ## Deploy the operator with kustomize into that cluster (clusters without OLM); IMG sets the image.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: cluster-check $(KUSTOMIZE) ## Remove the kustomize deployment from that cluster.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: build-installer
build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml: what make deploy applies, as one file (kubectl apply --server-side -f); IMG sets the image.
	mkdir -p dist
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	{ echo "# Quartet $(VERSION): CRDs, RBAC, the manager, the consent ClusterRole and the admission policy."; \
	  echo "# Generated by make build-installer from config/default; kubectl apply --server-side -f dist/install.yaml"; \
	  $(KUSTOMIZE) build config/default; } > dist/install.yaml

##@ Tools

$(CONTROLLER_GEN):
	mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) CGO_ENABLED=0 go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(TOOLBIN)/controller-gen $@

$(KUSTOMIZE):
	mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) CGO_ENABLED=0 go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(TOOLBIN)/kustomize $@

$(HELM):
	mkdir -p $(TOOLBIN)
	cd hack/tools/helm && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" -o $@.tmp helm.sh/helm/v4/cmd/helm
	mv $@.tmp $@

# Without the service discovery plugins (remove_all_sd): Nomad's client is not on the module
# proxy, and the manager is scraped at a static address.
# Both from one go install (one compile of what they share).
$(PROMTOOL) $(PROMETHEUS) &:
	mkdir -p $(TOOLBIN)/prometheus-build
	GOBIN=$(TOOLBIN)/prometheus-build CGO_ENABLED=0 go install -trimpath -tags remove_all_sd \
		github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION) github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_VERSION)
	mv $(TOOLBIN)/prometheus-build/promtool $(PROMTOOL)
	mv $(TOOLBIN)/prometheus-build/prometheus $(PROMETHEUS)

.PHONY: controller-gen kustomize
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen.
kustomize: $(KUSTOMIZE) ## Build kustomize.

# golangci-lint's `custom` command builds the same binary but git-clones golangci-lint;
# hack/tools/lint is that build as a module of its own, so only the module proxy is needed.
$(GOLANGCI_LINT):
	mkdir -p $(TOOLBIN)
	cd hack/tools/lint && CGO_ENABLED=0 go build -trimpath -o $@.tmp .
	mv $@.tmp $@

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Build golangci-lint with kube-api-linter (hack/tools/lint).

.PHONY: helm-tool
helm-tool: $(HELM) ## Build Helm (hack/tools/helm).

.PHONY: prometheus-tools
prometheus-tools: $(PROMTOOL) $(PROMETHEUS) ## Build promtool and Prometheus.

# The opm image's grpc_health_probe, pinned by hack/tools/images/go.mod.
$(GRPC_HEALTH_PROBE):
	mkdir -p $(TOOLBIN)
	cd hack/tools/images && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o $@.tmp github.com/grpc-ecosystem/grpc-health-probe
	mv $@.tmp $@

# OLM's olm and catalog operators with package-server, copy-content and cpb (the rest of the
# olm image), and operator-sdk with its scorecard-test: one go build per tools module.
$(OLM_IMAGE_BINS) &:
	OLM_VERSION=$(OLM_VERSION) hack/build-olm-tools.sh olm-all

$(OPERATOR_SDK) $(SCORECARD_TEST) &:
	OPERATOR_SDK_VERSION=$(OPERATOR_SDK_VERSION) hack/build-olm-tools.sh operator-sdk-all

##@ OLM

OLM := $(TOOLBIN)/olm-$(OLM_VERSION)
OLM_CATALOG := $(TOOLBIN)/catalog-$(OLM_VERSION)
BUNDLE_METADATA_OPTS ?= --channels $(CHANNELS) --default-channel $(DEFAULT_CHANNEL)
# The upgrade chain: v0.1.0 (reconstructed), the releases of hack/olm/releases (frozen as they
# shipped), then VERSION, which replaces the last release and skips everything from v0.1.0.
FIRST_VERSION := 0.1.0
PREVIOUS_VERSION ?= $(lastword $(shell awk '!/^\#/ && NF { print $$1 }' hack/olm/releases))
BUNDLE_PREVIOUS_CSV := $(LOCALBIN)/bundle-previous-csv.yaml
# OpenShift 4.18 and later (Kubernetes 1.31 and later, the CSV's minKubeVersion).
OPENSHIFT_VERSIONS ?= v4.18
TEST_NODE_TIMEOUT ?= 20m
OLM_E2E_TIMEOUT ?= 45m
E2E_TIMEOUT ?= 60m

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) $(OPERATOR_SDK) ## Regenerate bundle/ and bundle.Dockerfile from config/ with the operator image IMG, and validate them.
	@# Owned CRDs and their descriptions come from the API types' markers; operator-sdk v1.42.2 leaves the
	@# descriptors of a CRD the base already lists as they are: edit those in config/manifests/bases.
	$(OPERATOR_SDK) generate kustomize manifests -q --apis-dir api
	@# Each kind's first paragraph in the description: README.md's table of kinds (hack/catalogtext).
	go run ./hack/olm/csvtext -readme README.md config/manifests/bases/quartet.clusterserviceversion.yaml
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	mkdir -p $(LOCALBIN) && rm -f $(BUNDLE_PREVIOUS_CSV)
	if [ -f bundle/manifests/quartet.clusterserviceversion.yaml ]; then cp bundle/manifests/quartet.clusterserviceversion.yaml $(BUNDLE_PREVIOUS_CSV); fi
	rm -rf bundle/manifests
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) --package quartet $(BUNDLE_METADATA_OPTS)
	@# project_layout names the kubebuilder plugin whose layout the project follows: none (PROJECT
	@# has no layout; README "Layout"), so operator-sdk would write an empty value: leave it out.
	sed -i '/project_layout/d' bundle/manifests/quartet.clusterserviceversion.yaml bundle/metadata/annotations.yaml bundle.Dockerfile
	go run ./hack/olm/descriptors bundle/manifests/quartet.clusterserviceversion.yaml
	@# The upgrade edge (as make catalog writes it) and createdAt, HEAD's commit time (hack/olm/csvmeta).
	go run ./hack/olm/csvmeta -csv bundle/manifests/quartet.clusterserviceversion.yaml -previous $(BUNDLE_PREVIOUS_CSV) \
		-replaces quartet.v$(PREVIOUS_VERSION) -skip-range '>=$(FIRST_VERSION) <$(VERSION)' -created-at "$$(TZ=UTC0 git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd)"
	rm -f $(BUNDLE_PREVIOUS_CSV)
	@# The OpenShift versions the bundle is for, as annotation and label: OpenShift's community
	@# pipeline refuses a bundle with minKubeVersion and without them.
	printf '\n  # OpenShift versions (OpenShift 4.18 is Kubernetes 1.31, the CSV'"'"'s minKubeVersion).\n  com.redhat.openshift.versions: $(OPENSHIFT_VERSIONS)\n' >>bundle/metadata/annotations.yaml
	sed -i 's#^\(LABEL operators.operatorframework.io.metrics.mediatype.v1=.*\)$$#\1\nLABEL com.redhat.openshift.versions=$(OPENSHIFT_VERSIONS)#' bundle.Dockerfile
	grep -q '^LABEL com.redhat.openshift.versions=$(OPENSHIFT_VERSIONS)$$' bundle.Dockerfile
	$(OPERATOR_SDK) bundle validate ./bundle

# The optional suite as OpenShift's community pipeline runs it (also with the Kubernetes version
# the project builds): any error or warning fails.
.PHONY: bundle-validate
bundle-validate: $(OPERATOR_SDK) ## Validate bundle/ with the operatorframework optional suite (OperatorHub, capabilities, categories, good practices); fails on any warning.
	@for opts in "" "--optional-values=k8s-version=$(patsubst v%,%,$(basename $(K8S_VERSION)))"; do \
		echo "$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework $$opts"; \
		rc=0; out=$$($(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework $$opts 2>&1) || rc=$$?; \
		echo "$$out"; \
		if [ $$rc -ne 0 ] || echo "$$out" | grep -q 'level=\(warning\|error\)'; then \
			echo "bundle-validate: errors or warnings (exit $$rc)" >&2; exit 1; \
		fi; \
	done

.PHONY: bundle-build
bundle-build: ## Build the bundle image BUNDLE_IMG (needs a container engine).
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image.
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

.PHONY: catalog
catalog: $(OPM) $(OPERATOR_SDK) ## Regenerate the file-based catalog catalog/ (v0.1.0 reconstructed, the frozen releases of hack/olm/releases, the current bundle) and validate it.
	OPM=$(OPM) OPERATOR_SDK=$(OPERATOR_SDK) IMAGE_TAG_BASE=$(IMAGE_TAG_BASE) BUNDLE_IMG=$(BUNDLE_IMG) VERSION=$(VERSION) hack/olm/catalog.sh

.PHONY: catalog-build
catalog-build: ## Build the catalog image CATALOG_IMG from catalog/ (needs a container engine).
	$(CONTAINER_TOOL) build -f catalog.Dockerfile -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## Push the catalog image.
	$(CONTAINER_TOOL) push $(CATALOG_IMG)

# The real-node end-to-end tests need root; each package starts its own real node, one at a time.
REAL_NODE_TEST = QUARTET_REAL_NODE=1 OPM=$(OPM) OPERATOR_SDK=$(OPERATOR_SDK) HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) PROMETHEUS=$(PROMETHEUS) go test -count=1 -p 1 -v

.PHONY: test-node
test-node: controlplane-bins registry node-deps node-tools $(IMAGES_STAMP) ## Real node tests (root): pods run, the network stays inside, the host is restored after every stop.
	$(REAL_NODE_TEST) -timeout $(TEST_NODE_TIMEOUT) -run RealNode ./test/localcluster/

.PHONY: e2e
# E2E_PACKAGES: .ci/run runs each package as a stage of its own.
E2E_PACKAGES ?= ./test/e2e/ ./test/install/ ./test/demo/
# E2E_PARALLEL: how many of test/e2e's namespace-isolated tests run at once; they mostly wait
# for the node (pulls, pods, the manager's passes), not for the 2 cores.
E2E_PARALLEL ?= 4
e2e: controlplane-bins registry node-deps node-tools olm-tools $(HELM) $(KUSTOMIZE) $(PROMETHEUS) $(IMAGES_STAMP) ## The four controllers' purpose on the real node, installed by OLM: mirror pulls, real chaos, copies, rates, faults; Helm and kustomize installs; the real-node demo (root).
	$(REAL_NODE_TEST) -parallel $(E2E_PARALLEL) -timeout $(E2E_TIMEOUT) $(E2E_PACKAGES)

.PHONY: olm-e2e
olm-e2e: controlplane-bins registry node-deps node-tools olm-tools $(HELM) $(IMAGES_STAMP) ## OLM on the real node, nothing emulated: install, upgrade, install modes, operator-sdk run bundle and scorecard, bad inputs (docs/OLM.md; root).
	$(REAL_NODE_TEST) -timeout $(OLM_E2E_TIMEOUT) ./test/olm/

.PHONY: olm-tools
olm-tools: $(OPERATOR_SDK) $(OPM) $(OLM) $(OLM_CATALOG) ## Build operator-sdk, opm and OLM's olm and catalog operators into bin/tools (skips what exists).

$(OPM):
	OPM_VERSION=$(OPM_VERSION) hack/build-olm-tools.sh opm

