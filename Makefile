# vcache: build, test, demo, install. `make` alone builds.
# Missing Debian packages (headers, pkg-config, nginx and ffmpeg for the tests) are installed with
# apt-get when running as root; otherwise the command to run is printed.

PREFIX      ?= /usr/local
SWIFT       ?= swift
CONFIG      ?= debug
BUILD_DEPS  := libcurl4-openssl-dev libsqlite3-dev libssl-dev libmicrohttpd-dev pkg-config
TEST_DEPS   := nginx ffmpeg mpv sqlite3 curl
BENCH_DEPS  := time

.PHONY: all build test demo install uninstall bench clean deps deps-test fuzz

all: build

# Installs what is missing, by package name, only on Debian-like systems (dpkg present).
define ensure_packages
	@missing=""; \
	if command -v dpkg >/dev/null 2>&1; then \
	  for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	fi; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing) >/dev/null \
	      || { echo "apt-get install failed for:$$missing"; exit 1; }; \
	  else \
	    echo "missing packages:$$missing"; echo "run: sudo apt-get install$$missing"; exit 1; \
	  fi; \
	fi
endef

deps:
	$(call ensure_packages,$(BUILD_DEPS))

deps-test: deps
	$(call ensure_packages,$(TEST_DEPS))

build: deps
	$(SWIFT) build -c $(CONFIG)

test: deps-test
	$(SWIFT) build
	$(SWIFT) test

demo: deps-test
	$(SWIFT) build
	@bash Tests/Scripts/demo.sh "$$($(SWIFT) build --show-bin-path)/vcache"

# A release binary with the Swift runtime linked in: it runs where no Swift toolchain is installed
# (it needs only libcurl4, libsqlite3-0 and libssl3 from the system).
install: deps
	$(SWIFT) build -c release --static-swift-stdlib
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/vcache" "$(DESTDIR)$(PREFIX)/bin/vcache"
	@echo "installed $(DESTDIR)$(PREFIX)/bin/vcache"

uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/vcache"

bench: deps-test
	$(call ensure_packages,$(BENCH_DEPS))
	$(SWIFT) build -c release --static-swift-stdlib
	@bash Tests/Scripts/bench.sh "$$($(SWIFT) build -c release --show-bin-path)/vcache"

# libFuzzer on the MP4 code (box walker + faststart; moov parser + sample mapper + planner), each
# for FUZZ_SECONDS from the committed seed corpus (Tests/Fuzz/corpus, made by make-corpus.sh).
# New inputs go to .build/fuzz/corpus-*; a crash leaves its input in .build/fuzz and fails.
FUZZ_SECONDS ?= 60
FUZZ_SOURCES  = Sources/VCacheCore/MP4/*.swift Sources/VCacheCore/Ranges/*.swift \
                Sources/VCacheCore/Support/RawFile.swift Sources/VCacheCore/Support/SystemError.swift
fuzz:
	@mkdir -p .build/fuzz
	@for t in Walker Mapper; do \
	  echo "building fuzz-$$t"; \
	  swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name Fuzz$$t $(FUZZ_SOURCES) Tests/Fuzz/$$t.swift \
	    -o .build/fuzz/fuzz-$$t || exit 1; \
	done
	@for t in Walker Mapper; do \
	  mkdir -p .build/fuzz/corpus-$$t; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  (cd .build/fuzz && ./fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
	    -print_final_stats=1 corpus-$$t ../../Tests/Fuzz/corpus 2>&1 | grep -E "^stat::number_of_executed_units|^Done|ERROR|SUMMARY|crash-|timeout-|oom-") \
	    || exit 1; \
	  if [ -n "$$(find .build/fuzz -maxdepth 1 \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \))" ]; then \
	    echo "fuzz: a failing input is in .build/fuzz"; exit 1; fi; \
	done

clean:
	rm -rf .build
