# TouchSync: everything a fresh Debian machine with only the Swift toolchain needs.
#   make demo   runs the main job on its embedded default
#   make test   runs every test
#   make bench  release-build benchmarks (figures in docs/performance.md)
#   make fuzz   libFuzzer targets for a bounded time (docs/fuzzing.md)
#   make proto  regenerates Sources/Cores/TouchSyncWire/Generated from proto/
SWIFT ?= swift

.PHONY: demo demo-deps test test-deps bench fuzz proto deps build clean

# libzmq3-dev is the one system package we need; install it when pkg-config
# cannot find libzmq (apt needs root: sudo is used when present).
deps:
	@if pkg-config --exists libzmq 2>/dev/null; then :; else \
	  echo "libzmq (Debian package libzmq3-dev) is missing: installing it with apt-get"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; \
	  elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	  else echo "error: installing libzmq3-dev needs root. Run as root, or: sudo apt-get install libzmq3-dev pkg-config" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libzmq3-dev pkg-config >/dev/null \
	    || { echo "error: apt-get could not install libzmq3-dev" >&2; exit 1; }; \
	  pkg-config --exists libzmq || { echo "error: libzmq3-dev installed but pkg-config cannot find libzmq" >&2; exit 1; }; \
	fi

# The fault tests put the hub and its agents on two hosts: network
# namespaces joined by veth (iproute2), packet loss with nftables; the
# deployment tests validate compose.yaml with docker-compose (and read it
# with the python3-yaml that comes with it); the browser tests drive
# Debian's chromium headless; the board store tests start their own
# PostgreSQL server (Debian's postgresql, run as its postgres user);
# scripts/compose-keys.sh gives the services' uids read access with setfacl (acl);
# the TLS recipe's test runs Debian's caddy with deploy/Caddyfile.
test-deps: deps
	@missing=; command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v setfacl >/dev/null 2>&1 || missing="$$missing acl"; \
	command -v caddy >/dev/null 2>&1 || missing="$$missing caddy"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing for the network, deployment and browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; \
	  else echo "error: installing$$missing needs root" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null \
	    || { echo "error: apt-get could not install$$missing" >&2; exit 1; }; \
	fi

build: deps
	$(SWIFT) build

# The demo's PNG comes from rsvg-convert (Debian's librsvg2-bin): installed
# like libzmq3-dev when missing; without root the demo still writes the SVG
# and says how to get the PNG.
demo-deps: deps
	@if command -v rsvg-convert >/dev/null 2>&1; then :; else \
	  echo "rsvg-convert (Debian package librsvg2-bin) is missing: installing it for the demo's PNG"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; else SUDO=none; fi; \
	  if [ "$$SUDO" = none ]; then echo "warning: no root to install librsvg2-bin: the demo writes the SVG only" >&2; \
	  else $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq librsvg2-bin >/dev/null \
	    || echo "warning: apt-get could not install librsvg2-bin: the demo writes the SVG only" >&2; fi; \
	fi

# Debug builds: they share one build with the tests and start fastest on a fresh machine.
demo: demo-deps
	$(SWIFT) run touchsync demo

# The tests also run the touchsync binary as real processes: build it first.
# They run in parallel (swift-testing's default): the hub's rules are tested
# on HubCore with a manual clock, and the socket and process tests wait for
# observable conditions with deadlines rather than for fixed times.
# scripts/run-tests.sh gives the run its own TMPDIR and removes whatever the
# tests left (files, network namespaces); a process left running fails it.
# scripts/check-client-package.sh builds Tests/ClientPackage, a package that
# depends on TouchSyncClient by path, and draws a stroke with it through a hub.
# The client package check runs even when a test failed; the exit status is the first failure's.
test: test-deps
	$(SWIFT) build
	@status=0; \
	SWIFT="$(SWIFT)" scripts/run-tests.sh || status=$$?; \
	SWIFT="$(SWIFT)" scripts/check-client-package.sh || { code=$$?; [ $$status -ne 0 ] || status=$$code; }; \
	if [ $$status -ne 0 ]; then echo "make test: FAILED (exit $$status)"; fi; \
	exit $$status

bench: deps
	$(SWIFT) build -c release
	.build/release/touchsync bench
	.build/release/touchsync bench --transport
	.build/release/touchsync bench --web-floor
	.build/release/touchsync bench --journal
	.build/release/touchsync bench --hub-journal --fsync-policies batch,20ms,never
	@echo "scale run: 2,000 agents x 5 fingers at 120 Hz against one embedded hub (a run that cannot keep up is reported, not an error here)"
	.build/release/touchsync load --users 2000 --fingers 5 --hz 120 --coalesced 1 --duration 10 --json .build/scale-run.json \
	  || echo "scale run: not every sample was carried in time (see the report above)"

# libFuzzer targets (Fuzz/), FUZZ_SECONDS per target (default 60); see docs/fuzzing.md.
fuzz: deps
	scripts/fuzz.sh

proto:
	scripts/generate-proto.sh

clean:
	rm -rf .build
