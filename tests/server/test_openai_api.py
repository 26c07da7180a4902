"""The OpenAI-compatible API through the official openai SDK and a real uvicorn."""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))  # shared fakes and fixtures

import httpx
import openai
import pytest

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.http.app import create_app
from worthit.service.settings import ServiceSettings
from worthit.service.tenants import TenantStore

from engine_fakes import FakeRunner
from engine_fixtures import model_path
from live_server import LiveServer
from service_fixtures import market_copy, market_settings

__all__ = ["market_copy", "model_path"]  # the fixtures, imported for pytest to find

ENGINE_ONLY = ServiceSettings(db_path=None, auth=False)
QUESTION = [
    {"role": "system", "content": "Facts: price 199, rating 4.4."},
    {"role": "user", "content": "Is it worth buying?"},
]


def fake_engine(**overrides: object) -> Engine:
    settings: dict[str, object] = {"context_size": 1024, "block_size": 8}
    settings.update(overrides)
    config = EngineConfig(**settings)  # type: ignore[arg-type]
    return Engine(FakeRunner(n_ctx=config.context_size, step_delay_s=(0.001, 0.0)), config)


def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)


def test_chat_completion_with_usage_and_extensions():
    engine = fake_engine()
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        api = client(server)
        reply = api.chat.completions.create(
            model="fake-model", messages=QUESTION, max_tokens=7, temperature=0,
            extra_body={"priority": "high", "deadline_ms": 5000},
        )  # fmt: skip
        assert reply.choices[0].finish_reason == "length"
        assert len(reply.choices[0].message.content or "") == 7
        assert reply.usage is not None and reply.usage.completion_tokens == 7
        prompt = engine.runner.tokenize(engine.chat_template.render(QUESTION))
        assert reply.usage.prompt_tokens == len(prompt)
        assert [m.id for m in api.models.list().data] == ["fake-model"]
    engine.close()


def test_streaming_matches_non_streaming():
    engine = fake_engine()
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        api = client(server)
        whole = api.chat.completions.create(model="fake-model", messages=QUESTION, max_tokens=12)
        parts, finish, usage = [], None, None
        for chunk in api.chat.completions.create(
            model="fake-model", messages=QUESTION, max_tokens=12, stream=True,
            stream_options={"include_usage": True},
        ):  # fmt: skip
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                parts.append(choice.delta.content or "")
                finish = choice.finish_reason or finish
        assert "".join(parts) == whole.choices[0].message.content
        assert finish == "length"
        assert usage is not None and usage.completion_tokens == 12
        assert usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens > 0  # same system prompt again
    engine.close()


def test_unknown_model_is_openais_404_model_not_found():
    """Before: the engine tried the request and a mistyped id came back as a 503 deadline
    refusal; OpenAI answers 404 `model_not_found`, which the SDK raises as NotFoundError."""
    engine = fake_engine()
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        api = client(server)
        for stream in (False, True):
            with pytest.raises(openai.NotFoundError) as missing:
                api.chat.completions.create(model="gpt-4o", messages=QUESTION, stream=stream)
            error = missing.value.body
            assert missing.value.status_code == 404
            assert error["type"] == "invalid_request_error"  # type: ignore[index]
            assert error["param"] == "model"  # type: ignore[index]
            assert error["code"] == "model_not_found"  # type: ignore[index]
            assert "fake-model" in error["message"]  # type: ignore[index]
        listed = [m.id for m in api.models.list().data]
        assert api.chat.completions.create(model=listed[0], messages=QUESTION, max_tokens=2)
    ran = sum(s.value for s in engine.metrics.finished.collect()[0].samples
              if s.name.endswith("_total"))  # fmt: skip
    assert ran == 1  # the 404s never reached the engine
    engine.close()


def test_bad_field_is_a_400_naming_it():
    engine = fake_engine()
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        api = client(server)
        with pytest.raises(openai.BadRequestError) as bad:
            api.chat.completions.create(
                model="fake-model", messages=QUESTION, extra_body={"priority": "urgent"}
            )
        assert bad.value.body is not None and bad.value.body["param"] == "priority"  # type: ignore[index]
        with pytest.raises(openai.BadRequestError) as bad:
            api.chat.completions.create(
                model="fake-model",
                messages=[{"role": "robot", "content": "x"}],  # type: ignore[list-item]
            )
        assert "messages.0.role" in str(bad.value)
        with pytest.raises(openai.BadRequestError) as bad:
            api.chat.completions.create(model="fake-model", messages=QUESTION, user="u" * 300)
        assert bad.value.body["param"] == "user"  # type: ignore[index]
        assert "at most 256" in str(bad.value)
    engine.close()


def test_unmeetable_deadline_is_refused_without_retry():
    engine = fake_engine()
    engine.step_model.overhead_s = 0.05
    engine.step_model.per_token_s = 0.05
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        api = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=2)
        with pytest.raises(openai.InternalServerError) as refused:
            api.chat.completions.create(
                model="fake-model", messages=QUESTION, extra_body={"deadline_ms": 100}
            )
        assert refused.value.status_code == 503
        assert refused.value.body["code"] == "deadline_unmeetable"  # type: ignore[index]
        # the SDK saw x-should-retry: false and asked once
        assert engine.metrics.refusals.labels("deadline")._value.get() == 1
    engine.close()


def test_deadline_policy_complete_needs_every_token_to_fit():
    engine = fake_engine()
    engine.runner.step_delay_s = (0.002, 0.002)  # type: ignore[attr-defined]
    # calibrated at start on ~2 ms a token: the prompt and one sentence fit in 2 s with
    # room to spare on a loaded machine, 1,000 tokens (~4 s) do not
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        api = client(server)
        with pytest.raises(openai.InternalServerError) as refused:
            api.chat.completions.create(
                model="fake-model", messages=QUESTION, max_tokens=1000,
                extra_body={"deadline_ms": 2000},
            )  # fmt: skip
        assert refused.value.body["code"] == "deadline_unmeetable"  # type: ignore[index]
        reply = api.chat.completions.create(
            model="fake-model", messages=QUESTION, max_tokens=1000,
            extra_body={"deadline_ms": 2000, "deadline_policy": "sentence"},
        )  # fmt: skip
        assert reply.choices[0].finish_reason in ("stop", "deadline")
        assert reply.choices[0].message.content
    engine.close()


def test_client_disconnect_mid_stream_aborts_and_frees_kv():
    engine = fake_engine()
    engine.runner.step_delay_s = (0.005, 0.0)  # type: ignore[attr-defined]
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        body = {"model": "fake-model", "messages": QUESTION, "max_tokens": 1000, "stream": True}
        with httpx.Client(base_url=server.base_url) as http:
            with http.stream("POST", "/v1/chat/completions", json=body) as response:
                lines = response.iter_lines()
                assert next(lines).startswith("data: ")
                assert next(lines) == ""
                assert next(lines).startswith("data: ")
            # leaving the block closes the connection mid-stream
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                health = http.get("/healthz").json()
                if health["running"] == 0 and health["waiting"] == 0:
                    break
                time.sleep(0.02)
            assert health["running"] == 0 and health["waiting"] == 0
            metrics = http.get("/metrics").text
            assert 'worthit_engine_requests_finished_total{finish_reason="abort"} 1.0' in metrics
    engine.close()
    assert engine.runner.samplers_alive == 0  # type: ignore[attr-defined]
    engine.blocks.check()
    assert set(engine.runner.kv) == set(engine.blocks.tables)  # type: ignore[attr-defined]


def tenants_while_streaming(server: LiveServer, engine: Engine, users: list[dict[str, str]]) -> int:
    """The most tenants the engine counts while one long stream per `users` entry runs."""
    body = {"model": "fake-model", "messages": QUESTION, "max_tokens": 2000, "stream": True}
    with httpx.Client(base_url=server.base_url) as http, ExitStack() as streams:
        reading = []  # a line iterator dropped would close its stream
        for headers in users:
            user = {"user": headers.pop("user")}
            response = streams.enter_context(
                http.stream("POST", "/v1/chat/completions", json=body | user, headers=headers)
            )
            assert response.status_code == 200
            reading.append(response.iter_lines())
            assert next(reading[-1]).startswith("data: ")
        seen = 0
        for _ in range(20):
            seen = max(seen, engine.status().tenants)
            time.sleep(0.01)
        return seen


def test_user_is_the_fair_share_without_keys_and_ignored_with_them(market_copy: Path) -> None:
    """Behind API workers a replica runs without keys and takes their tenant as `user`;
    a server with keys shares by the key's tenant, so varying `user` buys no share."""
    engine = fake_engine()
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        open_tenants = tenants_while_streaming(server, engine, [{"user": "a"}, {"user": "b"}])
    engine.close()
    _, key = TenantStore(market_copy).create("acme", "medium", rpm=100, tpm=100_000)
    auth = {"Authorization": f"Bearer {key}"}
    engine = fake_engine()
    with LiveServer(create_app(market_settings(market_copy), engine=engine)) as server:
        keyed_tenants = tenants_while_streaming(
            server, engine, [auth | {"user": "a"}, auth | {"user": "b"}]
        )
    engine.close()
    assert open_tenants == 2
    assert keyed_tenants == 1


@pytest.mark.slow
def test_real_model_through_the_sdk(model_path):
    config = EngineConfig(context_size=1024, n_threads=1, max_batch_tokens=256)
    with LiveServer(
        create_app(
            ServiceSettings(db_path=None, model_path=model_path, engine_config=config, auth=False)
        )
    ) as server:
        api = client(server)
        assert [m.id for m in api.models.list().data] == [model_path.name]
        reply = api.chat.completions.create(
            model=model_path.name, messages=QUESTION, max_tokens=8, temperature=0
        )
        assert reply.usage is not None and 1 <= reply.usage.completion_tokens <= 8
        text = "".join(
            c.choices[0].delta.content or ""
            for c in api.chat.completions.create(
                model=model_path.name,
                messages=QUESTION,
                max_tokens=8,
                temperature=0,
                stream=True,
            )
            if c.choices
        )
        assert text == reply.choices[0].message.content
        metrics = httpx.get(server.base_url + "/metrics").text
        assert "worthit_engine_time_to_first_token_seconds_count" in metrics
        assert "worthit_engine_prefix_cache_hit_tokens_total" in metrics


def test_latency_histograms_reach_a_minute_for_ttft_and_e2e():
    """Before, the buckets ended at 10 s: on a slow host `histogram_quantile` read 10 for
    every slower request, as 75 of 80 observations sat in +Inf."""
    engine = fake_engine()
    with LiveServer(create_app(ENGINE_ONLY, engine=engine)) as server:
        client(server).chat.completions.create(model="fake-model", messages=QUESTION, max_tokens=2)
        metrics = httpx.get(server.base_url + "/metrics").text
    engine.close()
    for name in ("time_to_first_token_seconds", "e2e_latency_seconds"):
        prefix = f"worthit_engine_{name}_bucket"
        lines = [line for line in metrics.splitlines() if line.startswith(prefix)]
        bounds = {float(line.split('le="')[1].split('"')[0]) for line in lines}
        assert max(b for b in bounds if b != float("inf")) >= 60, name
