# Headroom — developer entry points. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
include hack/versions.env
K8S_VERSION ?= $(DEFAULT_K8S_VERSION)
export K8S_VERSION

NAMESPACE ?= kube-headroom-system
IMG ?= ghcr.io/karlkfi/kube-headroom:0.1.0
HELM ?= $(shell command -v helm 2>/dev/null || echo $${HEADROOM_CACHE:-$$HOME/.cache/headroom}/k8s-$(K8S_VERSION)/bin/helm)
PYTEST_ARGS ?=
# Workers for the unit and integration tiers, each with its own control plane: four keep
# two cores busy (docs/development.md). Each takes a whole test file at a time, in the
# order collected (the integration tier's long files first), so no worker is left at the
# end with a queue of long tests while the others idle.
TEST_WORKERS ?= 4
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# 100% branch coverage of the pure core is a gate, not a goal, and the core's own unit tests
# meet it alone. Only they run under coverage's tracer, which on Python 3.11 costs every
# process it traces about half as much CPU again (docs/development.md).
CORE_TESTS := tests/unit/app/core
COVERAGE_GATE := --cov=app.core.policy --cov=app.core.eligibility --cov-branch --cov-report=term-missing:skip-covered --cov-fail-under=100

.PHONY: help
help: ## List targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# uv installs the same packages pip would, from the same index, in a sixth of the time
# (docs/development.md): a clean clone's virtualenv is part of every CI run.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(STAMP) ## Create the virtualenv with runtime and development dependencies

.PHONY: control-plane
control-plane: ## Build (or reuse) etcd, kube-apiserver, controller-manager, scheduler, kubectl, KWOK, helm
	bash hack/build-control-plane.sh

.PHONY: neighbours
neighbours: ## Build (or reuse) the components the integration tier runs beside Headroom: Karpenter (KWOK provider), VPA, metrics-server, Flux
	bash hack/build-neighbours.sh

.PHONY: helm
helm: ## Build (or reuse) helm alone: the unit tier's chart tests need nothing else
	bash hack/build-control-plane.sh helm

# mypy's cache is shared by every checkout: it revalidates each cached module by its
# content's hash, so a clean clone is checked in seconds rather than from scratch.
.PHONY: lint
lint: $(STAMP) ## ruff, mypy --strict and the import-layering contracts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	MYPY_CACHE_DIR=$${HEADROOM_CACHE:-$$HOME/.cache/headroom}/mypy $(BIN)/mypy
	$(BIN)/lint-imports

.PHONY: test
test: lint control-plane ## Everything: lint, the core's coverage gate, unit and integration tiers, then the e2e and real-node tiers on one boot of the fleet
	$(BIN)/pytest $(XDIST) $(COVERAGE_GATE) $(CORE_TESTS)
	bash hack/tiers.sh $(XDIST) --durations=25 --ignore=$(CORE_TESTS) $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: $(STAMP) helm ## Unit tier only (no control plane; builds helm if missing)
	$(BIN)/pytest -m 'not integration' $(PYTEST_ARGS)

.PHONY: test-integration
test-integration: $(STAMP) control-plane neighbours ## Integration tier only, at K8S_VERSION
	$(BIN)/pytest $(XDIST) -m integration $(PYTEST_ARGS)

.PHONY: test-k8s-min
test-k8s-min: ## Integration and real-node tiers at the oldest supported minor (newest 1.35.x)
	$(MAKE) test-integration K8S_VERSION=$(MIN_K8S_VERSION)
	$(MAKE) --no-print-directory realnode K8S_VERSION=$(MIN_K8S_VERSION)

DEMO_ARGS ?=
.PHONY: demo
demo: $(STAMP) control-plane ## Live demo on an embedded local cluster (DEMO_ARGS=--keep; --cluster=current: the current kubeconfig's; --real-nodes: a real kubelet in qemu, cpu.max per step, root)
	$(BIN)/python -m devcluster.demo $(DEMO_ARGS)

.PHONY: cluster
cluster: $(STAMP) control-plane ## A local control plane for manual use (prints its KUBECONFIG; Ctrl-C stops it)
	$(BIN)/python -m devcluster

.PHONY: bench
bench: $(STAMP) ## Policy benchmark (node of 110 and 1,000 pods)
	$(BIN)/python -m bench.policy_bench

.PHONY: bench-webhook
bench-webhook: $(STAMP) ## /mutate/pods over TLS at concurrency 1 and 32 (uses wrk when installed)
	$(BIN)/python -m bench.webhook_bench

.PHONY: bench-reconciler
bench-reconciler: $(STAMP) control-plane ## 200 nodes, 8,000 pods at the default write budget (several minutes)
	$(BIN)/python -m bench.reconciler_bench

.PHONY: bench-reconciler-large
bench-reconciler-large: $(STAMP) control-plane ## 1,000 nodes, 30,000 pods at the default write budget
	$(BIN)/python -m bench.reconciler_bench --nodes 1000 --pods 30000 --burst 2000

.PHONY: bench-reconciler-huge
bench-reconciler-huge: $(STAMP) control-plane ## 5,000 nodes, 150,000 pods at clientQPS and explanationQPS 200 (about 45 minutes)
	$(BIN)/python -m bench.reconciler_bench --nodes 5000 --pods 150000 --burst 5000 --client-qps 200

.PHONY: bench-simulate
bench-simulate: $(STAMP) ## kubectl headroom simulate over a 5,000-node, 150,000-pod snapshot
	$(BIN)/python -m bench.simulate_bench

.PHONY: bench-control-plane
bench-control-plane: $(STAMP) control-plane ## Warm start time of the local control plane
	$(BIN)/python -m devcluster --check

.PHONY: install
install: ## Install the CRD chart into the current kube-context
	$(HELM) upgrade --install kube-headroom-crds chart/kube-headroom-crds

.PHONY: uninstall
uninstall: ## Uninstall the CRD chart (the CRD itself is kept: resource-policy keep)
	$(HELM) uninstall kube-headroom-crds

# IMG is an image reference, [registry[:port]/]path[:tag][@sha256:digest]: the tag is
# after the last colon of the last path segment (a registry's port is not a tag), the
# digest after the @. Neither given means the tag latest.
IMG_NAME = $(firstword $(subst @, ,$(IMG)))
IMG_DIGEST = $(word 2,$(subst @, ,$(IMG)))
IMG_TAG = $(word 2,$(subst :, ,$(lastword $(subst /, ,$(IMG_NAME)))))
IMG_REPOSITORY = $(if $(IMG_TAG),$(patsubst %:$(IMG_TAG),%,$(IMG_NAME)),$(IMG_NAME))
IMAGE_VALUES = --set image.repository=$(IMG_REPOSITORY) \
  --set image.tag=$(or $(IMG_TAG),$(if $(IMG_DIGEST),,latest)) \
  --set image.digest=$(IMG_DIGEST)

.PHONY: deploy
deploy: ## Install the operator chart: make deploy IMG=registry/kube-headroom:tag (or @sha256:…)
	$(HELM) upgrade --install kube-headroom chart/kube-headroom \
	  --namespace $(NAMESPACE) --create-namespace --wait $(IMAGE_VALUES)

.PHONY: undeploy
undeploy: ## Uninstall the operator chart
	$(HELM) uninstall kube-headroom --namespace $(NAMESPACE)

.PHONY: helm-template
helm-template: ## Render the operator chart locally, with IMG as make deploy sets it
	$(HELM) template kube-headroom chart/kube-headroom --namespace $(NAMESPACE) $(IMAGE_VALUES)

# The image's build base: any Debian bookworm image with apt (the Dockerfile's default
# when empty). make e2e builds one locally with debootstrap.
BASE_IMAGE ?=
.PHONY: docker-build
docker-build: ## Build the image with docker, podman or buildah: make docker-build IMG=… [BASE_IMAGE=…]
	BUILD_ARGS="$(if $(BASE_IMAGE),BASE_IMAGE=$(BASE_IMAGE))" bash hack/image-build.sh $(IMG)

E2E_ARGS ?=
E2E_TESTS ?= tests/e2e
.PHONY: e2e
e2e: $(STAMP) control-plane ## The install path for real: image, OCI, cert-manager, Prometheus, the chart's pods on real kubelets (root)
	E2E_ARGS="$(E2E_ARGS)" E2E_TESTS="$(E2E_TESTS)" bash hack/e2e.sh

REALNODE_ARGS ?=
.PHONY: realnode
realnode: $(STAMP) control-plane neighbours ## Real kubelets in qemu guests: resizes, kubelet answers, GOMAXPROCS, latency, the money graph, VPA (root)
	REALNODE_ARGS="$(REALNODE_ARGS)" bash hack/realnode.sh

.PHONY: bench-realnode
bench-realnode: $(STAMP) control-plane ## Neighbour binding/deletion to cpu.max on a real kubelet: p50/p90/max (root)
	REALNODE_ARGS="$(REALNODE_ARGS)" bash hack/realnode.sh --bench

.PHONY: bench-realnode-idle
bench-realnode-idle: $(STAMP) control-plane ## Host CPU an idle real-node fleet takes, and its guests' busiest processes (root; REALNODE_ARGS="--threads multi")
	REALNODE_ARGS="$(REALNODE_ARGS)" bash hack/realnode.sh --bench-idle

.PHONY: bench-realnode-pull
bench-realnode-pull: $(STAMP) control-plane ## The chart's images pulled by a real kubelet from the local registry, Headroom's imports in the guest (root)
	bash hack/e2e.sh --images
	REALNODE_ARGS="$(REALNODE_ARGS)" bash hack/realnode.sh --bench-pull

.PHONY: bench-tenant
bench-tenant: $(STAMP) control-plane ## A tenant's server under Headroom, static limits and no limit on a real kubelet: latency, throttling, neighbours (root)
	REALNODE_ARGS="$(REALNODE_ARGS)" bash hack/realnode.sh --bench-tenant

.PHONY: clean
clean: ## Remove the virtualenv and caches (not the control-plane binaries)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis _artifacts
