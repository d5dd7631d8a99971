# Build and test the gateway. `make test` is what CI runs (.ci/run): it
# installs what is missing, checks the generated templ code, vets, runs the
# Go tests with the race detector, builds the binary and runs the Playwright
# specs against it.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO       ?= go
BIN      := bin/gateway
CHROMIUM := /usr/bin/chromium
SUDO     := $(if $(filter 0,$(shell id -u)),,sudo)
# Extra arguments for Playwright, e.g. make e2e E2E_ARGS='e2e/reload.spec.ts --headed'.
E2E_ARGS ?=

.PHONY: test build generate generate-check vet unit e2e bench screenshot deps chromium clean

test: deps generate-check vet unit build
	npx playwright test $(E2E_ARGS)

build:
	$(GO) build -o $(BIN) ./cmd/gateway

generate:
	$(GO) tool templ generate

# Regenerates web/*_templ.go and fails if that changed them: the generated
# code is committed, so `go run` needs no templ CLI. In CI the check is
# against the commit itself.
generate-check:
	@before="$$(cat web/*_templ.go | sha256sum)"; \
	$(GO) tool templ generate; \
	if [ "$$before" != "$$(cat web/*_templ.go | sha256sum)" ]; then \
		echo "web/*_templ.go were out of date with the .templ files: run make generate and commit them" >&2; exit 1; \
	fi
	@if [ -n "$${CI:-}" ]; then \
		git diff --exit-code -- web/ || { echo "web/ differs from the commit after templ generate" >&2; exit 1; }; \
		untracked="$$(git ls-files --others --exclude-standard -- 'web/*_templ.go')"; \
		if [ -n "$$untracked" ]; then echo "generated but not committed: $$untracked" >&2; exit 1; fi; \
	fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race ./...

e2e: deps build
	npx playwright test $(E2E_ARGS)

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	$(GO) build -o bin/gatewaybench ./cmd/gatewaybench
	bin/gatewaybench -cpuprofile bin/gateway-cpu.prof -memprofile bin/gateway-heap.prof

# Rewrites docs/screenshot.png from the running demo.
screenshot: deps build
	UPDATE_SCREENSHOT=1 npx playwright test e2e/screenshot.spec.ts

deps: chromium node_modules

# Debian's chromium, which Playwright drives (a browser download cannot work).
chromium:
	@if [ ! -x $(CHROMIUM) ]; then $(SUDO) apt-get update && $(SUDO) apt-get install -y chromium; fi

# npm ci when node_modules is missing or older than the lockfile.
node_modules: package-lock.json
	npm ci
	@touch node_modules

clean:
	rm -rf bin test-results playwright-report
