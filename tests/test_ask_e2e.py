"""`worthit ask` end to end on the real bundled model, from an empty database path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import MARKET_AS_OF, run_cli

pytestmark = pytest.mark.slow


def test_ask_builds_the_demo_market_and_answers_with_the_real_model(tmp_path: Path) -> None:
    db = tmp_path / "fresh" / "demo.db"
    result = run_cli("ask", "--db", str(db), "--json", "Is the Aurora NC700 worth buying?")
    assert result.returncode == 0, result.stderr
    assert "building the demo market" in result.stderr
    answer = json.loads(result.stdout)
    assert answer["sku"] == "S1" and answer["verdict"] == "BUY"
    assert answer["explanation_source"] in ("llm", "template")
    assert answer["explanation"].startswith("Worth buying now")
    if answer["explanation_source"] == "template":
        assert answer["fallback_reason"] != "no_model"
    assert answer["timings_ms"]["llm_total"] > 0
    assert answer["timings_ms"]["to_verdict"] < answer["timings_ms"]["total"]


def test_streamed_answer_in_chinese_with_the_real_model(small_market: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    shutil.copy(small_market, db)
    result = run_cli("ask", "--db", str(db), "--as-of", MARKET_AS_OF, "极光NC700值不值得买？")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    verdict_at = out.index("BUY")
    explanation_at = out.index("值得现在买")
    assert verdict_at < explanation_at < out.index("timings:")
    assert "explanation: " in out and "Traceback" not in result.stderr


def test_the_second_asker_of_the_same_inputs_gets_the_stored_text(
    small_market: Path, tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    shutil.copy(small_market, db)
    first = run_cli("ask", "--db", str(db), "--json", "--as-of", MARKET_AS_OF, "--sku", "S1", "?")
    assert first.returncode == 0, first.stderr
    written = json.loads(first.stdout)
    assert written["explanation_source"] == "llm", "greedy SmolLM2 explains S1 at once"
    again = run_cli(
        "ask", "--db", str(db), "--json", "--as-of", MARKET_AS_OF, "Aurora NC700 worth it?"
    )
    stored = json.loads(again.stdout)
    assert (stored["cached"], stored["explanation"]) == (True, written["explanation"])
    assert stored["generated_at"]
