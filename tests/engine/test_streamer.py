"""The synchronous adapter the explanation flow uses."""

from __future__ import annotations

import time

import pytest

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.errors import AdmissionRefusedError
from worthit.engine.sequence import FinishReason
from worthit.engine.streamer import EngineStreamer

from engine_fakes import FakeRunner, reference_output

MESSAGES = [{"role": "system", "content": "Facts: 199 USD."}, {"role": "user", "content": "Buy?"}]


@pytest.fixture
def engine():
    config = EngineConfig(context_size=1024, block_size=8)
    engine = Engine(FakeRunner(n_ctx=1024, step_delay_s=(0.001, 0.0)), config)
    engine.start()
    yield engine
    engine.close()


def test_streams_text_after_the_answer_prefix(engine):
    streamer = EngineStreamer(engine)
    try:
        text = "".join(streamer.stream(MESSAGES, max_tokens=9, answer_prefix="Verdict:"))
        prompt = engine.runner.tokenize(engine.chat_template.render(MESSAGES) + "Verdict:")
        assert text == "".join(chr(t - 1) for t in reference_output(prompt, 9))
        assert streamer.last is not None and streamer.last.finish_reason is FinishReason.LENGTH
    finally:
        streamer.close()


def test_stopping_early_aborts_the_request(engine):
    streamer = EngineStreamer(engine)
    try:
        pieces = streamer.stream(MESSAGES, max_tokens=500)
        next(pieces)
        pieces.close()
        for _ in range(500):
            if not engine.scheduler.has_work():
                break
            time.sleep(0.002)
        assert not engine.scheduler.running
        assert streamer.last is None or streamer.last.finish_reason is not FinishReason.LENGTH
    finally:
        streamer.close()


def test_refusal_is_raised_before_any_text(engine):
    engine.step_model.overhead_s = 0.05
    engine.step_model.per_token_s = 0.05
    streamer = EngineStreamer(engine, deadline_s=0.1)
    try:
        with pytest.raises(AdmissionRefusedError):
            streamer.stream(MESSAGES, max_tokens=8)
    finally:
        streamer.close()
