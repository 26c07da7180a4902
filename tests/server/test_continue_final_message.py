"""vLLM's `continue_final_message` on worthit's chat API: the final assistant message is
the answer's start (the engine's answer_prefix), which is how a remote worthit engine
receives an explanation's opening words."""

from __future__ import annotations

import httpx

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.http.app import create_app
from worthit.service.settings import ServiceSettings

from engine_fakes import FakeRunner
from live_server import LiveServer

QUESTION = [
    {"role": "system", "content": "Facts: price 199, rating 4.4."},
    {"role": "user", "content": "Is it worth buying?"},
]
START = {"role": "assistant", "content": "Worth it because"}


def test_the_final_assistant_message_is_continued_not_closed() -> None:
    config = EngineConfig(context_size=1024, block_size=8)
    engine = Engine(FakeRunner(n_ctx=1024, step_delay_s=(0.001, 0.0)), config)
    with LiveServer(create_app(ServiceSettings(db_path=None, auth=False), engine=engine)) as s:
        url = s.base_url + "/v1/chat/completions"
        body = {"messages": [*QUESTION, START], "max_tokens": 3, "temperature": 0}
        continued = httpx.post(url, json=body | {"continue_final_message": True}).json()
        closed = httpx.post(url, json=body).json()
        refused = httpx.post(
            url, json={"messages": QUESTION, "max_tokens": 3, "continue_final_message": True}
        )
    engine.close()
    expected = engine.runner.tokenize(engine.chat_template.render(QUESTION) + START["content"])
    assert continued["usage"]["prompt_tokens"] == len(expected)
    assert closed["usage"]["prompt_tokens"] > len(expected)
    assert refused.status_code == 400
    assert "final assistant message" in refused.json()["error"]["message"]


def test_background_is_a_priority_the_chat_api_takes() -> None:
    config = EngineConfig(context_size=1024, block_size=8)
    engine = Engine(FakeRunner(n_ctx=1024, step_delay_s=(0.001, 0.0)), config)
    with LiveServer(create_app(ServiceSettings(db_path=None, auth=False), engine=engine)) as s:
        url = s.base_url + "/v1/chat/completions"
        body = {"messages": QUESTION, "max_tokens": 3, "priority": "background"}
        reply = httpx.post(url, json=body)
        with_deadline = httpx.post(url, json=body | {"deadline_ms": 500})
    engine.close()
    assert reply.status_code == 200 and reply.json()["worthit"]["priority"] == "background"
    assert with_deadline.status_code == 400
