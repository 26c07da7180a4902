# Two commands do all the set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DB     ?= var/demo.db
PORT   ?= 8000
STAMP  := $(VENV)/.installed

# llama.cpp is compiled by pip. Build for a portable x86-64-v3 CPU instead of -march=native:
# a native build emits AMX instructions on CPUs that advertise AMX, and they fault
# (SIGILL) where the kernel has not granted AMX to the process.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
else
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
endif

.PHONY: install run ask test test-dates lint bench clean browser adapter

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The service on the embedded default: demo market (built on first run), bundled model,
# loopback only, API keys off, the live simulator moving prices and stock (LIVE_RATE
# events a second; 0 turns it off). It prints the URL and a curl example.
LIVE_RATE ?= 80
run: $(STAMP)
	@mkdir -p $(dir $(DB))
	$(BIN)/worthit serve --demo --db $(DB) --port $(PORT) --live-rate $(LIVE_RATE)

# One answer on the command line, no server.
ask: $(STAMP)
	@mkdir -p $(dir $(DB))
	$(BIN)/worthit ask --db $(DB) "Is the Aurora NC700 worth buying?"

# The browser test drives Debian's Chromium (Playwright never downloads a browser here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser test"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null; }

test: $(STAMP) browser
	$(BIN)/pytest

# The suite on four dates spread over a year (libfaketime): nothing may depend on the day.
test-dates: $(STAMP) browser
	.ci/any-date

lint: $(STAMP)
	$(BIN)/ruff check src tests bench train
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/decide.py --db $(DB)

# The explanation adapter (issue 25): a LoRA fine-tune of the bundled SmolLM2 on
# data/explanations/train.jsonl, on the CPU, written to src/worthit/explain/adapters/
# (explain-lora.gguf and its manifest). Not part of `make test`. The run is paced to end
# within ADAPTER_MINUTES of training (plus about 3 minutes to load, score and convert) on
# the 2-core host; `$(BIN)/python -m train.adapter --help` lists the knobs. To go on
# training the shipped adapter instead of starting again (train/README.md):
#   make adapter ADAPTER_ARGS='--resume src/worthit/explain/adapters/explain-lora.gguf --seed 8'
TRAIN_STAMP    := $(VENV)/.installed-train
ADAPTER_MINUTES ?= 52
ADAPTER_ARGS   ?= --epochs 2 --seed 7 --max-minutes $(ADAPTER_MINUTES)
$(TRAIN_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[train]'
	touch $(TRAIN_STAMP)

adapter: $(TRAIN_STAMP)
	nice -n 5 $(BIN)/python -m train.adapter $(ADAPTER_ARGS)

clean:
	rm -rf $(VENV) var build *.egg-info
