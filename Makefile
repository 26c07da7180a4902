# Two commands do all the set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DB     ?= var/demo.db
STAMP  := $(VENV)/.installed

# llama.cpp is compiled by pip. Build for a portable x86-64-v3 CPU instead of -march=native:
# a native build emits AMX instructions on CPUs that advertise AMX, and they fault
# (SIGILL) where the kernel has not granted AMX to the process.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
else
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
endif

.PHONY: install run test lint typecheck bench clean demo-db

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	@mkdir -p $(dir $(DB))
	$(BIN)/worthit ask --db $(DB) "Is the Aurora NC700 worth buying?"

test: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/decide.py --db $(DB)

clean:
	rm -rf $(VENV) var build *.egg-info
