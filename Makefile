# hypertune: `make demo` and `make test` do all of the set-up on a fresh
# Debian 12 machine (as root they install missing packages with apt-get),
# then configure into build/ and build.
BUILD ?= build
JOBS ?= $(shell nproc)
# Extra CMake settings for the first configure, e.g. -DHYPERTUNE_WERROR=ON.
CMAKE_ARGS ?=

# Debian 12 packages the build and tests need.
PACKAGES := g++ cmake ninja-build pkg-config \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev libcli11-dev libeigen3-dev libsqlite3-dev nlohmann-json3-dev \
  liblbfgspp-dev zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev \
  libturbojpeg0-dev dataset-fashion-mnist libcpp-httplib-dev chromium \
  python3-grpcio python3-protobuf python3-pytest python3-pandas \
  python3-matplotlib python3-optuna python3-sklearn python3-xgboost \
  libpq-dev postgresql slurm-wlm munge libmicrohttpd-dev \
  pylint python3-yaml libyaml-cpp-dev
# python3-matplotlib draws hypertune.visualization's figures; python3-optuna
# is the Optuna bridge's and the Optuna import's counterpart in the tests;
# python3-sklearn and python3-xgboost are what hypertune.integration.sklearn
# and .xgboost are tested against.
# pylint checks the Python client (tests/python/test_module_layout.py);
# python3-yaml reads deploy/'s manifests (tests/deploy/check_deploy.py).
# Not here, being large: python3-torch (the PyTorch example; its tests are
# skipped without it). npm (the
# dashboard's charts from the npm registry) is installed only where no npm
# is on the PATH: Node.js from elsewhere brings its own, which Debian's
# package would conflict with.

.PHONY: all deps configure build test demo install clean fuzz deb \
  check-deps thread-safety sanitize format-check

all: build

# $(call apt_missing,PACKAGES,WHAT): installs those of PACKAGES that are
# missing when run as root (else names them and fails), or says WHAT when
# none is.
define apt_missing
missing=$$(for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "missing Debian packages (run make as root to install them):" $$missing >&2; exit 1; \
	  fi; \
	  echo "== apt: installing" $$missing; \
	  apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else \
	  $(2); \
	fi
endef

# Quiet when everything is there; installs what is missing when run as root.
deps:
	@$(call apt_missing,$(PACKAGES),echo "== apt: the $(words $(PACKAGES)) Debian packages are installed"); \
	if ! command -v npm >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ]; then \
	  echo "== apt: installing npm"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null || \
	    echo "npm could not be installed: the dashboard is built without its charts" >&2; \
	fi

# One line per stage, its time at the end; CMake's and the compiler's output
# go to a log that is shown where the stage fails.
$(BUILD)/build.ninja: CMakeLists.txt | deps
	@mkdir -p $(BUILD); printf '== configure: %s, RelWithDebInfo (log: %s) ... ' \
	  '$(BUILD)/' '$(BUILD)/configure.log'; start=$$(date +%s); \
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) \
	  >$(BUILD)/configure.log 2>&1 || { echo failed; cat $(BUILD)/configure.log; exit 1; }; \
	echo "$$(( $$(date +%s) - start )) s"

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# ctest reports a skipped test without its output: the reasons pytest gave
# for its skips, and the deploy/ uses that wait for features, follow, from
# ctest's log.
test: build
	@status=0; ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) || status=$$?; \
	grep -h '^SKIPPED \[' $(BUILD)/Testing/Temporary/LastTest.log 2>/dev/null \
	  | sed 's/^/pytest: /'; \
	sed -n '/^Planned, not in the programs yet/,/^<end of output>/p' \
	  $(BUILD)/Testing/Temporary/LastTest.log 2>/dev/null \
	  | grep -v '^<end of output>' | sed 's/^/deploy: /'; \
	exit $$status

# The demo builds only what it runs: the server, the CLI and the program its
# workers start (the dashboard's assets are the server's), and the Python
# client in build/python that the README's Python lines use.
DEMO_TARGETS := hypertuned hypertune hypertune-quickstart hypertune_python
demo: configure
	@printf '== build: %s (log: %s) ... ' 'hypertuned, hypertune, hypertune-quickstart, the Python client' \
	  '$(BUILD)/demo-build.log'; start=$$(date +%s); \
	cmake --build $(BUILD) -j $(JOBS) --target $(DEMO_TARGETS) >$(BUILD)/demo-build.log 2>&1 || \
	  { echo failed; grep -v '^\[[0-9]*/[0-9]*\] ' $(BUILD)/demo-build.log | tail -n 60; exit 1; }; \
	echo "$$(( $$(date +%s) - start )) s"
	@examples/demo.sh $(BUILD)

# libFuzzer over the service (tests/fuzz): its own clang build in
# $(FUZZ_BUILD), the regression inputs, then FUZZ_SECONDS of fuzzing.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_CXX ?= clang++
fuzz: deps
	@if ! command -v $(FUZZ_CXX) >/dev/null 2>&1; then \
	  echo "make fuzz: SKIPPED, $(FUZZ_CXX) not found (apt-get install clang)"; \
	  exit 0; \
	fi; \
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) \
	  -DHYPERTUNE_FUZZ=ON >/dev/null && \
	cmake --build $(FUZZ_BUILD) --target service_fuzzer -j $(JOBS) && \
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The checks CI runs after the suite (.ci/run), each on its own:
#   make format-check   clang-format --dry-run -Werror over the C++ sources
#                       (tools/cxx_sources.sh) against .clang-format;
#                       tools/format_tree.sh formats them.
#   make thread-safety  clang's -Wthread-safety analysis, as errors, over the
#                       sources that name a lock (tools/clang_check.py), with
#                       $(BUILD)'s compile commands (configured if need be);
#   make sanitize       the optimizer's, the stores' and common/'s suites
#                       built in $(SAN_BUILD) as Debug (asserts live) at -O1
#                       with AddressSanitizer and UndefinedBehaviorSanitizer
#                       (undefined behavior aborts), then run.
# They need clang and clang-format (CHECK_PACKAGES), which check-deps
# installs when run as root.
CHECK_PACKAGES := clang clang-format
check-deps:
	@$(call apt_missing,$(CHECK_PACKAGES),true)

format-check: check-deps
	@mkdir -p $(dir $(FORMAT_LOG)); \
	printf '== format-check: %s C++ files against .clang-format ... ' \
	  "$$(tools/cxx_sources.sh | wc -l)"; \
	if tools/cxx_sources.sh | xargs -d '\n' -P $(JOBS) -n 20 \
	    clang-format --dry-run -Werror --style=file >$(FORMAT_LOG) 2>&1; then \
	  echo ok; \
	else \
	  echo "failed: $$(grep -c ': error:' $(FORMAT_LOG)) places in" \
	    "$$(grep ': error:' $(FORMAT_LOG) | cut -d: -f1 | sort -u | wc -l) files" \
	    "(tools/format_tree.sh formats them; the first 40 lines of $(FORMAT_LOG):)"; \
	  head -n 40 $(FORMAT_LOG); exit 1; \
	fi
FORMAT_LOG ?= $(BUILD)/format-check.log

# The generated headers (proto/) are what the compile commands need built.
thread-safety: check-deps configure
	@cmake --build $(BUILD) -j $(JOBS) --target hypertune_grpc >/dev/null
	tools/clang_check.py --build $(BUILD) --jobs $(JOBS)

SAN_BUILD ?= build-asan
SAN_SUITES := tests/optimizer tests/storage tests/common
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS
$(SAN_BUILD)/build.ninja: CMakeLists.txt | deps
	@mkdir -p $(SAN_BUILD); printf '== configure: %s, Debug -O1, ASan+UBSan (log: %s) ... ' \
	  '$(SAN_BUILD)/' '$(SAN_BUILD)/configure.log'; start=$$(date +%s); \
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  '-DCMAKE_C_FLAGS_DEBUG=-O1 -g1' '-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1' \
	  '-DCMAKE_C_FLAGS=$(SAN_FLAGS)' '-DCMAKE_CXX_FLAGS=$(SAN_FLAGS)' \
	  '-DCMAKE_EXE_LINKER_FLAGS=$(SAN_FLAGS)' \
	  >$(SAN_BUILD)/configure.log 2>&1 || { echo failed; cat $(SAN_BUILD)/configure.log; exit 1; }; \
	echo "$$(( $$(date +%s) - start )) s"

sanitize: deps $(SAN_BUILD)/build.ninja
	cmake --build $(SAN_BUILD) -j $(JOBS) --target $(addsuffix /all,$(SAN_SUITES))
	@status=0; for suite in $(SAN_SUITES); do \
	  ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(SAN_BUILD)/$$suite --output-on-failure -j $(JOBS) || status=1; \
	done; exit $$status

install: build
	cmake --install $(BUILD)

# Debian packages hypertuned and hypertune-client (deploy/deb/build-debs.sh)
# in $(DEB_OUT), from the programs in $(DEB_BIN_DIR): the build's, built
# first, unless another folder is given (make deb DEB_BIN_DIR=/opt/bin).
DEB_BIN_DIR ?= $(BUILD)/bin
DEB_OUT ?= $(BUILD)/deb
deb: $(if $(filter $(BUILD)/bin,$(DEB_BIN_DIR)),build)
	deploy/deb/build-debs.sh --bin-dir $(DEB_BIN_DIR) --python-dir $(BUILD)/python \
	  --out-dir $(DEB_OUT)

clean:
	rm -rf $(BUILD)
