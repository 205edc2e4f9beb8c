# sqs-once: see README.md. `make demo` runs the pipeline locally, `make test` runs every check CI runs.

GO          ?= go
GOOS_LAMBDA  = linux
GOARCH_LAMBDA = arm64
# Flags for the Lambda binaries: static, no RPC shim (provided.al2023 speaks the
# Runtime API directly), reproducible paths, no symbol tables.
LAMBDA_BUILD = CGO_ENABLED=0 GOOS=$(GOOS_LAMBDA) GOARCH=$(GOARCH_LAMBDA) \
	$(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'
BIN_DIR     ?= bin

# Every go command of every recipe, and those the tests run, builds with
# -trimpath: without it the build cache keys each package on the directory
# it is in, so a fresh clone compiles every package of the repository again
# (with -race, some 190 s of CPU); with it, a clone reuses what another clone
# of the same code compiled (some 80 s of CPU: the links). It also keeps the
# clone's path out of the binaries. A GOFLAGS of your own is kept after it.
export GOFLAGS := -trimpath $(GOFLAGS)

# dynalite (npm), the second DynamoDB the store's tests run against, is
# installed in the repository's .tools directory (gitignored) at this version;
# internal/local/dynalite pins the same one (a test keeps them equal).
DYNALITE_VERSION = 4.0.0
DYNALITE_INSTALL = npm install --prefix .tools --no-audit --no-fund --save-exact dynalite@$(DYNALITE_VERSION)
# The version installed in .tools ("" when none).
DYNALITE_INSTALLED = $$(node -p "require('./.tools/node_modules/dynalite/package.json').version" 2>/dev/null)

# DynamoDB Local (Amazon's own DynamoDBLocal.jar, with its native libraries),
# the third DynamoDB the store's tests run against, comes in the npm package
# amplify-dynamodb-simulator, installed in .tools as dynalite is, at this
# version; internal/local/dynamodblocal pins the same one (a test keeps them
# equal). Java 17 runs it (setup installs openjdk-17-jre-headless).
DYNAMODB_LOCAL_VERSION = 2.9.30
DYNAMODB_LOCAL_INSTALL = npm install --prefix .tools --no-audit --no-fund --save-exact amplify-dynamodb-simulator@$(DYNAMODB_LOCAL_VERSION)
# The version installed in .tools ("" when none).
DYNAMODB_LOCAL_INSTALLED = $$(node -p "require('./.tools/node_modules/amplify-dynamodb-simulator/package.json').version" 2>/dev/null)

# The Python tools (requirements-dev.txt) that setup installs into .venv when
# the machine lacks them come first on PATH, for every recipe. Always, not
# only when .venv exists: setup may create it in this very run, and the shell
# skips a directory that is not there.
export PATH := $(CURDIR)/.venv/bin:$(PATH)

# The repository is several Go modules (docs/development.md, "Modules"): the
# library, the PostgreSQL and Redis stores, the processor, the operator CLI,
# the local harness (local/) and the examples, joined by go.work. In the
# workspace one go command builds, vets or tests the packages of them all:
# these patterns name every package of every module.
PACKAGES = github.com/sqs-once/sqs-once/... example.com/...
# go test starts packages in the order named: the longest first, so that
# they do not start last and run alone while the other core idles.
# (Every package that took more than 25 s in a fresh clone's run.)
SLOW_PACKAGES = github.com/sqs-once/sqs-once/local/demo github.com/sqs-once/sqs-once/local/templatetest \
	github.com/sqs-once/sqs-once/sqsonce/store/pgstore github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops \
	github.com/sqs-once/sqs-once/sqsonce/store/dynamostore github.com/sqs-once/sqs-once/sqsonce \
	github.com/sqs-once/sqs-once/sqsonce/targets example.com/txorders github.com/sqs-once/sqs-once/local/cmd/sqs-once-local \
	github.com/sqs-once/sqs-once/cmd/sqs-once/samstack github.com/sqs-once/sqs-once/internal/local/motoserver

# The processor's tests on the Redis store are a test file of package
# sqsonce kept in the Redis store's module (its testdata), which the
# library's module may not import; this overlay compiles it into sqsonce's
# tests (written by redis-overlay).
REDIS_OVERLAY = $(BIN_DIR)/redis-overlay.json
REDIS_TESTS = sqsonce/store/redisstore/testdata/proc_redis_integration_test.go

# MODEL_JOBS: how many of the model's searches run at once ("": one per core).
MODEL_JOBS ?=

# TEST_P: how many packages' tests go test runs at once (its -p). Three on
# two cores: the tests wait on servers and clocks as much as they compute
# (a fresh clone here: 7:13 with two, 6:05 with three). Two tests that
# failed with three under load are mended: a demo invocation past its
# function timeout (TestDemoTxCrashCommitsOnce now counts such ones), and a
# CreateStack retried after a slow answer (samstack takes its own stack).
TEST_P ?= 3

# TESTFLAGS go to every go test of unit: -count=1 runs each test again
# even when go test's cache has its result (the cache keys a result on the
# test binary and the files and environment variables the test read).
TESTFLAGS ?=

# setup (local/setup) installs what the machine lacks for -for demo or
# -for test and says once what only the user can install; a no-op when all is
# there. SETUP_FLAGS: -dry-run prints the plan and installs nothing; -pip=false
# reports missing Python tools instead of installing them (.ci/run). Run from
# go's build cache (GO_EXE), not by `go run`: that would add its own "exit
# status 1" to setup's one message.
SETUP = $(call GO_EXE,local,./setup) && "$$exe" -dynalite $(DYNALITE_VERSION) -dynamodb-local $(DYNAMODB_LOCAL_VERSION)

# GO_EXE sets the shell's exe to the executable of main package $(2) of
# module $(1) as `go run` keeps it in go's build cache (Go 1.24 and later):
# a clone whose code this machine built before runs it without linking it
# again (a link is seconds, more on a busy machine; go build -o links every
# time). The first `go run` of new code links it where it removes it on
# exit and caches it: a second asks the cache (-exec /bin/echo: the
# path, not a run; an absolute path, as PATH may lack echo). Where the cache keeps no
# executable (GOCACHE=off), go build -o $(BIN_DIR).
GO_EXE = exe=$$($(GO) -C $(1) run -exec /bin/echo $(2)) && { [ -x "$$exe" ] || exe=$$($(GO) -C $(1) run -exec /bin/echo $(2)); } && \
	{ [ -x "$$exe" ] || { $(GO) -C $(1) build -o $(abspath $(BIN_DIR))/$(notdir $(2)) $(2) && exe=$(abspath $(BIN_DIR))/$(notdir $(2)); }; }

STACK_NAME  ?= sqs-once
SAR_BUCKET  ?=

.PHONY: demo try test cli tidy model-all release-check redis-overlay setup setup-demo check-tools install-dynalite install-dynamodb-local unit lint model model-mutants bench bench-moto fuzz build clean \
	build-ProcessorFunction build-DlqReplayerFunction \
	sam-build package publish

## demo: run the whole pipeline on a local moto_server and print the report
## (installs moto_server and the SAM translator first when they are missing)
demo: setup-demo
	@$(call GO_EXE,local,./cmd/sqs-once-local) && echo "sqs-once-local $(DEMO_FLAGS)" && "$$exe" $(DEMO_FLAGS)

## try: the no-code path on the laptop: deploy template.yaml with PARAMS
## (e.g. PARAMS="Target=lambda:orders-consumer ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:orders")
## on a local moto_server in front of a stand-in consumer and queue, run both
## for real until Ctrl-C, and print how to point bin/sqs-once (built here) at it
try: setup-demo cli
	@$(call GO_EXE,local,./cmd/sqs-once-local) && echo "sqs-once-local try -cli $(abspath $(BIN_DIR))/sqs-once $(PARAMS)" && "$$exe" try -cli $(abspath $(BIN_DIR))/sqs-once $(PARAMS)

## cli: the operator CLI (cmd/sqs-once, docs/operations.md) as bin/sqs-once;
## `bin/sqs-once --version` prints the release (internal/version). To put it
## on PATH instead: go -C cmd/sqs-once install .
cli:
	$(GO) -C cmd/sqs-once build -o $(abspath $(BIN_DIR))/sqs-once .

## test: the tools (setup installs what is missing), lint, the lock protocol's
## model and its mutants, then every test with the race detector: the hermetic
## ones (plain `go test ./...` runs only those, and needs only Go) and those
## tagged integration (moto_server, dynalite, redis-server, PostgreSQL, spin,
## cfn-lint, tmux, the AWS CLI)
test: setup
	@# The model's searches (one at a time: CPU-bound, minutes when nothing is
	@# cached), lint and the tests side by side: the tests leave a core idle
	@# while they wait on servers, and lint (half a minute even when its
	@# caches answer) need not hold them back; make waits for all three and
	@# fails if any does.
	@$(MAKE) --no-print-directory -j3 model-all MODEL_JOBS=1 lint unit

unit: redis-overlay
	@# Every package of every module at once, the hermetic tests and those
	@# tagged integration; go test runs TEST_P packages side by side, and
	@# answers from its cache for a package whose test
	@# binary and inputs did not change. -timeout bounds one package: the
	@# template's runs cfn-lint on some thirty templates beside deployments.
	@# withmoto: one moto_server for every test binary that would start its
	@# own (mototest.Main; internal/local/motoserver/withmoto).
	@# Beside them, on the same server, the processor built with the
	@# Redis store (STORE=redis), which the default build leaves out: two
	@# small packages that would otherwise run alone after the rest. unit
	@# fails if either go test does.
	@$(GO) build -o $(BIN_DIR)/withmoto ./internal/local/motoserver/withmoto
	$(BIN_DIR)/withmoto sh -c '$(GO) test -race -tags "integration redis" $(TESTFLAGS) ./internal/storeenv/ ./cmd/processor/ & redis=$$!; \
		$(GO) test -race -tags integration -timeout 30m -p $(TEST_P) -overlay $(REDIS_OVERLAY) $(TESTFLAGS) $(SLOW_PACKAGES) $(PACKAGES); all=$$?; \
		wait $$redis || exit 1; exit $$all'

## redis-overlay: writes $(REDIS_OVERLAY), which puts the processor's tests
## on the Redis store into package sqsonce's (go test -overlay)
redis-overlay:
	@mkdir -p $(BIN_DIR)
	@printf '{"Replace":{"%s":"%s"}}\n' "$(CURDIR)/sqsonce/proc_redis_integration_test.go" "$(CURDIR)/$(REDIS_TESTS)" > $(REDIS_OVERLAY)

## tidy: go mod tidy in every module, against this checkout's modules
## (local/releasecheck -tidy: no proxy serves their version before it is
## tagged)
tidy:
	@$(GO) build -o $(BIN_DIR)/releasecheck ./local/releasecheck && $(BIN_DIR)/releasecheck -tidy

## release-check: what a release needs, checked offline (local/releasecheck):
## no replace in any module, one version in every requirement of the
## repository's modules, go.work, the template, the CHANGELOG and
## `sqs-once --version`; every module tidy; a DynamoDB user's module graph
## without another store's driver; the CLI's without the harness, built in
## module mode against this checkout's modules served at that version (what
## `go install` fetches once they are tagged: docs/development.md, "Releasing")
release-check:
	@$(GO) build -o $(BIN_DIR)/releasecheck ./local/releasecheck && $(BIN_DIR)/releasecheck

## setup: installs what `make test` (and `make demo`) needs and the machine
## lacks: the Python tools into .venv (pip, requirements-dev.txt), spin, gcc,
## tmux, redis-server, postgresql-15 and openjdk-17-jre-headless (apt-get, as
## root; otherwise it prints the sudo line), dynalite and DynamoDB Local into
## .tools (npm); says once what only you can install (Node.js)
setup:
	@$(SETUP) -for test $(SETUP_FLAGS)

## setup-demo: setup for `make demo` alone (moto_server, the SAM translator)
setup-demo:
	@$(SETUP) -for demo $(SETUP_FLAGS)

## check-tools: installs nothing; fails, printing what setup would install and
## what to run, when a tool `make test` needs is missing
check-tools:
	@$(SETUP) -for test -dry-run $(SETUP_FLAGS)

## install-dynalite: dynalite, at the pinned version, into .tools, unless it
## is there (needs Node.js 20 or later, with npm)
install-dynalite:
	@[ "$(DYNALITE_INSTALLED)" = "$(DYNALITE_VERSION)" ] || $(DYNALITE_INSTALL)

## install-dynamodb-local: DynamoDB Local (amplify-dynamodb-simulator), at the
## pinned version, into .tools, unless it is there (needs npm; Java 17 runs it)
install-dynamodb-local:
	@[ "$(DYNAMODB_LOCAL_INSTALLED)" = "$(DYNAMODB_LOCAL_VERSION)" ] || $(DYNAMODB_LOCAL_INSTALL)

## lint: gofmt, go vet of every module, releasecheck -lint (no replace, one
## version, every module tidy, a DynamoDB user's graph without the other
## stores' drivers) and cfn-lint on the SAM template
lint: redis-overlay
	@unformatted="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags integration -overlay $(REDIS_OVERLAY) $(PACKAGES)
	$(GO) vet -tags 'integration redis' ./internal/storeenv/ ./cmd/processor/
	@$(GO) build -o $(BIN_DIR)/releasecheck ./local/releasecheck && $(BIN_DIR)/releasecheck -lint
	@command -v cfn-lint >/dev/null || { echo "cfn-lint is not on PATH: make setup installs it into .venv" >&2; exit 1; }
	@# Through cfn-lint's verdicts cached on disk (internal/local/cfnlint):
	@# the template's tests lint the same bytes, and a second run lints none.
	@$(GO) build -o $(BIN_DIR)/cfnlint-cached ./local/cmd/cfnlint-cached
	$(BIN_DIR)/cfnlint-cached template.yaml

## model: spin's exhaustive search of the lock protocol's Promela model (sqsonce/model);
## fails on any error, and when spin is missing
model:
	sqsonce/model/run.sh check

## model-mutants: fails unless spin catches every seeded bug of the model
model-mutants:
	sqsonce/model/run.sh mutants

## model-all: model and model-mutants in one pool of searches, MODEL_JOBS at
## once (default: one per core);
## a search whose inputs are unchanged answers from the cache of passing
## verdicts (sqsonce/model/README.md; MODEL_CACHE=0 searches again)
model-all:
	MODEL_JOBS=$(MODEL_JOBS) sqsonce/model/run.sh all

## bench: the client side's figures next to their targets (issue 24), for
## this tree and BENCH_BASELINE in one run (local/benchreport): per record
## time, CPU, instructions (valgrind's callgrind, when installed),
## allocations and DynamoDB calls against endpoints that answer at once; the
## processor's init time and peak RSS; the bootstrap's size; then a record
## on the DynamoDB store (moto_server) beside one on the Redis store
## (redis-server); then the store calls of a record that emits messages
BENCH_BASELINE ?= 8ee3409
bench: redis-overlay
	$(GO) -C local run ./benchreport -baseline '$(BENCH_BASELINE)' $(BENCH_FLAGS)
	@# A record on each store, beside each other: DynamoDB on moto_server,
	@# Redis on redis-server, both local (docs/benchmarks.md, the two stores).
	$(GO) test -tags integration -run '^$$' -bench '^BenchmarkRecord(OnRedis)?$$' -benchmem -overlay $(REDIS_OVERLAY) ./sqsonce/
	@# A record whose handler emits 0, 1 or 10 messages: the store's calls
	@# in memory and on moto_server (docs/benchmarks.md, exactly-once emits).
	$(GO) test -tags integration -run '^$$' -bench '^BenchmarkEmit(OnDynamoDB)?$$' -benchtime 200x -benchmem ./sqsonce/

## bench-moto: what a record costs against moto_server and in memory, and a
## batch of ten 200 ms records (go test -bench of ./sqsonce/...)
bench-moto: redis-overlay
	$(GO) test -tags integration -run '^$$' -bench . -benchmem -overlay $(REDIS_OVERLAY) ./sqsonce/...

## fuzz: each fuzz target of the parsers of outside input for FUZZTIME (go
## test -fuzz takes one target per run); a failing input is written to the
## package's testdata/fuzz/<target>, where plain `go test` runs it from then on
FUZZTIME ?= 30s
FUZZ = $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -fuzz
fuzz:
	$(FUZZ) '^FuzzKeyFromBody$$' ./sqsonce
	$(FUZZ) '^FuzzParseKeySource$$' ./sqsonce
	$(FUZZ) '^FuzzConfigFromEnv$$' ./sqsonce
	$(FUZZ) '^FuzzLambdaBatchResponse$$' ./sqsonce/targets
	$(FUZZ) '^FuzzTargetFromEnv$$' ./sqsonce/targets
	$(FUZZ) '^FuzzRecordAttributes$$' ./internal/sqsmsg
	$(FUZZ) '^FuzzSameQueue$$' ./internal/sqsmsg
	$(FUZZ) '^FuzzNewEvent$$' ./internal/local/localesm
	$(FUZZ) '^FuzzReplayDecide$$' ./internal/replay
	$(FUZZ) '^FuzzLoadConfig$$' ./internal/replay
	$(FUZZ) '^FuzzEMF$$' ./internal/metrics
	$(FUZZ) '^FuzzParse$$' ./internal/metrics
	$(FUZZ) '^FuzzReader$$' ./internal/envconfig

## build: both Lambda binaries, linux/arm64, as bin/<function>/bootstrap
build:
	$(MAKE) build-ProcessorFunction ARTIFACTS_DIR=$(BIN_DIR)/processor
	$(MAKE) build-DlqReplayerFunction ARTIFACTS_DIR=$(BIN_DIR)/dlq-replayer

# Called by `sam build` (BuildMethod: makefile) with ARTIFACTS_DIR set.
build-ProcessorFunction:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set" >&2; exit 1; }
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./cmd/processor

build-DlqReplayerFunction:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set" >&2; exit 1; }
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./cmd/dlq-replayer

## sam-build, package, publish: need the sam CLI and AWS credentials; never run in CI
sam-build:
	sam build

package: sam-build
	@test -n "$(SAR_BUCKET)" || { echo "set SAR_BUCKET to an S3 bucket the Serverless Application Repository can read" >&2; exit 1; }
	sam package --s3-bucket $(SAR_BUCKET) --output-template-file packaged.yaml

publish: package
	sam publish --template packaged.yaml

clean:
	rm -rf $(BIN_DIR) .aws-sam packaged.yaml
