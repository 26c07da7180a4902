"""The `worthit` command as a user runs it, in a child process (template text, no model)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import MARKET_AS_OF, run_cli

AS_OF = ("--as-of", MARKET_AS_OF)
"""The small market is read at its own end, whatever day the suite runs."""


@pytest.fixture
def market(small_market: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "m.db"
    shutil.copy(small_market, copy)
    return copy


def ask(market: Path, question: str, *extra: str) -> dict[str, object]:
    result = run_cli("ask", "--db", str(market), "--no-llm", "--json", *AS_OF, *extra, question)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("question", "sku", "verdict"),
    [
        ("Is the Aurora NC700 worth buying?", "S1", "BUY"),
        ("Should I wait for the sale on the Lumina 55U8?", "S2", "WAIT"),
        ("Is the Halden BrewMaster 3 worth it?", "S3", "SKIP"),
        ("Orbitek Pulse 2 worth buying?", "S4", "INSUFFICIENT_DATA"),
        ("极光NC700值不值得买？", "S1", "BUY"),
    ],
)
def test_ask_json_answers_the_demo_scenarios(
    market: Path, question: str, sku: str, verdict: str
) -> None:
    answer = ask(market, question)
    assert answer["sku"] == sku
    assert answer["verdict"] == verdict
    assert 0.0 <= answer["confidence"] <= 1.0  # type: ignore[operator]
    reasons = answer["reasons"]
    assert isinstance(reasons, list) and reasons
    assert all({"code", "text"} <= set(r) for r in reasons)
    assert answer["explanation_source"] == "template"
    assert isinstance(answer["explanation"], str) and answer["explanation"]
    assert isinstance(answer["facts_version"], str)
    assert isinstance(answer["data_age_ms"], int)
    assert {"intent", "resolve", "facts", "verdict", "total"} <= set(answer["timings_ms"])  # type: ignore[arg-type]


def test_chinese_question_gets_a_chinese_answer(market: Path) -> None:
    answer = ask(market, "极光NC700值不值得买？")
    assert answer["language"] == "zh"
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(answer["explanation"]))


def test_compare_and_top_n(market: Path) -> None:
    compared = ask(market, "Kestrel Q5 or Nordvik Aria ANC?")
    assert compared["intent"] == "compare"
    assert {c["sku"] for c in compared["compared"]} == {"S5", "S6"}  # type: ignore[union-attr,index]
    top = ask(market, "top 3 headphones by sales in the last 3 days")
    assert top["intent"] == "top_n" and top["verdict"] is None
    ranking = top["ranking"]
    assert isinstance(ranking, list) and 1 <= len(ranking) <= 3
    values = [item["value"] for item in ranking]
    assert values == sorted(values, reverse=True)


def test_a_budget_filters_rankings_and_weighs_on_a_verdict(market: Path) -> None:
    top = ask(market, "top 3 headphones under $260 by sales in the last 7 days")
    ranked = [item["sku"] for item in top["ranking"]]  # type: ignore[union-attr]
    facts = {sku: json.loads(run_cli("facts", "--db", str(market), sku, "--json", *AS_OF).stdout)
             for sku in ranked}  # fmt: skip
    assert ranked and all(sheet["current_price"] <= 260 for sheet in facts.values())
    assert top["summary"][0]["code"] == "top_budget"  # type: ignore[index]
    none = ask(market, "best headphones under $1")
    assert not none.get("ranking")
    assert [r["code"] for r in none["summary"]] == ["top_empty_budget"]  # type: ignore[union-attr,index]
    assert "at or under 1 today" in none["summary"][0]["text"]  # type: ignore[index]
    over = ask(market, "Is the Aurora NC700 worth buying under $100?")
    assert over["verdict"] == "SKIP"  # over the budget at its all-time low: no use waiting
    assert over["reasons"][0]["code"] == "over_budget_at_low"  # type: ignore[index]


def test_rankings_and_comparisons_are_printed_once(market: Path) -> None:
    result = run_cli("ask", "--db", str(market), "--no-llm", *AS_OF, "top 3 headphones by sales")
    assert result.stdout.count("#1 ") == 1, result.stdout
    assert "withdrawn" not in result.stdout


def test_no_llm_does_not_say_model_text_was_withdrawn(market: Path) -> None:
    result = run_cli(
        "ask", "--db", str(market), "--no-llm", *AS_OF, "Is the Aurora NC700 worth buying?"
    )
    assert "withdrawn" not in result.stdout and "Worth buying now" in result.stdout


def test_sku_option_skips_resolution(market: Path) -> None:
    assert ask(market, "worth it?", "--sku", "S3")["verdict"] == "SKIP"


def test_human_output_shows_verdict_then_explanation_then_timings(market: Path) -> None:
    result = run_cli(
        "ask", "--db", str(market), "--no-llm", *AS_OF, "Is the Aurora NC700 worth buying?"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("BUY") < out.index("Worth buying now") < out.index("timings:")
    assert "data age" in out


def test_an_uncalibrated_answer_says_so(market: Path) -> None:
    """Before: "calibrated confidence 0.85 (from 0 outcomes)", which the calibration
    report then contradicted; with no outcome recorded the figure is the rules' own."""
    result = run_cli("ask", "--db", str(market), "--no-llm", *AS_OF, "--sku", "S1", "?")
    assert result.returncode == 0, result.stderr
    assert "not calibrated yet: 0 outcomes; rules' own confidence" in result.stdout
    assert "calibrated confidence" not in result.stdout


def test_help_lists_each_command_as_its_own_help_says() -> None:
    """`worthit --help` lists the commands from a table, without importing them (fast
    start); the table must say what each command's own help says."""
    import typer.main

    from worthit.cli.app import COMMANDS, load_command

    listed = run_cli("--help")
    assert listed.returncode == 0
    for name, (_, _, short) in COMMANDS.items():
        command = load_command(name)
        assert " ".join((command.help or "").split()).startswith(short), name
        assert name in listed.stdout
    assert typer.main  # the real commands load through Typer as before


def test_help_and_a_template_answer_import_no_model_server_or_scipy(market: Path) -> None:
    """What made every command take seconds to start: llama.cpp, FastAPI, scipy and
    scikit-learn imported whether the command used them or not."""
    heavy = ("llama_cpp", "fastapi", "uvicorn", "scipy", "sklearn", "worthit.engine.engine")
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['worthit', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('worthit', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    import subprocess
    import sys

    for args in (["--help"], ["ask", "--db", str(market), "--no-llm", *AS_OF, "--sku", "S1", "?"]):
        out = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=300
        ).stdout
        assert "LOADED []" in out, (args, out[-300:])


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("ask", "   "), 2, "question is empty"),
        (("ask", "Is the Zorblax Hyperdrive 9000 worth it?"), 3, "unknown product"),
        (("ask", "hello there"), 3, "Could not find a product"),
        (("ask", "--sku", "S99999", "worth it?"), 3, "unknown sku"),
        (("facts", "S99999"), 3, "unknown sku"),
    ],
)
def test_clear_errors_and_exit_codes(
    market: Path, args: tuple[str, ...], code: int, message: str
) -> None:
    result = run_cli(
        *args[:1], "--db", str(market), "--no-llm" if args[0] == "ask" else "--json", *args[1:]
    )
    assert result.returncode == code
    assert message in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_missing_model_file_is_a_clear_error(market: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    result = run_cli("ask", "--db", str(market), "--model", str(missing), "Aurora NC700?")
    assert result.returncode == 2
    assert f"model file not found: {missing}" in result.stderr
    assert "Traceback" not in result.stderr
    not_gguf = tmp_path / "fake.gguf"
    not_gguf.write_text("hello")
    result = run_cli("ask", "--db", str(market), "--model", str(not_gguf), "Aurora NC700?")
    assert result.returncode == 2 and "not a GGUF" in result.stderr


def test_a_model_file_llama_cpp_cannot_load_is_a_clear_error(market: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    result = run_cli("ask", "--db", str(market), "--model", str(broken), "Aurora NC700?")
    assert result.returncode == 2, result.stderr
    assert f"llama.cpp could not load {broken}" in result.stderr
    assert "Traceback" not in result.stderr


NOT_SQLITE = (b"this is not sqlite", "cannot use the --db database: file is not a database")
TOO_NEW = (None, "database schema is version 99, this worthit knows up to")
MARKET_COMMANDS = [
    ("facts", "S1"),
    ("ask", "--no-llm", "Aurora NC700?"),
    ("import", "-"),
    ("simulate", "--skus", "5", "--days", "10"),
]


@pytest.mark.parametrize(
    ("args", "content", "message"),
    [(args, *case) for args in MARKET_COMMANDS for case in (NOT_SQLITE, TOO_NEW)]
    + [(("keys", "list"), *NOT_SQLITE)],  # keys keep their own table, outside the schema
)
def test_a_db_that_is_not_ours_is_a_clear_error(
    tmp_path: Path, args: tuple[str, ...], content: bytes | None, message: str
) -> None:
    db = tmp_path / "x.db"
    if content is None:
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA user_version = 99")
    else:
        db.write_bytes(content)
    command = args[:2] if args[0] == "keys" else args[:1]
    result = run_cli(*command, "--db", str(db), *args[len(command) :], stdin="")
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [*MARKET_COMMANDS, ("keys", "list")])
def test_an_unknown_db_url_is_refused_not_made_into_a_folder(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    command = args[:2] if args[0] == "keys" else args[:1]
    url = "mysql://root@127.0.0.1/x"
    result = run_cli(*command, "--db", url, *args[len(command) :], stdin="", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert "mysql: URLs are not a store" in said and "postgresql:// URL" in said
    assert list(tmp_path.iterdir()) == []


def test_worthit_db_names_the_database_for_every_command(market: Path, tmp_path: Path) -> None:
    env = {"WORTHIT_DB": str(market)}
    assert run_cli("facts", "S1", "--json", env=env).returncode == 0
    answer = run_cli("ask", "--no-llm", "--json", *AS_OF, "Aurora NC700?", env=env)
    assert json.loads(answer.stdout)["sku"] == "S1"
    fresh = tmp_path / "sim" / "s.db"
    sim = run_cli("simulate", "--skus", "5", "--days", "10", env={"WORTHIT_DB": str(fresh)})
    assert sim.returncode == 0 and fresh.exists()


def test_facts_does_not_create_folders_for_a_database_that_is_not_there(tmp_path: Path) -> None:
    result = run_cli("facts", "--db", str(tmp_path / "no" / "m.db"), "S1")
    assert result.returncode == 2 and "no database at" in result.stderr
    assert not (tmp_path / "no").exists()


def test_facts_json(market: Path) -> None:
    result = run_cli("facts", "--db", str(market), "S1", "--json", *AS_OF)
    assert result.returncode == 0, result.stderr
    sheet = json.loads(result.stdout)
    assert sheet["sku"] == "S1" and sheet["current_price"] > 0
    assert [w["days"] for w in sheet["windows"]] == [30, 90, 180]
    table = run_cli("facts", "--db", str(market), "S1", *AS_OF)
    assert "all-time low" in table.stdout and "facts version" in table.stdout


def test_import_file_and_stdin(tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    lines = [
        {"type": "product", "sku": "X1", "title": "Test Kettle", "brand": "T", "category": "k"},
        {"type": "price", "sku": "X1", "ts": "2026-01-01T00:00:00Z", "price": 20.0},
    ]
    data = "\n".join(json.dumps(x) for x in lines) + "\n{oops\n"
    source = tmp_path / "in.jsonl"
    source.write_text(data)
    first = run_cli("import", "--db", str(db), str(source))
    assert first.returncode == 1
    assert "line 3" in first.stderr and "2 written" in first.stdout
    again = run_cli("import", "--db", str(db), "-", "--json", stdin=data)
    report = json.loads(again.stdout)
    assert (report["written"], report["unchanged"]) == (0, 2)
    assert report["errors"] == [
        {"line": 3, "field": "(line)", "message": report["errors"][0]["message"]}
    ]
    missing = run_cli("import", "--db", str(db), str(tmp_path / "none.jsonl"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_import_reports_lines_stamped_in_the_future(tmp_path: Path) -> None:
    """Before, a row stamped next year was stored without a word (and never read as
    current); now the count and first line numbers are reported, --reject-future refuses."""
    lines = [
        {"type": "product", "sku": "X1", "title": "Test Kettle", "brand": "T", "category": "k"},
        {"type": "price", "sku": "X1", "ts": "2026-01-01T00:00:00Z", "price": 20.0},
        {"type": "price", "sku": "X1", "ts": "2999-01-01T00:00:00Z", "price": 19.0},
        {"type": "sales", "sku": "X1", "date": "2999-01-02", "units": 3},
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    kept = run_cli("import", "--db", str(tmp_path / "a.db"), str(source))
    assert kept.returncode == 0, kept.stderr
    assert "2 lines stamped in the future (lines 3, 4)" in kept.stderr
    assert "4 written" in kept.stdout
    refused = run_cli(
        "import", "--db", str(tmp_path / "b.db"), str(source), "--reject-future", "--json"
    )
    assert refused.returncode == 1
    report = json.loads(refused.stdout)
    assert report["written"] == 2 and report["future"] == {"count": 0, "lines": []}
    assert [(e["line"], e["field"]) for e in report["errors"]] == [(3, "ts"), (4, "date")]


def test_simulate_is_deterministic(tmp_path: Path) -> None:
    outs = []
    for name in ("a.db", "b.db"):
        result = run_cli(
            "simulate",
            "--db",
            str(tmp_path / name),
            "--skus",
            "10",
            "--days",
            "30",
            "--seed",
            "3",
            "--end",
            "2026-06-30",
        )
        assert result.returncode == 0, result.stderr
        outs.append(result.stdout)
    assert outs[0] == outs[1] and "10 products" in outs[0]
    bad = run_cli("simulate", "--db", str(tmp_path / "c.db"), "--end", "June")
    assert bad.returncode == 2 and "--end" in bad.stderr


def test_serve_refuses_a_market_another_server_is_logging(market: Path) -> None:
    """The audit log has one writer: a second `serve` on the same market says so at once
    (it used to load the model, then die in its start-up with a traceback)."""
    from worthit.audit import AuditPaths
    from worthit.audit.issued import IssuedCounter

    held = IssuedCounter(AuditPaths.beside(market).issued)
    try:
        result = run_cli("serve", "--db", str(market), "--port", "1")
    finally:
        held.close()
    assert result.returncode == 2
    assert "another process is writing the audit log" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("moment", "why"),
    [("9000-01-01", "is in the future"), ("2000-01-01T00:00:00Z", "before the market's first")],
)
@pytest.mark.parametrize("command", ["ask", "facts"])
def test_as_of_refuses_what_the_api_refuses(
    market: Path, command: str, moment: str, why: str
) -> None:
    args = ("ask", "--no-llm", "--sku", "S1", "?") if command == "ask" else ("facts", "S1")
    result = run_cli(*args[:1], "--db", str(market), "--as-of", moment, *args[1:])
    assert result.returncode == 2, result.stdout
    said = " ".join(result.stderr.split())
    assert "--as-of" in said and why in said
