"""Remote engines over the OpenAI wire: two real `worthit engine serve` replicas (one more
killed mid-stream), a real llama_cpp.server, doubles of vLLM and SGLang speaking their
documented wire (wire_doubles.py: they need a GPU this machine lacks), and `worthit
serve --engine URL` in front of each with the background generator on.

Every answer must end in an explanation whatever a replica does: a refusal is the same
fallback as in process, a dead replica is the template and an ejection, never a lost
answer. Where the peer is healthy the explanation is the model's: its text, or, when
the checker refuses the bare 135M model's words, a checker's code with the model's
tokens counted, never an engine's failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from worthit.answer.on_demand import explain_on_demand
from worthit.decide.decider import Decision, DecisionStatus
from worthit.decide.intent import parse_intent
from worthit.engine.backend import EngineBackend
from worthit.engine.remote.client import RemoteEngine, RemoteTimeouts, Wire
from worthit.engine.remote.router import Router
from worthit.engine.sequence import FinishReason, SamplingParams
from worthit.explain.explainer import Explanation, ExplanationRun

from engine_fixtures import model_path
from factories import make_sheet, make_verdict
from replica_processes import Replica, free_port, llama_cpp_replica, worthit_replica

pytestmark = pytest.mark.slow

__all__ = ["model_path"]

PRODUCTS = [f"Aurora NC{700 + 10 * i} Headphones" for i in range(20)]
PATIENT = RemoteTimeouts(read_s=60)
"""For explanations asked with no deadline, four at once of a one-thread replica: on a
loaded machine their prefill is silent for longer than the 10 s default, which would end
them engine_error (a timeout, not the failure these tests are about)."""
NOT_THE_MODELS = frozenset({"engine_error", "engine_abort", "deadline_expired",
                            "deadline_passed", "no_model", "EngineClosedError",
                            "PromptTooLongError"})  # fmt: skip
"""Fallbacks that say the peer did not write (failed, cut off, refused, never asked)."""
DOUBLES = Path(__file__).with_name("wire_doubles.py")


def assert_the_model_wrote(source: str | None, fallback: str | None, tokens: int) -> None:
    """The peer's completion arrived: the model's text, or the checker's refusal of it
    (a checker code), with its tokens counted; never an engine failure or refusal."""
    assert tokens > 0, (source, fallback)
    if source != "llm":
        assert fallback and fallback not in NOT_THE_MODELS, fallback
        assert not fallback.startswith("refused_"), fallback


def model_wrote(final: Explanation) -> None:
    assert_the_model_wrote(final.source, final.fallback_reason, final.tokens["completion"])


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Replica]]:
    """Three replicas started at once: two to serve, one to kill."""
    logs = tmp_path_factory.mktemp("replicas")
    three = [worthit_replica(logs).start() for _ in range(3)]
    try:
        yield [replica.wait_ready() for replica in three]
    finally:
        for replica in three:
            replica.stop()


@pytest.fixture(scope="module")
def replicas(started: list[Replica]) -> tuple[Replica, Replica]:
    return started[0], started[1]


@pytest.fixture(scope="module")
def doomed(started: list[Replica]) -> Replica:
    return started[2]


@pytest.fixture(scope="module")
def llama_cpp(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Iterator[Replica]:
    replica = llama_cpp_replica(tmp_path_factory.mktemp("llama-cpp"), model_path).start()
    try:
        yield replica.wait_ready()
    finally:
        replica.stop()


def decision(title: str = PRODUCTS[0]) -> Decision:
    return Decision(
        question=f"Is the {title} worth buying?",
        intent=parse_intent(f"Is the {title} worth buying?"),
        status=DecisionStatus.ANSWERED,
        verdict=make_verdict(),
        sheet=make_sheet(title=title, sku=title.split()[1]),
    )


async def explained(
    engine: EngineBackend, title: str, deadline_s: float | None = None
) -> Explanation:
    items = [i async for i in explain_on_demand(decision(title), engine, deadline_s=deadline_s)]
    assert isinstance(items[-1], Explanation)
    return items[-1]


def messages(title: str) -> list[dict[str, str]]:
    return ExplanationRun(decision(title).sheet, make_verdict()).messages  # type: ignore[arg-type]


async def until(condition: Callable[[], bool], within_s: float = 30) -> None:
    give_up = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < give_up, "condition not reached"
        await asyncio.sleep(0.05)


def sample(text: str, name: str, **labels: str) -> float | None:
    """One sample of a Prometheus text exposition, None if absent."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def test_two_tenants_through_a_router_get_the_replicas_fair_share(
    replicas: tuple[Replica, Replica],
) -> None:
    """The tenant travels as `user`: the replica counts two tenants, and b's requests,
    sent while a fills the batch and queues the rest of 8, join as a's first ones end,
    not behind a's whole backlog (before: anonymous, one queue, b last)."""
    replica = replicas[0]
    site = replica.url.removesuffix("/v1")
    count = {"role": "user", "content": "Count from 1 to 200, one number a line."}

    async def main() -> tuple[list[float], list[float], int, int]:
        router = Router([replica.url], timeouts=RemoteTimeouts(read_s=120))  # a's queue
        await router.start()
        first: dict[str, float] = {}
        most_tenants = 0

        async def read(name: str, tenant: str) -> None:
            msgs = [{"role": "system", "content": f"You are counter {name}."}, count]
            stream = router.submit(messages=msgs, tenant=tenant,
                                   params=SamplingParams(max_tokens=24, temperature=0))  # fmt: skip
            async for delta in stream:
                if delta.text:
                    first.setdefault(name, time.monotonic())

        async def load() -> dict[str, int]:
            return dict((await http.get(site + "/healthz")).json())

        async with httpx.AsyncClient(timeout=10) as http:
            try:
                readers = [asyncio.create_task(read(f"a{i}", "a")) for i in range(8)]
                give_up = time.monotonic() + 60
                while (status := await load())["running"] + status["waiting"] < 8:
                    assert time.monotonic() < give_up, status
                    await asyncio.sleep(0.01)
                running = status["running"]  # the batch window's, at most 4
                readers += [asyncio.create_task(read(f"b{i}", "b")) for i in range(2)]
                while not all(r.done() for r in readers):
                    text = (await http.get(site + "/metrics")).text
                    tenants = sample(text, "worthit_engine_tenants") or 0
                    most_tenants = max(most_tenants, int(tenants))
                    await asyncio.sleep(0.02)
                await asyncio.gather(*readers)
            finally:
                await router.aclose()
        return ([first[f"a{i}"] for i in range(8)], [first[f"b{i}"] for i in range(2)],
                most_tenants, running)  # fmt: skip

    a_first, b_first, most_tenants, running = asyncio.run(main())
    assert most_tenants == 2
    # b takes the first slots a's running ones free (a, at its cap of half of the
    # replica's 4 sequences while b waits, joins at most two beside it): before, b came
    # after all 8 of a's
    assert 0 < running <= 4
    assert sum(1 for t in a_first if t < max(b_first)) <= running + 2


def test_a_worthit_replica_continues_the_answer_and_reports_its_tokens(
    replicas: tuple[Replica, Replica],
) -> None:
    async def main() -> tuple[Explanation, int, int]:
        engine = RemoteEngine(replicas[0].url)
        try:
            assert await engine.connect() == "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf"  # the upcast
            assert engine.wire is Wire.WORTHIT
            final = await explained(engine, PRODUCTS[0])
            run = ExplanationRun(decision().sheet, make_verdict())
            closed = httpx.post(  # the same prompt with the answer's start as a closed turn
                replicas[0].url + "/chat/completions",
                json={
                    "messages": [*run.messages, {"role": "assistant", "content": run.prefix}],
                    "max_tokens": 1,
                    "stream": False,
                },
                timeout=60,
            ).json()
            return final, closed["usage"]["prompt_tokens"], final.tokens["prompt"]
        finally:
            await engine.aclose()

    final, closed_prompt, continued_prompt = asyncio.run(main())
    model_wrote(final)
    assert 0 < continued_prompt < closed_prompt  # no end-of-turn, no second assistant header


def test_a_deadline_a_replica_cannot_meet_is_the_same_refusal_as_in_process(
    replicas: tuple[Replica, Replica],
) -> None:
    async def main() -> Explanation:
        engine = RemoteEngine(replicas[0].url)
        try:
            await engine.connect()
            return await explained(engine, PRODUCTS[1], deadline_s=0.105)  # 5 ms for the model
        finally:
            await engine.aclose()

    final = asyncio.run(main())
    assert (final.source, final.fallback_reason) == ("template", "refused_deadline")
    assert final.timings_ms["llm_estimate"] > final.timings_ms["llm_budget"]


def test_the_router_keeps_each_products_prompts_on_one_replica(
    replicas: tuple[Replica, Replica],
) -> None:
    async def main() -> tuple[dict[str, set[str]], list[Explanation], int]:
        router = Router([r.url for r in replicas], timeouts=PATIENT)
        await router.start()
        try:
            homes: dict[str, set[str]] = {}
            for title in PRODUCTS:
                for verdict_text in ("", " (again)"):
                    msgs = messages(title)
                    msgs[-1] = {**msgs[-1], "content": msgs[-1]["content"] + verdict_text}
                    homes.setdefault(title, set()).add(router.route(msgs)[0].base_url)
            finals = await asyncio.gather(*(explained(router, t) for t in PRODUCTS[:4]))
            return homes, list(finals), router.status().healthy
        finally:
            await router.aclose()

    homes, finals, healthy = asyncio.run(main())
    assert all(len(home) == 1 for home in homes.values())
    assert {url for home in homes.values() for url in home} == {r.url for r in replicas}
    for final in finals:
        model_wrote(final)
    assert healthy == 2


def test_a_replica_killed_mid_stream_costs_no_answer_and_is_ejected(
    replicas: tuple[Replica, Replica], doomed: Replica
) -> None:
    """Its streams end in the template, the router ejects it and the other replica serves
    every product from then on; a probe readmits nothing that stays dead."""
    try:

        async def main() -> None:
            router = Router([replicas[1].url, doomed.url], probe_interval_s=0.2, timeouts=PATIENT)
            await router.start()
            try:
                on_doomed = [
                    t for t in PRODUCTS if router.route(messages(t))[0].base_url == doomed.url
                ]
                assert len(on_doomed) >= 2
                run = ExplanationRun(decision(on_doomed[0]).sheet, make_verdict())
                raw = router.submit(messages=run.messages, answer_prefix=run.prefix,
                                    params=SamplingParams(max_tokens=300))  # fmt: skip
                answers = [asyncio.create_task(explained(router, t)) for t in on_doomed[1:4]]
                first = await anext(raw)
                while not first.text:
                    first = await anext(raw)
                doomed.kill()
                rest = [d async for d in raw]
                assert rest[-1].finish_reason is FinishReason.ERROR
                for final in await asyncio.gather(*answers):  # none lost, each named
                    if final.fallback_reason in NOT_THE_MODELS:
                        assert final.fallback_reason == "engine_error"  # on the dead one
                    else:
                        model_wrote(final)
                await until(lambda: not router.status().replicas[1].healthy)
                status = {r.url: r for r in router.status().replicas}
                assert status[doomed.url].ejections == 1 and status[replicas[1].url].healthy
                text = generate_latest(router.metrics.registry).decode()
                assert sample(text, "worthit_replica_up", replica=doomed.url) == 0
                assert sample(text, "worthit_replica_up", replica=replicas[1].url) == 1
                assert sample(text, "worthit_replica_ejections_total", replica=doomed.url) == 1
                errors = sample(text, "worthit_replica_requests_finished_total",
                                replica=doomed.url, finish_reason="error")  # fmt: skip
                assert errors is not None and errors >= 1
                after = await asyncio.gather(*(explained(router, t) for t in on_doomed[:3]))
                for final in after:  # the survivor wrote them
                    model_wrote(final)
                await asyncio.sleep(0.5)  # probes of a dead replica keep it out
                assert not router.status().replicas[1].healthy
            finally:
                await router.aclose()

        asyncio.run(main())
    finally:
        doomed.kill()


def test_llama_cpp_server_writes_the_same_continuation_as_a_worthit_replica(
    replicas: tuple[Replica, Replica], llama_cpp: Replica
) -> None:
    """Its /v1/completions with the prompt rendered here continues the answer's start as
    worthit's continue_final_message does: greedy, the same opening words."""

    async def main() -> tuple[Wire, Explanation, str, str]:
        anchor, ours = RemoteEngine(llama_cpp.url), RemoteEngine(replicas[0].url)
        try:
            await anchor.connect()
            await ours.connect()
            final = await explained(anchor, PRODUCTS[2])
            run = ExplanationRun(decision(PRODUCTS[2]).sheet, make_verdict())
            texts = []
            for engine in (anchor, ours):  # each takes the tenant as `user`
                stream = engine.submit(messages=run.messages, answer_prefix=run.prefix,
                                       params=SamplingParams(max_tokens=8),
                                       tenant="shopper-1")  # fmt: skip
                texts.append("".join([d.text async for d in stream]))
            return anchor.wire, final, texts[0], texts[1]
        finally:
            await anchor.aclose()
            await ours.aclose()

    wire, final, theirs, ours = asyncio.run(main())
    assert wire is Wire.COMPLETIONS
    model_wrote(final)  # tokens counted a chunk a token: it streams no usage
    assert theirs.split()[:3] == ours.split()[:3] and theirs.strip()


class Served:
    """A `worthit serve --demo --engine URL…` child process, the background generator on."""

    def __init__(self, market: Path, engines: list[str]) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "worthit", "serve", "--demo", "--db", str(market),
             "--port", str(self.port), "--background", "--live-rate", "0", "--warm-s", "1",
             *(arg for url in engines for arg in ("--engine", url))],
            stderr=subprocess.PIPE, text=True, env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
        self.stderr = ""

    def ready(self, within_s: float = 120) -> dict[str, Any]:
        give_up = time.monotonic() + within_s
        while True:
            try:
                ready = httpx.get(self.base + "/readyz", timeout=10)
                if ready.status_code == 200:
                    return dict(ready.json())
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise AssertionError(f"worthit serve exited: {self.process.communicate()[1]}")
            assert time.monotonic() < give_up, "worthit serve is not ready"
            time.sleep(0.2)

    def until_sent(self, within_s: float = 120) -> None:
        """Until the background generator has a request at a replica: shoppers now meet it."""
        give_up = time.monotonic() + within_s
        while sum(e["in_flight"] for e in self.ready()["engines"]) == 0:
            assert time.monotonic() < give_up, "the background generator sent nothing"
            time.sleep(0.1)

    def decide(self, question: str = "Is the Aurora NC700 worth buying?") -> dict[str, Any]:
        asked = {"question": question, "deadline_ms": 30000}
        answer = httpx.post(self.base + "/v1/decide", json=asked, timeout=60)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        _, self.stderr = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, self.stderr


@contextlib.contextmanager
def served(small_market: Path, tmp_path: Path, engines: list[str]) -> Iterator[Served]:
    market = tmp_path / "market.db"
    shutil.copy(small_market, market)
    server = Served(market, engines)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.stop()


def answered_by_the_model(answer: dict[str, Any]) -> None:
    assert answer["explanation"]
    assert_the_model_wrote(
        answer["explanation_source"], answer.get("fallback_reason"),
        answer["tokens"].get("completion", 0),
    )  # fmt: skip


def test_worthit_serve_with_remote_engines_answers_over_http(
    replicas: tuple[Replica, Replica], small_market: Path, tmp_path: Path
) -> None:
    with served(small_market, tmp_path, [r.url for r in replicas]) as server:
        engines = server.ready()["engines"]
        server.until_sent()
        answer = server.decide()
        base = server.base
        models = httpx.get(base + "/v1/models", timeout=10).json()
        chat = {"model": models["data"][1]["id"], "max_tokens": 4,
                "messages": [{"role": "user", "content": "Is it worth buying?"}]}  # fmt: skip
        proxied = httpx.post(base + "/v1/chat/completions", json=chat, timeout=60).json()
        refused = httpx.post(
            base + "/v1/chat/completions", json=chat | {"deadline_ms": 1}, timeout=60
        )
        metrics = httpx.get(base + "/metrics", timeout=10).text
        server.stop()
    assert [e["healthy"] for e in engines] == [True, True]
    assert [e["concurrency"] for e in engines] == [None, None]  # a worthit replica batches
    answered_by_the_model(answer)
    assert [m["id"] for m in models["data"]] == ["worthit", "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf"]
    assert f"engines {replicas[0].url}" in server.stderr
    assert proxied["usage"]["completion_tokens"] > 0  # plain chat goes on to a replica
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "deadline_unmeetable"
    for replica in replicas:  # the router's replicas, not an engine's
        assert sample(metrics, "worthit_replica_up", replica=replica.url) == 1
        assert sample(metrics, "worthit_replica_ejections_total", replica=replica.url) == 0
        errors = sample(metrics, "worthit_replica_requests_finished_total",
                        replica=replica.url, finish_reason="error")  # fmt: skip
        assert not errors
    assert sample(metrics, "worthit_replica_time_to_first_token_seconds_count")
    assert sample(metrics, "worthit_replica_requests_finished_total")


def test_worthit_serve_in_front_of_llama_cpp_server_with_the_background_generator_on(
    llama_cpp: Replica, small_market: Path, tmp_path: Path
) -> None:
    """llama_cpp.server ends its running stream, `[DONE]` and no finish_reason, when any
    other request arrives (its `interrupt_requests`), a GET /v1/models too. Before, the
    background generator's requests, the router's probes and a shopper's cut each other
    off: every explanation ended engine_error and the replica was ejected. Now it is sent
    one request at a time (learnt from its `owned_by`), a shopper's first, and the probe
    waits while it is busy."""
    with served(small_market, tmp_path, [llama_cpp.url]) as server:
        server.until_sent()
        answers = [server.decide(), server.decide("Is the Kestrel Q5 worth buying?")]
        engines = server.ready()["engines"]
        metrics = httpx.get(server.base + "/metrics", timeout=10).text
        server.stop()
    for answer in answers:
        answered_by_the_model(answer)
    (engine,) = engines
    assert (engine["wire"], engine["concurrency"]) == ("completions", 1)
    assert engine["healthy"] and engine["ejections"] == 0 and engine["failures"] == 0
    errors = sample(metrics, "worthit_replica_requests_finished_total",
                    replica=llama_cpp.url, finish_reason="error")  # fmt: skip
    assert not errors
    # what llama_cpp.server logs when it interrupts a stream for a newer request
    assert "ASGI callable returned without completing response" not in llama_cpp.log.read_text()


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_worthit_serve_reads_the_vllm_and_sglang_wire(
    kind: str, small_market: Path, tmp_path: Path
) -> None:
    """Doubles of vLLM and SGLang (their documented SSE wire, wire_doubles.py): the chat
    request continues the answer's start, carries none of worthit's own fields, and the
    usage chunk they send last is what counts the tokens; no limit on what they are sent."""
    log = tmp_path / f"{kind}.jsonl"
    port = free_port()
    double = Replica([sys.executable, str(DOUBLES), kind, str(port), str(log)], port,
                     tmp_path / f"{kind}.out")  # fmt: skip
    double.start().wait_ready(within_s=60)
    try:
        with served(small_market, tmp_path, [double.url]) as server:
            server.until_sent()
            answer = server.decide()
            (engine,) = server.ready()["engines"]
            server.stop()
    finally:
        double.stop()
    answered_by_the_model(answer)
    assert answer["tokens"]["completion"] == 8  # the double's usage, not a count of chunks
    assert answer["fallback_reason"]  # its fixed words are no explanation the checker keeps
    assert (engine["wire"], engine["concurrency"], engine["healthy"]) == ("chat", None, True)
    bodies = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(bodies) >= 2  # the background generator's and the shopper's
    for body in bodies:
        assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
        assert body["messages"][-1]["role"] == "assistant"
        assert body["stream_options"] == {"include_usage": True}
        assert not {"priority", "deadline_ms", "deadline_policy"} & set(body)


def test_llama_server_says_how_many_requests_it_runs_at_once(tmp_path: Path) -> None:
    """llama-server (not installed here) answers its slot count at GET /props; an
    explicit `?concurrency=N` wins over what a replica says."""
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/props":
            return httpx.Response(200, json={"total_slots": 3})
        return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "llamacpp"}]})

    async def main() -> tuple[int | None, int | None]:
        found, stated = (
            RemoteEngine(url, client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
            for url in ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1?concurrency=1")
        )
        await found.connect()
        await stated.connect()
        return found.slots.limit, stated.slots.limit

    assert asyncio.run(main()) == (3, 1)
    assert seen == ["/v1/models", "/props", "/v1/models"]
