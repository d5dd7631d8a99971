# Build and test the gateway. `make test` is what CI runs (.ci/run): it
# installs what is missing, checks the generated templ code, then side by
# side lints (gofmt, go vet, staticcheck: `make lint`), type-checks the
# TypeScript declarations (`make types`), runs the Go tests with the race
# detector and the Node tests (`make node-test`); then the cluster test
# (`make cluster-test`), the Playwright specs against the built binary, and
# a user's suite on the test kit (`make user-suite`).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO       ?= go
GOFMT    ?= $(shell $(GO) env GOROOT)/bin/gofmt
BIN      := bin/gateway
CHROMIUM := /usr/bin/chromium
SUDO     := $(if $(filter 0,$(shell id -u)),,sudo)
# Extra arguments for Playwright, e.g. make e2e E2E_ARGS='e2e/reload.spec.ts --headed'.
E2E_ARGS ?=

.PHONY: types user-suite cluster-test test build generate generate-check vendor vendor-check lint fmt fmt-check shape-check vet staticcheck unit node-test e2e bench bench-page screenshot deps chromium clean

# The checks before Playwright run side by side (-j3): the race-detected
# unit tests leave a core idle part of their time, which lint, types and
# the Node tests fill. Each one's output is printed whole when it ends.
# cluster-test runs alone, then the Playwright specs, which keep both cores
# busy by themselves.
test: deps generate-check vendor-check
	$(MAKE) --no-print-directory -j3 --output-sync=target lint types unit node-test
	$(MAKE) --no-print-directory cluster-test
	npx playwright test $(E2E_ARGS)
	$(MAKE) --no-print-directory user-suite

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

# The chat page's third-party modules, copied as ES modules from node_modules
# (versions pinned in package.json and package-lock.json) into static/vendor/
# with their licences, so the page needs no bundler and the binary embeds
# them. To upgrade: npm install --save-dev --save-exact marked@X, then make
# vendor, and commit static/vendor/. Only the sourceMappingURL comment is
# dropped: the maps are not shipped.
VENDOR := static/vendor
vendor_into = mkdir -p $(1) && \
	sed '/^\/\/\# sourceMappingURL=/d' node_modules/marked/lib/marked.esm.js > $(1)/marked.js && \
	cp node_modules/marked/LICENSE $(1)/marked.LICENSE && \
	sed '/^\/\/\# sourceMappingURL=/d' node_modules/dompurify/dist/purify.es.mjs > $(1)/purify.js && \
	cp node_modules/dompurify/LICENSE $(1)/dompurify.LICENSE && \
	cp node_modules/dompurify/LICENSE-MPL $(1)/dompurify.LICENSE-MPL

vendor: node_modules
	$(call vendor_into,$(VENDOR))

# Fails if static/vendor/ is not what `make vendor` makes from the lockfile.
vendor-check: node_modules
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(call vendor_into,"$$tmp"); \
	for f in "$$tmp"/*; do \
		cmp -s "$$f" $(VENDOR)/"$$(basename "$$f")" || { echo "$(VENDOR)/$$(basename "$$f") differs from node_modules: run make vendor and commit it" >&2; exit 1; }; \
	done

# One after the other, even under make -j: vet and staticcheck compile the
# same packages, and side by side on a cold build cache each would.
lint:
	@$(MAKE) --no-print-directory fmt-check
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory staticcheck
	@$(MAKE) --no-print-directory shape-check

# The TypeScript declarations, type-checked (tsc --noEmit, TypeScript pinned
# in package.json): the SDK package's against its JS (static/types), a page
# written against the SDK package (examples/typed-page), the test kit's
# wire against its declarations (testkit), and a user's
# Playwright suite against the test kit's (examples/user-suite).
TSC_PROJECTS := static/types testkit examples/typed-page examples/user-suite
types:
	@for p in $(TSC_PROJECTS); do echo "tsc -p $$p"; npx tsc --noEmit -p $$p; done

# The Go files git knows of: tracked, or new and not ignored (so a new file is
# checked before it is committed), that exist in the working tree.
GO_FILES = git ls-files --cached --others --exclude-standard -- '*.go' | \
	while read -r f; do if [ -f "$$f" ]; then printf '%s\n' "$$f"; fi; done

# Rewrites the Go files in gofmt's style.
fmt:
	@$(GO_FILES) | xargs -r -d '\n' $(GOFMT) -w

# Fails, naming them, if gofmt would change any Go file.
fmt-check:
	@unformatted="$$($(GO_FILES) | xargs -r -d '\n' $(GOFMT) -l)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files: run make fmt (or gofmt -w on them)" >&2; \
		echo "$$unformatted" >&2; exit 1; \
	fi

# Fails, naming them, on a Go file past 800 lines (docs/decisions.md: split
# it by concern) and on a package whose doc comment is not in a doc.go.
shape-check:
	@long="$$($(GO_FILES) | grep -v '_templ\.go$$' | xargs -r -d '\n' wc -l | awk '$$2 != "total" && $$1 > 800 {print $$2 " (" $$1 " lines)"}')"; \
	if [ -n "$$long" ]; then \
		echo "these Go files pass 800 lines: split them by concern" >&2; echo "$$long" >&2; exit 1; \
	fi
	@missing="$$($(GO) list -f '{{.Dir}}' ./... | while read -r d; do [ -f "$$d/doc.go" ] || echo "$$d"; done)"; \
	if [ -n "$$missing" ]; then \
		echo "these packages have no doc.go (the package comment, its entry points and its concurrency contract):" >&2; echo "$$missing" >&2; exit 1; \
	fi

vet:
	$(GO) vet ./...

# Pinned by go.mod's tool directive: go get -tool honnef.co/go/tools/cmd/staticcheck@VERSION.
staticcheck:
	$(GO) tool staticcheck ./...

# Four packages' tests at a time, the slowest first: they wait on leases,
# timers and child processes much of their time, and with two at a time
# (go test's default here) the store's package started last and ran alone
# (194 s for these checks side by side, against 117 to 147 s).
unit:
	$(GO) test -race -p 4 ./store/jetstream ./cmd/gateway ./gateway ./engine ./...

# The Node worker helper's tests, workers/node/test/ (Node built-ins only, no
# npm install). No path argument: from Node 21 on, `node --test DIR` takes DIR
# for a glob and fails on a directory; without one it finds test/*.mjs.
# Then the HTTP front ends' tests, integrations/test/: the real `ai` and
# `@ag-ui/client` packages (make deps) against the built binary.
node-test: build
	cd workers/node && node --test
	node --test integrations/test/*.test.mjs

e2e: deps build
	npx playwright test $(E2E_ARGS)

# The test kit's own tests (testkit/test/, Node built-ins: startGateway
# against bin/gateway), then a user's own Playwright suite
# (examples/user-suite/, its own config), which uses only the published test
# kit: the kit starts bin/gateway with the suite's script. docs/testing.md.
# Then docs/ui.md's example suite, taken from the doc (e2e/ui-example.mjs).
user-suite: build
	cd testkit && node --test
	cd examples/user-suite && npx playwright test
	node e2e/ui-example.mjs

# The Go benchmarks, then gatewaybench: the AI SDK's harness when
# ../shared/peers/aisdk has it, then every phase on the memory store and on
# the durable JetStream store, and the issue's targets for each.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...
	$(GO) build -o bin/gatewaybench ./cmd/gatewaybench
	bin/gatewaybench -store memory,jetstream -cpuprofile bin/gateway-cpu.prof -memprofile bin/gateway-heap.prof

# The chat page's cost, in Chromium: what a render costs as a reply grows
# (e2e/bench/markdown.mjs), the page's main thread while a long reply
# streams into it from the gateway (e2e/bench/stream.mjs), and what a
# reload and a turn cost as a chat grows to 200 and 1,000 turns
# (e2e/bench/longchat.mjs). About 3 minutes.
bench-page: deps build
	node e2e/bench/markdown.mjs
	node e2e/bench/stream.mjs
	node e2e/bench/longchat.mjs

# Three NATS servers and three gateways on loopback: kill -9 one, SIGTERM
# another (docs/deploy.md). About 20 seconds; on its own, not beside the
# race-detected unit tests, so the nodes' leases are not starved of CPU.
cluster-test:
	CLUSTER_TEST=1 $(GO) test -run TestClusterFailover -count=1 -v ./cmd/gateway

# Rewrites docs/screenshot.png and docs/screenshot-dark.png (the same
# conversation in the dark theme) from the demo.
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
