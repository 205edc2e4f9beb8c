# sqs-once: see README.md. `make demo` runs the pipeline locally, `make test` runs every check CI runs.

GO          ?= go
GOOS_LAMBDA  = linux
GOARCH_LAMBDA = arm64
# Flags for the Lambda binaries: static, no RPC shim (provided.al2023 speaks the
# Runtime API directly), reproducible paths, no symbol tables.
LAMBDA_BUILD = CGO_ENABLED=0 GOOS=$(GOOS_LAMBDA) GOARCH=$(GOARCH_LAMBDA) \
	$(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'
BIN_DIR     ?= bin

STACK_NAME  ?= sqs-once
SAR_BUCKET  ?=

.PHONY: demo test unit lint model model-mutants bench build clean \
	build-ProcessorFunction build-DlqReplayerFunction \
	sam-build package publish

## demo: run the whole pipeline on a local moto_server and print the report
demo:
	$(GO) run ./cmd/sqs-once-local $(DEMO_FLAGS)

## test: lint, the lock protocol's model and its mutants, then every test (unit and
## moto_server integration) with the race detector
test: lint model model-mutants unit

unit:
	$(GO) test -race -count=1 ./...

## lint: gofmt, go vet and cfn-lint on the SAM template
lint:
	@unformatted="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
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
	$(GO) test -run '^$$' -bench . -benchmem ./sqsonce ./internal/processor
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
