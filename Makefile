# Trainyard. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

BIN        := $(CURDIR)/bin
K8S_BIN    := $(BIN)/k8s
CONTROLLER_GEN := $(BIN)/controller-gen
GO_TEST_FLAGS ?=
# Control-plane binaries the integration tests start (built from Go modules, see test/tools/README.md).
K8S_TOOLS  := etcd kube-apiserver kube-controller-manager
# Everything a local cluster (pkg/localcluster, bin/trainyard-local up) can run besides
# the manager, and kubectl. make run builds only what its cluster runs
# (`trainyard-local run -tools`: test/tools/prepare.sh).
CLUSTER_TOOLS := $(K8S_TOOLS) kube-scheduler kubectl kwok jobset-controller kueue-controller
# What the local cluster's container nodes run besides (make deployed-tools, trainyard-local up --container-nodes).
CONTAINER_NODE_TOOLS := kubelet kube-proxy coredns provisioner
CLUSTER_DIR   := $(BIN)/cluster
# Untainted kwok nodes, so workloads (the examples) run unchanged; CLUSTER_ARGS= keeps kwok's taint.
CLUSTER_ARGS  ?= --untainted-nodes
# GANG_SCHEDULER=volcano or coscheduling also runs that gang scheduler (make cluster-tools builds it into bin/k8s; docs/gang-scheduling.md).
GANG_SCHEDULER ?=
GANG_TOOLS_volcano      := volcano-scheduler volcano-controller-manager
GANG_TOOLS_coscheduling := scheduler-plugins-scheduler scheduler-plugins-controller

export KUBEBUILDER_ASSETS := $(K8S_BIN)

# The build's identity, stamped into the binaries (pkg/version; `trainyard version`, and
# `--version` of trainyard-manager, trainyard-node, trainyard-initializer and
# trainyard-local, whose go builds below all pass LDFLAGS: test/binaries checks it):
# the nearest tag, the commits since and -dirty; outside a git checkout the VERSION file,
# else dev. Override with make VERSION=v1.2.3.
# The build date is the last commit's (reproducible builds' SOURCE_DATE_EPOCH), so
# that rebuilding an unchanged tree relinks nothing.
VERSION           ?= $(shell git describe --tags --always --dirty 2>/dev/null || cat VERSION 2>/dev/null || echo dev)
GIT_COMMIT        ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
# TRAINING_IMAGES=false: make images builds only the manager's and the initializer's.
TRAINING_IMAGES   ?= true
BUILD_DATE        ?= $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := github.com/trainyard/trainyard/pkg/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).GitCommit=$(GIT_COMMIT) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)

.PHONY: help
help: ## List targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

##@ Run

.PHONY: run
run: $(if $(findstring -containers,$(RUN_ARGS)),deployed-tools) ## Train Fashion-MNIST for real as Kubeflow's PyTorch guide does, through the trainyard CLI: dataset initializer, then 2 torchrun nodes on a process node; RUN_ARGS=-containers: in real containers on 2 container nodes (the images of make images), RUN_ARGS=-quick trains the synthetic MNIST example, RUN_ARGS=-kueue queues the guide's TrainJob in Kueue (admitted as one gang), RUN_ARGS=-tune searches its learning rate and batch size with an OptimizationJob of 4 trials, RUN_ARGS=-keep keeps the cluster.
	@# Builds Trainyard's binaries and what its cluster runs (only that), with the
	@# Debian packages installing meanwhile; one line per step.
	@MAKE="$(MAKE)" test/tools/prepare.sh run $(RUN_ARGS)
	@# The process node runs the host's programs: the local runtime's initializer is this one.
	@if [ "$$(id -u)" = 0 ]; then install -m 0755 $(BIN)/trainyard-initializer /usr/local/bin/trainyard-initializer; fi
	$(BIN)/trainyard-local run $(RUN_ARGS)

##@ Build

.PHONY: build
build: ## Build the manager, the trainyard CLI (docs/cli.md; also as the kubectl plugin kubectl-trainyard), trainyard-local (the local cluster, docs/local-cluster.md), the process node agent trainyard-node and trainyard-initializer into bin/.
	@# Download quietly first, so a cold build prints no `go: downloading` flood.
	@go mod download
	@mkdir -p $(BIN)
	@# One go build of the five: their packages compile once and their links overlap.
	CGO_ENABLED=0 go build -trimpath -ldflags="$(LDFLAGS)" -o $(BIN)/ ./cmd/trainyard-manager ./cmd/trainyard ./cmd/trainyard-local ./cmd/trainyard-node ./cmd/trainyard-initializer
	@# The CLI as a kubectl plugin (`kubectl trainyard`), and the name kubectl runs to complete it.
	ln -sf trainyard $(BIN)/kubectl-trainyard
	ln -sf trainyard $(BIN)/kubectl_complete-trainyard

.PHONY: images
images: ## Build the images without docker (pkg/images, cmd/trainyard-images): the manager's and the initializer's (trainyard.local/<name>:$(VERSION), reproducible) and the training images torch, mpi, xgboost (trainyard.local/<name>:bookworm; root, debootstrap); OCI archives bin/images/<name>.oci.tar, rebuilt only when their inputs change. TRAINING_IMAGES=false leaves the training images out.
	@CGO_ENABLED=0 go build -o $(BIN)/trainyard-images ./cmd/trainyard-images
	$(BIN)/trainyard-images -out $(BIN)/images -version $(VERSION) -commit $(GIT_COMMIT) -source-date-epoch $(SOURCE_DATE_EPOCH) -ldflags "$(LDFLAGS)" -training=$(TRAINING_IMAGES)

.PHONY: debian-packages
debian-packages: ## Install the Debian packages the process node's pods run (torch, OpenMPI, XGBoost, ...) when missing.
	@pkg/localcluster/packages/debian-packages.sh

.PHONY: k8s-tools
k8s-tools: ## Build etcd, kube-apiserver and kube-controller-manager from Go modules into bin/k8s (cached).
	test/tools/build.sh $(K8S_BIN) $(K8S_TOOLS)

.PHONY: cluster-tools
cluster-tools: build ## Build everything a local cluster runs (bin/k8s: control plane, kubectl, kwok, JobSet, Kueue, and GANG_SCHEDULER's binaries; cached), the manager and the process node agent.
	test/tools/build.sh $(K8S_BIN) $(CLUSTER_TOOLS) $(GANG_TOOLS_$(GANG_SCHEDULER))

$(CONTROLLER_GEN): test/tools/controller-gen/go.mod test/tools/controller-gen/go.sum
	cd test/tools/controller-gen && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

##@ Local cluster

.PHONY: cluster-up
cluster-up: cluster-tools $(if $(findstring --container-nodes,$(CLUSTER_ARGS)),container-node-tools) ## Start the local cluster (kwok nodes, JobSet, Kueue, the manager) on 127.0.0.1; state and logs in bin/cluster. GANG_SCHEDULER=volcano|coscheduling adds that gang scheduler.
	$(BIN)/trainyard-local up --state-dir $(CLUSTER_DIR) $(CLUSTER_ARGS) $(if $(GANG_SCHEDULER),--gang-scheduler=$(GANG_SCHEDULER))

.PHONY: cluster-down
cluster-down: ## Stop the local cluster started by cluster-up (logs stay in bin/cluster/logs).
	CGO_ENABLED=0 go build -trimpath -ldflags="$(LDFLAGS)" -o $(BIN)/trainyard-local ./cmd/trainyard-local
	$(BIN)/trainyard-local down --state-dir $(CLUSTER_DIR)

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, CRDs, RBAC and the webhook configurations from the Go types and markers.
	$(CONTROLLER_GEN) object paths=./apis/...
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true,maxDescLen=120 paths=./apis/... output:crd:artifacts:config=manifests/base/crds
	go run ./test/tools/crddesc manifests/base/crds/*_*.yaml
	$(CONTROLLER_GEN) rbac:roleName=trainyard-manager paths=./pkg/... output:rbac:artifacts:config=manifests/base/rbac
	$(CONTROLLER_GEN) webhook paths=./pkg/controller/... output:webhook:artifacts:config=manifests/base/webhook
	go run ./test/tools/chartkinds manifests/charts/trainyard/files/kinds.yaml

.PHONY: verify-generated
verify-generated: generate ## Fail if generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- apis manifests/base/crds manifests/base/rbac manifests/base/webhook manifests/charts/trainyard/files/kinds.yaml)" ]; then \
	  echo "Generated files are stale; run 'make generate' and commit:"; \
	  git status --porcelain -- apis manifests/base/crds manifests/base/rbac manifests/base/webhook manifests/charts/trainyard/files/kinds.yaml; git diff --stat; exit 1; fi
	@echo "generated files are up to date"

##@ Test

.PHONY: test-tools
test-tools: ## Build everything make test runs from Go modules in one pass (bin/k8s: the cluster's tools and the container nodes'; the kubernetes binary linked once), with the Debian packages (the process node's and the container nodes') installing meanwhile.
	@MAKE="$(MAKE)" test/tools/prepare.sh tools --container-packages $(CLUSTER_TOOLS) $(CONTAINER_NODE_TOOLS)

.PHONY: test
test: test-tools verify-generated vet cluster-tools helm debian-packages deployed-tools ## Run every test: unit, manifests and chart, integration on a real kube-apiserver + etcd, e2e on the local cluster (kwok, process and container nodes; the chart as deployed), and a short fuzz pass.
	@# test/deployed_e2e after the rest: one cluster with container nodes runs per host
	@# (pkg/localcluster), and it holds the host for minutes, longer than TestContainerNode
	@# would wait for it beside it.
	go test -timeout 40m $(GO_TEST_FLAGS) $$(go list ./... | grep -v '/test/deployed_e2e$$')
	go test -timeout 30m $(GO_TEST_FLAGS) ./test/deployed_e2e/
	$(MAKE) --no-print-directory fuzz FUZZTIME=$${CI_FUZZTIME:-10s}

.PHONY: deployed-tools
deployed-tools: cluster-tools container-node-tools helm images ## Build what test/deployed_e2e needs besides the cluster: the container nodes' kubelet, kube-proxy, CoreDNS and volume provisioner, their Debian packages (containerd, runc, CNI plugins), bin/helm and the images.

.PHONY: container-node-tools
container-node-tools: ## Build the container nodes' kubelet, kube-proxy, CoreDNS and volume provisioner into bin/k8s (cached) and install their Debian packages (containerd, runc, CNI plugins) when missing.
	test/tools/build.sh $(K8S_BIN) $(CONTAINER_NODE_TOOLS)
	@$(CURDIR)/pkg/localcluster/packages/container-node-packages.sh

.PHONY: e2e-deployed
e2e-deployed: deployed-tools ## Run Trainyard as deployed (test/deployed_e2e): the Helm chart installed with bin/helm and the image of make images on a local cluster of container nodes, no manager process; training, upgrade, uninstall, the standalone overlay.
	go test -count=1 -timeout 30m $(GO_TEST_FLAGS) ./test/deployed_e2e/

# The tests of pkg/localcluster that bring a whole local cluster up (as root, with
# bin/k8s built): they sit beside the package because they check its internals
# (processes, bridges, cgroups left after Down), but they are e2e, not unit tests.
# pkg/images' TestTrainingImages (root, debootstrap, minutes) is not a unit test either.
LOCAL_CLUSTER_TESTS := ^(TestSmoke|TestContainerNode|TestTrainingImages)$$

.PHONY: test-unit
test-unit: ## Run the unit, manifest and chart tests (test/manifests also checks against a kube-apiserver when bin/k8s has one), without pkg/localcluster's tests that start a cluster and pkg/images' debootstrap build.
	go test $(GO_TEST_FLAGS) -skip '$(LOCAL_CLUSTER_TESTS)' ./apis/... ./pkg/... ./test/manifests/...

.PHONY: test-integration
test-integration: k8s-tools ## Run the integration suite against a real kube-apiserver + etcd.
	go test $(GO_TEST_FLAGS) ./test/integration/...

# Fuzz targets: package:target. go test fuzzes one target at a time.
FUZZ_TARGETS := ./pkg/runtime/framework:FuzzBuild ./pkg/validation:FuzzValidateTrainJob ./pkg/validation:FuzzValidateRuntimeSpec \
  ./pkg/webhooks:FuzzDefaultTrainJob ./pkg/runtime:FuzzV21V23Agree \
  ./pkg/statusserver:FuzzDecode ./pkg/statusserver:FuzzDecodeRoundTrip
FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: ## Fuzz the pipeline, the validators, defaulting, the v2.1/v2.3 override forms and the status payload, FUZZTIME each (default 1m; e.g. FUZZTIME=30m for a long run).
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzzing $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
	  go test $${t%%:*} -run='^$$' -fuzz="^$${t#*:}\$$" -fuzztime=$(FUZZTIME) 2>&1 | tail -3; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

##@ Performance

BENCH_N    ?= 1000
BENCH_ARGS ?=
CHAOS_ARGS ?=

.PHONY: bench
bench: cluster-tools ## Burst BENCH_N TrainJobs (default 1000) at the local cluster: rate vs a plain client, latency, requests per job, writes at rest, CPU/RSS; writes bin/perf/result.{json,md}, CPU profiles of each burst, docs/performance.md and its plots in docs/perf/. Not part of make test.
	go test -run '^$$' -bench . -benchmem ./pkg/controller/... | tee $(BIN)/perf-go-bench.txt
	CGO_ENABLED=0 go build -o $(BIN)/trainyard-bench ./test/perf/bench
	$(BIN)/trainyard-bench -n $(BENCH_N) -docs docs/performance.md -go-bench $(BIN)/perf-go-bench.txt -profile 20s $(BENCH_ARGS)
	@# The pictures (gonum/plot, in a tool module of its own): latency CDF and JobSets over time per phase.
	cd test/tools/benchplot && go run . -samples $(BIN)/perf/samples.json -out $(CURDIR)/docs/perf

.PHONY: benchstat
benchstat: ## Build benchstat from its Go module (test/tools/benchstat) into bin/, to compare Go benchmark runs (docs/performance.md).
	cd test/tools/benchstat && go build -o $(BIN)/benchstat golang.org/x/perf/cmd/benchstat

.PHONY: chaos
chaos: cluster-tools ## 1000 TrainJobs (CHAOS_ARGS="-n 10000 -suspend ..." for the 10k point), 2 manager replicas; SIGKILL the leader 5 times, restart the API server and etcd once, delete a kwok node with running pods; fail unless every job has one JobSet and completes, with no status going backwards.
	CGO_ENABLED=0 go build -o $(BIN)/trainyard-chaos ./test/perf/chaos
	$(BIN)/trainyard-chaos $(CHAOS_ARGS)

.PHONY: vet
vet: ## go vet and gofmt.
	@out=$$(gofmt -l apis cmd pkg test); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

##@ Verify

GOLANGCI_LINT := $(BIN)/golangci-lint
# Tool modules whose go.mod/go.sum `make verify` keeps tidy besides the main one.
TOOL_MODULES := $(patsubst %/go.mod,%,$(wildcard test/tools/*/go.mod))

.PHONY: golangci-lint
golangci-lint: ## Build golangci-lint from its Go module (test/tools/golangci-lint) into bin/golangci-lint (cached; rebuilt when that go.mod/go.sum change).
	@stamp=$$(cat test/tools/golangci-lint/go.mod test/tools/golangci-lint/go.sum | sha256sum | cut -c1-16); \
	if [ -x $(GOLANGCI_LINT) ] && [ "$$(cat $(BIN)/.golangci-lint.stamp 2>/dev/null)" = "$$stamp" ]; then exit 0; fi; \
	echo "building golangci-lint (from test/tools/golangci-lint) ..."; \
	mkdir -p $(BIN); cd test/tools/golangci-lint; \
	version=$$(go list -m -f '{{.Version}}' github.com/golangci/golangci-lint/v2); \
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=$${version#v} -X main.date=test/tools/golangci-lint" -o $(GOLANGCI_LINT).tmp github.com/golangci/golangci-lint/v2/cmd/golangci-lint; \
	mv $(GOLANGCI_LINT).tmp $(GOLANGCI_LINT); echo "$$stamp" > $(BIN)/.golangci-lint.stamp

.PHONY: lint
lint: golangci-lint ## Run golangci-lint with .golangci.yml.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify-tidy
verify-tidy: ## Fail if go mod tidy would change go.mod/go.sum (the main module and test/tools/*).
	@fail=0; for m in . $(TOOL_MODULES); do \
	  if ! out=$$(cd $$m && go mod tidy -diff 2>&1); then echo "go mod tidy needed in $$m:"; echo "$$out"; fail=1; fi; \
	done; test $$fail -eq 0 && echo "go.mod/go.sum are tidy"

.PHONY: verify
verify: vet lint verify-tidy verify-generated ## Static checks, no cluster needed: gofmt, go vet, golangci-lint, go mod tidy, generated files up to date.

.PHONY: clean
clean: ## Remove built binaries (bin/).
	rm -rf $(BIN)

##@ Helm chart

HELM := $(BIN)/helm

.PHONY: helm
helm: ## Build helm from its Go module (test/tools/helm) into bin/helm (cached; rebuilt when that go.mod/go.sum change).
	@stamp=$$(cat test/tools/helm/go.mod test/tools/helm/go.sum | sha256sum | cut -c1-16); \
	if [ -x $(HELM) ] && [ "$$(cat $(BIN)/.helm.stamp 2>/dev/null)" = "$$stamp" ]; then exit 0; fi; \
	echo "building helm (from test/tools/helm) ..."; \
	cd test/tools/helm; \
	version=$$(go list -m -f '{{.Version}}' helm.sh/helm/v3); \
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$$version" -o $(HELM).tmp helm.sh/helm/v3/cmd/helm; \
	mv $(HELM).tmp $(HELM); echo "$$stamp" > $(BIN)/.helm.stamp

.PHONY: chart-test
chart-test: helm k8s-tools ## Lint and render the Helm chart, check it and the runtimes against manifests/base, and install it on a real kube-apiserver.
	$(HELM) lint --strict manifests/charts/trainyard
	go test $(GO_TEST_FLAGS) ./test/manifests/ -run '^(TestChart|TestRuntime|TestAgainstAPIServer)'
