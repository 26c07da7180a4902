"""/metrics with remote engines: each replica's health, load, pace and finished requests,
read through the real server in front of real replica servers (the engine on a fake
model runner, as `worthit engine serve` serves it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from worthit.engine.chat import ChatMessage
from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.remote.router import Router
from worthit.http.app import create_app
from worthit.service.settings import ServiceSettings

from engine_fakes import FakeRunner
from live_server import LiveServer

ENGINE_ONLY = ServiceSettings(db_path=None, auth=False)
"""How `worthit engine serve` runs a replica, and a front that only proxies chat."""
MESSAGES: list[ChatMessage] = [{"role": "user", "content": "Is it worth buying?"}]
CHAT = {"model": "fake-model", "max_tokens": 5, "messages": MESSAGES}


def metrics(base: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample at base's /metrics, by name and labels."""
    text = httpx.get(base + "/metrics", timeout=10).text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def until(condition: Callable[[], bool], within_s: float = 30) -> None:
    give_up = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < give_up, "condition not reached"
        time.sleep(0.05)


@pytest.fixture
def replicas() -> Iterator[list[LiveServer]]:
    with ExitStack() as stack:
        servers = []
        for _ in range(2):
            config = EngineConfig(context_size=1024, block_size=8)
            engine = Engine(FakeRunner(n_ctx=1024, step_delay_s=(0.001, 0.0)), config)
            stack.callback(engine.close)
            servers.append(stack.enter_context(LiveServer(create_app(ENGINE_ONLY, engine=engine))))
        yield servers


def test_metrics_list_each_replica_and_show_one_ejected_when_it_goes_down(
    replicas: list[LiveServer],
) -> None:
    urls = [r.base_url + "/v1" for r in replicas]
    router = Router(urls, probe_interval_s=0.05)
    doomed = replicas[1]
    with LiveServer(create_app(ENGINE_ONLY, remote=router)) as front:
        reply = httpx.post(front.base_url + "/v1/chat/completions", json=CHAT, timeout=30)
        assert reply.status_code == 200, reply.text
        served = router.route(MESSAGES)[0].base_url
        before = metrics(front.base_url)
        doomed.__exit__(None, None, None)  # its port refuses connections from now on
        until(lambda: metrics(front.base_url)[up(urls[1])] == 0)
        after = metrics(front.base_url)

    for url in urls:
        assert before[up(url)] == 1
        assert before[("worthit_replica_in_flight_requests", replica(url))] == 0
        assert before[("worthit_replica_ejections_total", replica(url))] == 0
        assert before[("worthit_replica_pace_ttft_seconds", replica(url))] > 0
        assert before[("worthit_replica_pace_token_seconds", replica(url))] > 0
    finished = ("worthit_replica_requests_finished_total",
                replica(served) | {("finish_reason", "length")})  # fmt: skip
    assert before[finished] == 1
    assert before[("worthit_replica_time_to_first_token_seconds_count", replica(served))] == 1
    assert after[up(urls[0])] == 1
    assert after[("worthit_replica_ejections_total", replica(urls[1]))] == 1
    assert after[("worthit_replica_consecutive_failures", replica(urls[1]))] >= 2


def replica(url: str) -> frozenset[tuple[str, str]]:
    return frozenset({("replica", url)})


def up(url: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return ("worthit_replica_up", replica(url))
