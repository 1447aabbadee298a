# kimi.cpp — the two commands of the quick start are `make serve` and `make test`.
# Everything else here is what those two need: deps (Debian packages, installed only when
# missing), a CMake + Ninja build, and the embedded default model.

BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
KIMI       := $(BUILD)/bin/kimi-cpp
# The default model: kimi-k3-mini, trained by the project (models/kimi-k3-mini, committed;
# `make train-default` retrains it). MODEL_PRESET=tiny|k3-tiny|... serves a random preset instead.
DEFAULT_MODEL := models/kimi-k3-mini
MODEL_PRESET ?=
MODEL_DIR  ?= $(if $(MODEL_PRESET),models/$(MODEL_PRESET),$(DEFAULT_MODEL))
SERVED_NAME ?= $(if $(MODEL_PRESET),kimi-$(MODEL_PRESET),kimi-k3-mini)

# Debian packages (see README "Dependencies"). What building and serving need — all `make serve`
# installs —, then the test tooling, which only `make test` (deps-test) adds.
BUILD_PKGS := g++ cmake ninja-build pkg-config \
              nlohmann-json3-dev libcpp-httplib-dev libssl-dev \
              libpng-dev libjpeg-dev libwebp-dev libgif-dev libjs-marked node-dompurify
TEST_PKGS  := git libgtest-dev openmpi-bin libopenmpi-dev python3 python3-pil python3-numpy python3-torch \
              python3-jinja2 python3-jsonschema chromium clang libclang-rt-14-dev clang-format
# node + npm (test tooling): any install on PATH will do (a machine may carry a non-Debian
# Node.js whose bundled npm conflicts with Debian's npm package); otherwise Debian's packages.
NODE_PKGS := nodejs npm

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps deps-test build build-kimi build-asan test test-fast serve bench clean install

all: build

# Installs what is missing of $(1) (and node + npm when $(2) is set).
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$(2)" ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then missing="$$missing $(NODE_PKGS)"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "deps: all Debian packages present"; fi
endef

deps:
	$(call apt_install,$(BUILD_PKGS),)

deps-test:
	$(call apt_install,$(BUILD_PKGS) $(TEST_PKGS),node)

# Configured once by `make serve` (the test executables only where GoogleTest is installed);
# `make test` configures again with them on, which also finds Open MPI once deps-test added it.
$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DKIMI_BUILD_TESTS=$$(test -f /usr/include/gtest/gtest.h && echo ON || echo OFF)

build: deps-test
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DKIMI_BUILD_TESTS=ON
	cmake --build $(BUILD) -j $(JOBS)

# The kimi-cpp binary alone (what `make serve` needs), no test executables.
build-kimi: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target kimi-cpp

# `make install PREFIX=/usr/local` (DESTDIR too): the kimi-cpp binary into $(PREFIX)/bin. The
# binary carries everything it serves (the chat page included); models stay where they are.
PREFIX ?= /usr/local
install: build-kimi
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(KIMI) $(DESTDIR)$(PREFIX)/bin/kimi-cpp

# The loader and grammar tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
$(BUILD_ASAN)/build.ninja:
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKIMI_SANITIZE=ON

build-asan: deps-test $(BUILD_ASAN)/build.ninja
	cmake --build $(BUILD_ASAN) -j $(JOBS) --target core_tests loader_tests grammar_tests regex_tests image_decode_tests image_preprocess_tests

# Sanitized tests, then a short run of every fuzz target (FUZZ_TEST_SECONDS each), then the rest
# (the 10-minute soak is `ctest -L soak`; the benchmarks are `make bench`; the AMX emulation
# against real tiles is `ctest -L amx`, on a machine with AMX).
FUZZ_TEST_SECONDS ?= 20
test: build build-asan build-fuzz
	$(MAKE) --no-print-directory format-check
	ctest --test-dir $(BUILD_ASAN) -L sanitize --output-on-failure
	python3 fuzz/run.py $(BUILD_FUZZ) $(FUZZ_TEST_SECONDS) $(BUILD_FUZZ)/fuzz-test.json --parallel $(JOBS)
	ctest --test-dir $(BUILD) -LE 'slow|sanitize|soak|amx' --output-on-failure -j $(JOBS)

# C++ layout (.clang-format, 120 columns): `make format` rewrites, `make format-check` (part of
# `make test`) fails on any file that differs.
FORMAT_FILES = $(shell find src apps tests fuzz -name '*.h' -o -name '*.cpp' | sort)
.PHONY: format format-check
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files follow .clang-format"

# The inner loop: the C++ suites (ops, model, golden, loader, runtime, grammar, chat, dist) without
# the sanitizers, fuzzing, the tokenizer oracles and the end-to-end CLI and HTTP tests.
test-fast: build
	ctest --test-dir $(BUILD) -L 'unit|ops|model|golden|chat' -LE 'slow|sanitize|soak|amx' --output-on-failure -j $(JOBS)

# libFuzzer targets (fuzz/, clang + ASan + UBSan): `make fuzz` runs each for FUZZ_SECONDS on a copy
# of its seed corpus; crash inputs land in $(BUILD_FUZZ)/fuzz-crashes/, the summary in fuzz-results.json.
BUILD_FUZZ   ?= build-fuzz
FUZZ_SECONDS ?= 300
FUZZ_JOBS    ?= 1
.PHONY: build-fuzz fuzz
$(BUILD_FUZZ)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKIMI_FUZZ=ON -DKIMI_MPI=OFF

build-fuzz: deps-test $(BUILD_FUZZ)/build.ninja
	cmake --build $(BUILD_FUZZ) -j $(JOBS)

fuzz: build-fuzz
	python3 fuzz/run.py $(BUILD_FUZZ) $(FUZZ_SECONDS) $(BUILD_FUZZ)/fuzz-results.json --parallel $(FUZZ_JOBS)

models/$(MODEL_PRESET)/config.json: | build-kimi
	$(KIMI) make-model --out models/$(MODEL_PRESET) --preset $(MODEL_PRESET) --seed 0

# The OpenAI-compatible server on the default model (MODEL_PRESET=tiny, k3-tiny, ... for a random
# preset; HOST/PORT/SERVE_ARGS to change the rest).
HOST       ?= 127.0.0.1
PORT       ?= 8000
SERVE_ARGS ?=
serve: build-kimi $(if $(MODEL_PRESET),models/$(MODEL_PRESET)/config.json)
	$(KIMI) serve --model $(MODEL_DIR) --served-model-name $(SERVED_NAME) --host $(HOST) --port $(PORT) $(SERVE_ARGS)

# Retrains the default model into $(DEFAULT_MODEL) (tools/train_default/run.py; not part of
# `make test`): Debian's python3-torch and python3-pil, and OpenBLAS for torch's float32
# products (Debian's torch otherwise falls back to the reference BLAS, ~20x slower).
TRAIN_PKGS := python3 python3-torch python3-pil python3-numpy libopenblas0-pthread
TRAIN_ARGS ?=
.PHONY: train-default
train-default: build-kimi
	$(call apt_install,$(TRAIN_PKGS),)
	/usr/bin/python3 tools/train_default/run.py --kimi $(KIMI) --out $(DEFAULT_MODEL) $(TRAIN_ARGS)

# Benchmarks (never fail on speed): machine limits into bench/results/, then the slow ctest targets.
BENCH_MODEL ?= models/bench
$(BENCH_MODEL)/config.json: | build
	$(KIMI) make-model --out $(BENCH_MODEL) --preset bench --seed 0

# Kimi-K3's real per-layer widths (7.5 GB): decode at context 0 only, as a 4k-token prefill per
# sequence at these widths takes minutes.
BENCH_K3_MODEL ?= models/k3-bench
# The side-by-side table against llama.cpp (`make bench LLAMA_COMPARE=1`, or LLAMA_CPP_DIR=another
# checkout of its sources): llama.cpp's sources from the npm package node-llama-cpp
# (tools/llama_cpp/fetch.sh), llama-bench built portably (tools/llama_cpp/build.sh: this CPU's
# extensions, AMX off), the GGUFs converted from the bench checkpoints by llama.cpp's own converter.
LLAMA_COMPARE ?= $(if $(filter command line environment,$(origin LLAMA_CPP_DIR)),1)
LLAMA_SRC_DIR ?= $(BUILD)/llama-src
LLAMA_CPP_DIR ?= $(LLAMA_SRC_DIR)/llama.cpp
LLAMA_BUILD_DIR ?= $(BUILD)/llama-build
.PHONY: llama-bench
llama-bench: deps-test
	test -f $(LLAMA_CPP_DIR)/convert_hf_to_gguf.py || sh tools/llama_cpp/fetch.sh $(LLAMA_SRC_DIR)
	sh tools/llama_cpp/build.sh $(LLAMA_CPP_DIR) $(LLAMA_BUILD_DIR) llama-bench
$(BENCH_K3_MODEL)/config.json: | build
	$(KIMI) make-model --out $(BENCH_K3_MODEL) --preset k3-bench --seed 0

bench: build $(BENCH_MODEL)/config.json $(BENCH_K3_MODEL)/config.json $(if $(LLAMA_COMPARE),llama-bench)
	@mkdir -p bench/results
	$(KIMI) bench machine --json bench/results/machine.json
	$(KIMI) bench model --model $(BENCH_MODEL) --compare-torch --json bench/results/model.json --plot bench/results/model.png
	python3 bench/cpu_table.py --kimi $(KIMI) --model $(BENCH_MODEL) --json bench/results/cpu-table.json | tee bench/results/cpu-table.md
	python3 bench/prefix_cache.py --kimi $(KIMI) --model $(BENCH_MODEL) --json bench/results/prefix-cache.json \
	  --plot bench/results/prefix-cache.svg | tee bench/results/prefix-cache.md
	python3 bench/structured_output.py --kimi $(KIMI) --model $(BENCH_MODEL) --json bench/results/structured-output.json \
	  | tee bench/results/structured-output.md
	test -f $(BENCH_MODEL)-mxfp4/config.json || $(KIMI) make-model --out $(BENCH_MODEL)-mxfp4 --preset bench --seed 0 --mxfp4-experts
	test -f $(BENCH_K3_MODEL)-mxfp4/config.json || $(KIMI) make-model --out $(BENCH_K3_MODEL)-mxfp4 --preset k3-bench --seed 0 --mxfp4-experts
	python3 bench/mxfp4_table.py --kimi $(KIMI) --pair bench=$(BENCH_MODEL),$(BENCH_MODEL)-mxfp4 \
	  --pair k3-bench=$(BENCH_K3_MODEL),$(BENCH_K3_MODEL)-mxfp4 --json bench/results/mxfp4-table.json | tee bench/results/mxfp4-table.md
	$(KIMI) bench model --model $(BENCH_K3_MODEL) --prompt-lens 512 --batches 1,16 --contexts 0 --activation-dtype bf16 \
	  --compare-torch --json bench/results/k3-model.json --plot bench/results/k3-model.png
	$(KIMI) bench model --model $(BENCH_MODEL) --prompt-lens 512 --batches 1 --contexts 0,4096,16384,65536 --reps 2 \
	  --json bench/results/long-context.json | tee bench/results/long-context.md
	$(KIMI) bench model --model $(BENCH_MODEL) --prompt-lens 512 --batches 1,16,64 --contexts 0 --reps 2 \
	  --json bench/results/batches.json | tee bench/results/batches.md
	for c in 16 24; do $(KIMI) bench decode --model $(BENCH_MODEL) --ab --concurrency $$c --prefix-len 8192 \
	  --suffix-len 512 --output-len 1024 --runs 2 --json bench/results/cohort-$$c.json || exit 1; done
	if [ -n "$(LLAMA_COMPARE)" ]; then for m in $(BENCH_MODEL) $(BENCH_K3_MODEL); do test -f $$m.gguf || \
	  LLAMA_CPP_DIR=$(LLAMA_CPP_DIR) tools/llama_convert/convert.sh $$m $$m.gguf || exit 1; done; \
	  python3 bench/llama_compare.py --kimi $(KIMI) --llama-bench $(LLAMA_BUILD_DIR)/bin/llama-bench \
	  --pair bench=$(BENCH_MODEL),$(BENCH_MODEL).gguf --pair k3-bench=$(BENCH_K3_MODEL),$(BENCH_K3_MODEL).gguf \
	  --batches 1,16 --json bench/results/llama-compare.json | tee bench/results/llama-compare.md; fi
	$(KIMI) bench vision --model $(BENCH_K3_MODEL) --width 1024 --height 1024 --activation-dtype bf16 --reps 1 \
	  --json bench/results/vision.json
	ctest --test-dir $(BUILD) -L slow --output-on-failure

# What quantization costs the default model in accuracy (docs/quantization.md): its MXFP4 and
# GGUF forms (llama.cpp's converter and quantizer, built as for the GGUF tests), then one
# `kimi-cpp eval tasks` over all of them on the held-out set. Not part of `make test`.
.PHONY: eval-default
eval-default: build-kimi deps-test
	test -f $(LLAMA_CPP_DIR)/convert_hf_to_gguf.py || sh tools/llama_cpp/fetch.sh $(LLAMA_SRC_DIR)
	sh tools/llama_cpp/build.sh $(LLAMA_CPP_DIR) $(LLAMA_BUILD_DIR)
	@mkdir -p bench/results
	/usr/bin/python3 tools/train_default/quant_eval.py --kimi $(KIMI) --model $(DEFAULT_MODEL) \
	  --llama-cpp $(LLAMA_CPP_DIR) --llama-bin $(LLAMA_BUILD_DIR)/bin --work $(BUILD)/quant-eval \
	  --json bench/results/quant-eval.json | tee bench/results/quant-eval.md

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
