"""As-of answers over HTTP: what `worthit ask --as-of` and `worthit facts --as-of` give for
the same moment, said to be as of then; a moment with no answer is a 422 naming `as_of`."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from worthit.decide.as_of import end_of_day_ms
from worthit.text.time import iso

from conftest import MARKET_END, run_cli
from live_server import LiveServer
from service_fixtures import market_copy, open_service

__all__ = ["market_copy", "open_service"]

DAY = (MARKET_END - timedelta(days=10)).isoformat()
MOMENT = iso(end_of_day_ms(MARKET_END - timedelta(days=10)))
SAME = ("verdict", "verdict_label", "confidence", "reasons", "sku", "title", "facts",
        "data_age_ms", "facts_version", "explanation", "status", "intent", "language")  # fmt: skip


@pytest.fixture
def cli_market(small_market: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "cli.db"
    shutil.copy(small_market, copy)
    return copy


@pytest.mark.parametrize(
    "question",
    ["Is the Aurora NC700 worth buying?", "极光NC700值不值得买？", "Lumina 55U8 worth it?"],
)
def test_an_as_of_answer_is_the_one_the_cli_gives_for_that_moment(
    open_service: LiveServer, cli_market: Path, question: str
) -> None:
    r = httpx.post(open_service.base_url + "/v1/decide", json={"question": question, "as_of": DAY})
    assert r.status_code == 200, r.text
    http = r.json()
    cli = run_cli("ask", "--db", str(cli_market), "--no-llm", "--json", "--as-of", DAY, question)
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)
    assert {key: http[key] for key in SAME} == {key: expected[key] for key in SAME}
    assert http["as_of"] == expected["as_of"] == MOMENT
    assert http["explanation_source"] == "template" and http["fallback_reason"] == "as_of"
    assert http["facts"]["all_time_low_at"] <= DAY


def test_the_streamed_verdict_says_it_is_as_of(open_service: LiveServer) -> None:
    with httpx.stream(
        "POST",
        open_service.base_url + "/v1/decide",
        json={"question": "Is the Aurora NC700 worth buying?", "as_of": DAY},
        headers={"Accept": "text/event-stream"},
    ) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    verdict, done = json.loads(lines[0][6:]), json.loads(lines[-1][6:])
    assert verdict["as_of"] == MOMENT
    assert done["fallback_reason"] == "as_of"


def test_facts_as_of_are_those_of_the_cli(open_service: LiveServer, cli_market: Path) -> None:
    url = open_service.base_url + "/v1/products/S2/facts"
    r = httpx.get(url, params={"as_of": DAY})
    assert r.status_code == 200, r.text
    body = r.json()
    cli = run_cli("facts", "--db", str(cli_market), "S2", "--json", "--as-of", DAY)
    assert cli.returncode == 0, cli.stderr
    assert body["facts"] == json.loads(cli.stdout)
    assert body["as_of"] == body["facts"]["as_of"] == MOMENT
    now = httpx.get(url)
    assert "as_of" not in now.json() and now.headers["etag"] != r.headers["etag"]
    again = httpx.get(url, params={"as_of": DAY}, headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304


@pytest.mark.parametrize(
    ("as_of", "why"),
    [
        ("next tuesday", "expected an ISO 8601 time or day"),
        (MARKET_END.isoformat(), "in the future"),  # the day's end is a minute after "now"
        ((MARKET_END + timedelta(days=5)).isoformat(), "in the future"),
        ("2020-01-01T00:00:00Z", "before the market's first data"),
    ],
)
def test_a_moment_with_no_answer_is_a_422_naming_as_of(
    open_service: LiveServer, as_of: str, why: str
) -> None:
    base = open_service.base_url
    decide = httpx.post(base + "/v1/decide", json={"question": "NC700 worth it?", "as_of": as_of})
    facts = httpx.get(base + "/v1/products/S1/facts", params={"as_of": as_of})
    for response, field in ((decide, "body.as_of"), (facts, "query.as_of")):
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["field"] == field and why in problem["detail"]
