# allowance-relay: the two commands a newcomer needs are `make demo` and `make test`.
SWIFT       ?= swift
PYTHON      ?= python3
VENV        ?= .venv
DEMO_SECONDS ?= 20
BIN         := .build/debug

.PHONY: all build demo test test-swift test-interop deps clean

all: build

# System libraries from Debian (libwebsockets for the WebSocket transport, SQLite for the store).
deps:
	@if ! pkg-config --exists libwebsockets 2>/dev/null || ! pkg-config --exists sqlite3 2>/dev/null \
	    || ! $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || ! command -v openssl >/dev/null; then \
	  echo "Installing libwebsockets-dev libsqlite3-dev pkg-config python3-venv openssl (apt-get)"; \
	  SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libwebsockets-dev libsqlite3-dev pkg-config python3-venv openssl; \
	fi

build: deps
	$(SWIFT) build

# The relay against the bundled hub simulator: events flow for DEMO_SECONDS, then both stop.
demo: build
	@rm -rf .build/demo; out=$$(mktemp); \
	$(BIN)/allowance-hub-sim --token demo-token --rate 1 --burst 3 --log-level warning > $$out & sim=$$!; \
	trap 'kill $$sim 2>/dev/null; rm -f $$out' EXIT INT TERM; \
	for i in $$(seq 100); do grep -q '^listening ' $$out && break; sleep 0.1; done; \
	url=$$(sed -n 's/^listening //p' $$out); \
	echo "hub simulator at $$url; relay runs for $(DEMO_SECONDS) s (Ctrl-C stops it sooner)"; \
	ALLOWANCE_RELAY_SERVER_URL=$$url timeout --preserve-status -s INT $(DEMO_SECONDS) \
	  $(BIN)/allowance-relay run --config config/demo.yaml

# Python SignalR peers for the interop tests (pinned in Tests/Interop/requirements.txt).
$(VENV)/.installed: Tests/Interop/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r Tests/Interop/requirements.txt
	touch $@

test: deps $(VENV)/.installed
	$(SWIFT) build
	$(VENV)/bin/python -m pytest -q Tests/Interop
	$(SWIFT) test

clean:
	rm -rf .build $(VENV)
