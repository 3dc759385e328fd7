# Quartet — four day-2 controllers in one operator.
# `make help` lists the targets. Everything the targets need is built from the Go module
# proxy into bin/ (ignored by git) the first time and reused afterwards.

VERSION ?= 0.2.0
IMAGE_TAG_BASE ?= quay.io/quartet-operator/quartet
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
REGISTRY_IMG ?= docker.io/library/registry:3.0.0
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

K8S_VERSION ?= v1.37.1
KWOK_VERSION ?= v0.8.0
CONTROLLER_TOOLS_VERSION ?= v0.20.1
KUSTOMIZE_VERSION ?= v5.8.2
OPERATOR_SDK_VERSION ?= v1.42.2
OPM_VERSION ?= v1.74.0
OLM_VERSION ?= v0.46.0

CONTROLPLANE_DIR := $(LOCALBIN)/k8s/$(K8S_VERSION)
KWOK_DIR := $(LOCALBIN)/kwok/$(KWOK_VERSION)
export KUBEBUILDER_ASSETS := $(CONTROLPLANE_DIR)
export QUARTET_KWOK_DIR := $(KWOK_DIR)
KUBECTL ?= $(CONTROLPLANE_DIR)/kubectl
DEV_CLUSTER := $(LOCALBIN)/dev-cluster
KUBECONFIG ?= $(DEV_CLUSTER)/kubeconfig
export KUBECONFIG

CONTROLLER_GEN ?= $(TOOLBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
KUSTOMIZE ?= $(TOOLBIN)/kustomize-$(KUSTOMIZE_VERSION)
OPERATOR_SDK ?= $(TOOLBIN)/operator-sdk-$(OPERATOR_SDK_VERSION)
OPM ?= $(TOOLBIN)/opm-$(OPM_VERSION)

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

.PHONY: test
test: controlplane vet ## go vet, unit tests and integration tests against the real API server.
	go test $(GO_TEST_FLAGS) ./...

.PHONY: test-unit
test-unit: ## Unit tests only (no API server).
	QUARTET_SKIP_INTEGRATION=1 go test -count=1 ./...

.PHONY: bench
bench: controlplane ## Benchmarks against the local cluster; figures go to docs/PERFORMANCE.md.
	go test -run '^$$' -bench . -benchtime 1x -timeout 90m ./internal/benchutil/ ./controllers/... | tee bin/bench.txt
	go run ./hack/benchreport bin/bench.txt docs/PERFORMANCE.md

##@ Local cluster

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok (skips what exists).
	K8S_VERSION=$(K8S_VERSION) KWOK_VERSION=$(KWOK_VERSION) hack/build-controlplane.sh

.PHONY: cluster-up
cluster-up: controlplane ## Start the local cluster in the background (idempotent); kubeconfig in bin/dev-cluster/kubeconfig.
	go run ./hack/cluster -dir $(DEV_CLUSTER) up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster.
	go run ./hack/cluster -dir $(DEV_CLUSTER) down

.PHONY: demo
demo: controlplane manifests ## Run everything on the local cluster, apply the samples, show what happened; Ctrl-C stops all.
	hack/demo.sh

##@ Build

.PHONY: build
build: ## Build bin/manager.
	CGO_ENABLED=0 go build -trimpath -o bin/manager .

.PHONY: run
run: manifests ## Run the manager against $$KUBECONFIG (default: the local cluster).
	go run . --metrics-bind-address=0 --health-probe-bind-address=:8081

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

##@ Deployment

.PHONY: install
install: manifests $(KUSTOMIZE) ## Install the CRDs into $$KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests $(KUSTOMIZE) ## Remove the CRDs (and every CR) from $$KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests $(KUSTOMIZE) ## Deploy the operator with kustomize (clusters without OLM).
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove the kustomize deployment.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Tools

$(CONTROLLER_GEN):
	mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) CGO_ENABLED=0 go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(TOOLBIN)/controller-gen $@

$(KUSTOMIZE):
	mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) CGO_ENABLED=0 go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(TOOLBIN)/kustomize $@

.PHONY: controller-gen kustomize
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen.
kustomize: $(KUSTOMIZE) ## Build kustomize.
