# allowance-relay: the two commands a newcomer needs are `make demo` and `make test`.
SHELL       := /bin/bash
SWIFT       ?= swift
PYTHON      ?= python3
VENV        ?= .venv
DEMO_SECONDS ?= 20
BIN         := .build/debug

.PHONY: all build demo test docs lint format deps test-deps deb deb-check bench bench-quick reliability sanitize fuzz clean

all: build

# System libraries from Debian: libwebsockets (WebSocket transport), SQLite (store), libsystemd (sd-bus, popups),
# libcurl (the HTTP client, and SMTP for e-mail), libmosquitto (the MQTT sink), OpenSSL's libcrypto (webhook signatures),
# libpq (relays sharing one PostgreSQL), cairo (the summaries' charts).
BUILD_DEBS := libwebsockets-dev libsqlite3-dev libsystemd-dev libcurl4-openssl-dev libmosquitto-dev libssl-dev libpq-dev libcairo2-dev pkg-config
# For the tests: Python peers, openssl (TLS certificates), a headless desktop (Xvfb, a session bus, dunst),
# systemd-analyze (the deploy/ units), a real MQTT broker (mosquitto), a real PostgreSQL server (the tests start their own),
# dpkg-dev (the Debian package's dependencies, computed by dpkg-shlibdeps), chromium with its driver (the family page).
TEST_DEBS  := python3-venv openssl xvfb dunst libnotify-bin x11-utils dbus-x11 imagemagick systemd mosquitto postgresql dpkg-dev \
              desktop-file-utils chromium chromium-driver
APT = SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); $$SUDO apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq

deps:
	@if ! pkg-config --exists libwebsockets sqlite3 libsystemd libcurl libmosquitto libcrypto libpq cairo 2>/dev/null; then \
	  echo "Installing $(BUILD_DEBS) (apt-get)"; $(APT) $(BUILD_DEBS); \
	fi

test-deps: deps
	@missing=; for c in openssl Xvfb dunst dunstctl xdpyinfo dbus-daemon import systemd-analyze dpkg-shlibdeps desktop-file-validate chromium chromedriver; do \
	  command -v $$c >/dev/null || missing=1; done; \
	[ -x /usr/sbin/mosquitto ] || missing=1; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing=1; \
	if [ -n "$$missing" ] || ! $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null; then \
	  echo "Installing $(TEST_DEBS) (apt-get)"; $(APT) $(TEST_DEBS); \
	fi

# The SignalRClient library's DocC catalog, built with every warning an error (a broken link, a symbol that moved).
# Every library's documentation (LayerTests checks that this list names each), warnings as errors: a doc comment
# that names a parameter the function does not have, or misses one, fails the build. SignalRClient has a catalog.
DOC_TARGETS := Core WebSocketTransport HTTPTransport MQTTTransport PostgresTransport Charts SignalRProtocol Telemetry \
	SignalRClient HubSimulator AllowanceAPI Alerts StoreContract Config Store SharedStore Sync Relay RelayDaemon
docs: deps
	$(SWIFT) package --disable-sandbox generate-documentation $(addprefix --target ,$(DOC_TARGETS)) --warnings-as-errors

build: deps
	$(SWIFT) build

# The house's layout, checked by the toolchain's formatter (.swift-format: 120 columns and its rules): `make format`
# writes it, `make lint` (part of `make test`) fails on any difference. LayerTests caps a file at 460 formatted lines.
FORMATTED := Sources Tests Benchmarks Fuzz Examples Plugins Package.swift
lint:
	$(SWIFT) format lint --strict --recursive --parallel $(FORMATTED)
format:
	$(SWIFT) format format --in-place --recursive --parallel $(FORMATTED)

# The Debian package (deploy/deb/build.sh): the release binary with the Swift runtime linked in, its Depends computed,
# units, sysusers/tmpfiles entries, man pages, completions and a conffile, into .build/deb. BINARY=path packages a
# binary built already (with --static-swift-stdlib).
deb: deps
	@command -v dpkg-shlibdeps >/dev/null || { echo "Installing dpkg-dev (apt-get)"; $(APT) dpkg-dev; }
	deploy/deb/build.sh $(if $(BINARY),--binary $(BINARY))

# The package's contents; with CI=true (or DEB_INSTALL=1) also installed with apt, run, and purged.
deb-check: deb
	Tests/Deploy/check-deb.sh .build/deb/allowance-relay_*.deb

# The relay against the bundled hub simulator: events flow for DEMO_SECONDS, then both stop.
# TRANSPORT=server_sent_events|long_polling: the simulator offers only that one (as behind a proxy that strips
# WebSocket upgrades); PROTOCOL=messagepack: it wants MessagePack and the relay speaks it.
TRANSPORT ?= websockets,server_sent_events,long_polling
PROTOCOL ?= json
demo: build
	@rm -rf .build/demo; out=$$(mktemp); \
	$(BIN)/allowance-hub-sim --token demo-token --rate 1 --burst 3 --log-level warning --transports $(TRANSPORT) \
	  $(if $(filter messagepack,$(PROTOCOL)),--require-messagepack) > $$out & sim=$$!; \
	trap 'kill $$sim 2>/dev/null; rm -f $$out' EXIT INT TERM; \
	for i in $$(seq 100); do grep -q '^listening ' $$out && break; sleep 0.1; done; \
	url=$$(sed -n 's/^listening //p' $$out); \
	echo "hub simulator at $$url; relay runs for $(DEMO_SECONDS) s (Ctrl-C stops it sooner)"; \
	ALLOWANCE_RELAY_SERVER_URL=$$url ALLOWANCE_RELAY_SINKS_DEMO_HOOK_URL=$$url/_sim/webhook \
	ALLOWANCE_RELAY_SERVER_TRANSPORTS=$(TRANSPORT) ALLOWANCE_RELAY_SERVER_HUB_PROTOCOL=$(PROTOCOL) \
	  timeout --preserve-status -s INT $(DEMO_SECONDS) \
	  $(BIN)/allowance-relay run --config config/demo.yaml

# Python SignalR peers for the interop tests (pinned in Tests/Interop/requirements.txt).
$(VENV)/.installed: Tests/Interop/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r Tests/Interop/requirements.txt
	touch $@

# Suites that load the machine on purpose (a 100,000-event blast) run alone after the others, so that they do not
# slow down the timing-sensitive suites that run beside each other; and those that measure the whole process
# (CodePagesTests reads its resident file pages, which tests running beside it fault in again, or release), each in
# a process of its own.
ALONE_SUITES := BackPressureTests|CodePagesTests
# Swift Testing starts every test at once by default: some 300 tests with their simulators, relays and peers on
# two cores made timers wake late and each CI run failed a different timing check. Four at a time takes the same
# three minutes (the serialized ReliabilityTests is the longest path) with a fraction of the load.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH ?= 4

test: test-deps $(VENV)/.installed
	$(MAKE) --no-print-directory lint
	$(SWIFT) build
	$(MAKE) --no-print-directory docs
	$(MAKE) --no-print-directory deb-check
	$(VENV)/bin/python -m pytest -q Tests/Interop
	$(MAKE) --no-print-directory bench-quick
	@mkdir -p .build/test-artifacts
	@# The tests' files (databases, configs, servers' folders: a thousand folders a run) go to a folder of the run's
	@# own, removed after it passed or failed. Short, under /tmp: Unix socket paths in it must stay under 108 bytes;
	@# readable by all: the PostgreSQL tests run the server as the postgres user when run as root.
	tmp=$$(mktemp -d /tmp/ar-test.XXXXXX) && chmod 755 "$$tmp"; \
	  TMPDIR=$$tmp $(SWIFT) test --skip '$(ALONE_SUITES)' 2>&1 | tee .build/test-artifacts/swift-test.log; \
	  status=$${PIPESTATUS[0]}; rm -rf "$$tmp"; \
	  [ $$status -eq 0 ] || Tests/failures.sh .build/test-artifacts/swift-test.log; exit $$status
	@rm -f .build/test-artifacts/swift-test-alone.log
	@for suite in $$(tr '|' ' ' <<<'$(ALONE_SUITES)'); do \
	  tmp=$$(mktemp -d /tmp/ar-test.XXXXXX) && chmod 755 "$$tmp"; \
	  TMPDIR=$$tmp $(SWIFT) test --skip-build --filter "$$suite" 2>&1 | tee -a .build/test-artifacts/swift-test-alone.log; \
	  status=$${PIPESTATUS[0]}; rm -rf "$$tmp"; \
	  [ $$status -eq 0 ] || { Tests/failures.sh .build/test-artifacts/swift-test-alone.log; exit $$status; }; done
	@# A filter that matches nothing passes: each suite run alone must have run and passed.
	@for suite in $$(tr '|' ' ' <<<'$(ALONE_SUITES)'); do grep -q "Suite $$suite passed" .build/test-artifacts/swift-test-alone.log \
	  || { echo "FAIL: $$suite did not run (renamed? ALONE_SUITES names it)"; exit 1; }; done

# Benchmarks side by side with the Python peers and a raw libwebsockets floor (Benchmarks/README.md):
# release binaries (deploy/build-release.sh), about 10 minutes, writes BENCHMARKS.md and Benchmarks/results.json.
bench: test-deps $(VENV)/.installed
	SWIFT=$(SWIFT) deploy/build-release.sh
	$(VENV)/bin/python Benchmarks/bench.py --bin .build/release

# The same harness with tiny counts on the debug binaries (seconds): checks it still works; figures meaningless.
bench-quick: $(VENV)/.installed
	@out=$$(mktemp -d); $(VENV)/bin/python Benchmarks/bench.py --quick --bin .build/debug --out $$out/BENCHMARKS.md \
	  --json $$out/results.json && echo "bench-quick: the harness works ($$out)"

# The fault scenarios of RELIABILITY.md (about 5 minutes; all are also part of `make test`), then their figures
# into RELIABILITY.md. ALLOWANCE_TEST_SEED=N replays the random kill and outage moments of a run.
RELIABILITY_SUITES := ReliabilityTests|CrashTests|FaultTests|NetworkCutTests|HostileInputTests|AlertEndToEndTests|HostileBackendRelayTests|ReconnectStormTests|HostileBackendTests|ServerConflictTests|ReplicaTests|LinkLeaseTests|MQTTSinkTests
reliability: test-deps $(VENV)/.installed
	$(SWIFT) build --build-tests
	rm -f .build/test-artifacts/reliability.jsonl
	$(SWIFT) test --skip-build --filter '$(RELIABILITY_SUITES)'
	$(PYTHON) Tests/reliability_report.py .build/test-artifacts/reliability.jsonl RELIABILITY.md --check

# The whole suite under a sanitizer, in its own build folder (the relay binary the tests start is built with it
# too): `make sanitize SANITIZER=address` or `SANITIZER=thread`. About 10 minutes each on 2 cores. Every process
# writes its reports to .build-SANITIZER/reports; TSan's exit code stays 0 so that a report does not pass for a
# failed test (RELIABILITY.md says how its reports read on Linux). Leaks inside libcurl and URLSession, which
# live as long as the process, are suppressed (Tests/Sanitizers/lsan.supp).
SANITIZER ?= address
SAN_DIR = .build-$(SANITIZER)
sanitize: test-deps $(VENV)/.installed
	$(SWIFT) build --build-tests --scratch-path $(SAN_DIR) --sanitize=$(SANITIZER)
	rm -rf $(SAN_DIR)/reports && mkdir -p $(SAN_DIR)/reports
	ASAN_OPTIONS=log_path=$(CURDIR)/$(SAN_DIR)/reports/asan LSAN_OPTIONS=suppressions=$(CURDIR)/Tests/Sanitizers/lsan.supp \
	TSAN_OPTIONS=exitcode=0:log_path=$(CURDIR)/$(SAN_DIR)/reports/tsan \
	  $(SWIFT) test --skip-build --scratch-path $(SAN_DIR) --sanitize=$(SANITIZER) --skip '$(ALONE_SUITES)'; status=$$?; \
	  echo "sanitize: $$(cat $(SAN_DIR)/reports/* 2>/dev/null | grep -cE '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR)') reports in $(SAN_DIR)/reports"; \
	  exit $$status

# libFuzzer with AddressSanitizer over the SignalR protocol code and the config parser (Fuzz/run.sh):
# FUZZ_SECONDS per target; the config target is built once by SwiftPM into .build-fuzz (about 5 minutes here).
FUZZ_SECONDS ?= 60
fuzz:
	Fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf .build .build-address .build-thread .build-fuzz $(VENV)
