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

.PHONY: install run ask test test-dates lint bench clean browser

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
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/decide.py --db $(DB)

clean:
	rm -rf $(VENV) var build *.egg-info
