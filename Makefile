# sqs-once: see README.md. `make demo` runs the pipeline locally, `make test` runs every check CI runs.

GO          ?= go
GOOS_LAMBDA  = linux
GOARCH_LAMBDA = arm64
# Flags for the Lambda binaries: static, no RPC shim (provided.al2023 speaks the
# Runtime API directly), reproducible paths, no symbol tables.
LAMBDA_BUILD = CGO_ENABLED=0 GOOS=$(GOOS_LAMBDA) GOARCH=$(GOARCH_LAMBDA) \
	$(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'
BIN_DIR     ?= bin

# dynalite (npm), the second DynamoDB the store's tests run against, is
# installed in the module's .tools directory (gitignored) at this version;
# internal/local/dynalite pins the same one (a test keeps them equal).
DYNALITE_VERSION = 4.0.0
DYNALITE_INSTALL = npm install --prefix .tools --no-audit --no-fund --save-exact dynalite@$(DYNALITE_VERSION)
# The version installed in .tools ("" when none).
DYNALITE_INSTALLED = $$(node -p "require('./.tools/node_modules/dynalite/package.json').version" 2>/dev/null)

STACK_NAME  ?= sqs-once
SAR_BUCKET  ?=

.PHONY: demo test check-tools install-dynalite unit lint model model-mutants bench build clean \
	build-ProcessorFunction build-DlqReplayerFunction \
	sam-build package publish

## demo: run the whole pipeline on a local moto_server and print the report
demo:
	$(GO) run ./cmd/sqs-once-local $(DEMO_FLAGS)

## test: the tools, lint, the lock protocol's model and its mutants, then every
## test with the race detector: the hermetic ones (plain `go test ./...` runs
## only those, and needs only Go) and those tagged integration (moto_server,
## dynalite, spin, cfn-lint, tmux)
test: check-tools lint model model-mutants unit

unit:
	$(GO) test -race -count=1 -tags integration ./...
	@# The example is a module of its own, tested as a user tests theirs: on
	@# sqsoncetest's store, no AWS.
	cd examples/orders && $(GO) test -race -count=1 ./...

## check-tools: fails, with the command that installs each one, when a tool
## that `make test` needs is missing
check-tools:
	@missing=0; \
	need() { echo "missing: $$1; install it with: $$2" >&2; missing=1; }; \
	command -v moto_server >/dev/null || need moto_server "pip install 'moto[server]'"; \
	command -v cfn-lint >/dev/null || need cfn-lint "pip install cfn-lint"; \
	if ! command -v python3 >/dev/null; then need python3 "apt-get install -y python3"; \
	elif ! python3 -c 'import samtranslator' 2>/dev/null; then need "python3's samtranslator" "pip install aws-sam-translator"; fi; \
	command -v spin >/dev/null || need spin "apt-get install -y spin"; \
	command -v gcc >/dev/null || need gcc "apt-get install -y gcc"; \
	command -v tmux >/dev/null || need tmux "apt-get install -y tmux"; \
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then need "node and npm" "Node.js 20 or later, with npm (https://nodejs.org)"; \
	elif [ "$(DYNALITE_INSTALLED)" != "$(DYNALITE_VERSION)" ]; then \
	  need "dynalite $(DYNALITE_VERSION) in .tools" "$(DYNALITE_INSTALL)  (or: make install-dynalite)"; fi; \
	exit $$missing

## install-dynalite: dynalite, at the pinned version, into .tools, unless it
## is there (needs Node.js 20 or later, with npm)
install-dynalite:
	@[ "$(DYNALITE_INSTALLED)" = "$(DYNALITE_VERSION)" ] || $(DYNALITE_INSTALL)

## lint: gofmt, go vet and cfn-lint on the SAM template
lint:
	@unformatted="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags integration ./...
	@command -v cfn-lint >/dev/null || { echo "cfn-lint is not on PATH: pip install cfn-lint aws-sam-translator" >&2; exit 1; }
	cfn-lint template.yaml

## model: spin's exhaustive search of the lock protocol's Promela model (internal/dedupe/model);
## fails on any error, and when spin is missing
model:
	internal/dedupe/model/run.sh check

## model-mutants: fails unless spin catches every seeded bug of the model
model-mutants:
	internal/dedupe/model/run.sh mutants

## bench: what a record costs (DynamoDB calls, allocations, time; against
## moto_server and in memory), a batch of ten 200 ms records, the bootstrap's size
bench:
	$(GO) test -tags integration -run '^$$' -bench . -benchmem ./sqsonce/...
	$(MAKE) --no-print-directory build-ProcessorFunction ARTIFACTS_DIR=$(BIN_DIR)/processor
	@wc -c < $(BIN_DIR)/processor/bootstrap | awk '{printf "processor bootstrap (linux/arm64, stripped): %.1f MB\n", $$1/1e6}'

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
