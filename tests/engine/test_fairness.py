"""Fair share between tenants: virtual token counters inside a class, the per-tenant
cap on running requests, classes still first, and submit_async."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.engine.config import EngineConfig
from worthit.engine.detokenizer import Detokenizer
from worthit.engine.engine import Engine
from worthit.engine.errors import AdmissionRefusedError, EngineClosedError
from worthit.engine.fairness import FairShare
from worthit.engine.sequence import FinishReason, Priority, SamplingParams, Sequence

from engine_fakes import FakeRunner, reference_output
from harness import Harness

MEDIUM = Priority.MEDIUM


def make_engine(config: EngineConfig, runner: FakeRunner | None = None) -> Engine:
    engine = Engine(runner or FakeRunner(n_ctx=config.context_size), config)
    engine.start()
    return engine


def running_by_tenant(h: Harness) -> Counter[str]:
    return Counter(s.tenant for s in h.scheduler.running)


def waiting_of(h: Harness, tenant: str) -> int:
    return sum(1 for s in h.scheduler.waiting if s.tenant == tenant)


# -- the starvation of issue 9 --------------------------------------------------------


def test_a_later_tenant_is_not_starved_by_an_earlier_tenants_backlog():
    """Issue 9: one tenant's many long streams held the engine while another tenant's
    requests waited behind all of them. Tenant a fills the batch with long answers and
    queues more; tenant b then asks three short questions. b must get its first tokens
    when a's first answers end, ahead of a's backlog (before: after all of it). Nobody
    is preempted for fairness, so b waits for a's running answers."""

    async def main() -> None:
        config = EngineConfig(context_size=4096, block_size=8, max_sequences=4)
        engine = make_engine(config, FakeRunner(n_ctx=4096, step_delay_s=(0.0002, 0.0)))
        first: dict[str, float] = {}

        async def read(name: str, stream) -> None:
            async for delta in stream:
                if delta.token_ids:
                    first.setdefault(name, time.monotonic())

        try:
            long = SamplingParams(max_tokens=60)
            a = [engine.submit(f"a asks {i:02d}", params=long, tenant="a") for i in range(12)]
            readers = [asyncio.create_task(read(f"a{i}", s)) for i, s in enumerate(a)]
            for _ in range(2000):
                status = engine.status()
                if status.running == 4 and status.waiting == 8:
                    break
                await asyncio.sleep(0.001)
            assert (status.running, status.waiting, status.tenants) == (4, 8, 1)
            short = SamplingParams(max_tokens=4)
            b = [engine.submit(f"b asks {i}", params=short, tenant="b") for i in range(3)]
            assert engine.status().tenants in (1, 2)  # b is counted once picked up
            readers += [asyncio.create_task(read(f"b{i}", s)) for i, s in enumerate(b)]
            await asyncio.wait_for(asyncio.gather(*readers), 60)
        finally:
            engine.close()
        b_first = [first[f"b{i}"] for i in range(3)]
        a_first = [first[f"a{i}"] for i in range(12)]
        # b's first two join as a's first four end (a's next two with them: b is then at
        # its cap of 2 while a waits); b's third as soon as one of b's ends.
        assert sum(1 for t in a_first if t < min(b_first)) <= 6
        assert sum(1 for t in a_first if t < max(b_first)) <= 8  # before: all 12

    asyncio.run(main())


def test_backlogged_tenants_get_comparable_service():
    """Tenant a queues 12 answers of 30 tokens, b the same two steps later: from b's
    first token until either backlog drains, they generate tokens at the same rate
    (before: b got none until all of a's were done)."""
    h = Harness(EngineConfig(block_size=4, max_sequences=4, tpot_target_s=1.0))
    for i in range(12):
        h.seq(f"a{i}", 16, max_tokens=30, base=100 + i, tenant="a")
    h.step()
    h.step()
    for i in range(12):
        h.seq(f"b{i}", 16, max_tokens=30, base=200 + i, tenant="b")
    tokens: Counter[str] = Counter()
    started = False
    for _ in range(1000):
        if not (waiting_of(h, "a") and waiting_of(h, "b")):
            break
        _, updates = h.step()
        for u in updates:
            started = started or (u.seq.tenant == "b" and bool(u.token_ids))
            if started:
                tokens[u.seq.tenant] += len(u.token_ids)
    assert started, "b never got a token while a still had a backlog"
    assert tokens["a"] > 100 and tokens["b"] > 100
    assert 0.8 <= tokens["a"] / tokens["b"] <= 1.25


# -- virtual token counters ---------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 4),
    st.sampled_from([1e-6, 0.04, 1.0]),
    st.sampled_from([None, 5, 13]),
    st.sampled_from([1, 2, 3, 6]),
    st.sampled_from([128, 512]),
)
def test_backlogged_tenants_counters_stay_within_the_vtc_bound(
    seed, n_tenants, tpot, eog, cap, cells
):
    """Tenants that always have requests waiting in one class: the spread of their
    service counters never exceeds w_p * L + w_q * N * M (L the longest prompt, M the
    most tokens a request generates, N = max_sequences). Why: when the most served
    tenant last joined a request, its counter was the lowest (a tenant passed over for
    its cap is lifted to the joiner's counter), and since then it has been charged at
    most that prompt and what its at most N running requests can still generate. VTC's
    theorem bounds the same spread by 2 * max(w_p * L, w_q * M_kv), M_kv the tokens the
    running batch holds; N * M plays M_kv here, and the bound asserted is at most that.
    Without the lift, a binding cap lets the counters part: 450 against 192 here.
    128 KV cells preempt often (a recompute is not charged again), 512 never; the fake
    model ends answers early with eog."""
    rnd = random.Random(seed)
    n, longest, most = 6, 48, 12
    config = EngineConfig(
        context_size=cells, block_size=8, max_sequences=n, max_cached_prefixes=6,
        max_batch_tokens=64, min_prefill_chunk=16, tpot_target_s=tpot,
        max_sequences_per_tenant=cap,
    )  # fmt: skip
    h = Harness(config, runner=FakeRunner(n_ctx=cells, eog_every=eog))
    tenants = [f"t{i}" for i in range(n_tenants)]
    w_p, w_q = config.tenant_prompt_weight, config.tenant_output_weight
    bound = w_p * longest + w_q * n * most
    for step in range(250):
        for t in tenants:
            while waiting_of(h, t) <= n:  # more than can join in one step
                h.seq(
                    f"{t}-{step}-{rnd.random()}", rnd.randint(1, longest),
                    max_tokens=rnd.randint(1, most), base=rnd.choice([100, 200, 300]),
                    tenant=t,
                )  # fmt: skip
        h.step()
        counters = [h.scheduler.fairness.counter(MEDIUM, t) for t in tenants]
        assert max(counters) - min(counters) <= bound, (step, counters)
    assert min(counters) > 0  # everyone was served


def test_a_tenant_back_from_idle_is_lifted_and_banks_no_credit():
    """b works alone for a while; a then arrives with a backlog. Without the lift, a's
    counter (0) would let a's requests take every slot until a had caught up with all of
    b's past service; with it, a starts level with b and they alternate."""
    h = Harness(EngineConfig(block_size=4, max_sequences=2, tpot_target_s=1.0))
    for i in range(20):
        h.seq(f"b{i}", 8, max_tokens=20, base=100 + i, tenant="b")
    for _ in range(60):
        h.step()
    served_b = h.scheduler.fairness.counter(MEDIUM, "b")
    assert served_b > 100
    assert h.scheduler.fairness.counter(MEDIUM, "a") == served_b  # where a would start
    for i in range(8):
        h.seq(f"a{i}", 8, max_tokens=20, base=200 + i, tenant="a")
    assert h.scheduler.fairness.counter(MEDIUM, "a") == served_b
    joined: list[str] = []
    while len(joined) < 8:
        plan, _ = h.step()
        joined += [c.seq.tenant for c in plan.chunks if c.start == 0]
    assert 3 <= joined.count("a") <= 5


def test_an_empty_class_lifts_a_newcomer_to_the_last_tenant_to_leave():
    h = Harness(EngineConfig(block_size=4, max_sequences=2, tpot_target_s=1.0))
    h.seq("b0", 8, max_tokens=10, tenant="b")
    h.run()
    served_b = h.scheduler.fairness.counter(MEDIUM, "b")
    assert served_b == 8 * 1.0 + 10 * 2.0  # prompt tokens * w_p + generated * w_q
    h.seq("a0", 8, max_tokens=10, base=300, tenant="a")
    assert h.scheduler.fairness.counter(MEDIUM, "a") == served_b
    assert h.scheduler.fairness.counter(Priority.HIGH, "a") == 0  # classes are apart


def test_cached_prompt_tokens_are_not_charged():
    h = Harness(EngineConfig(block_size=4, tpot_target_s=1.0))
    h.seq("first", 40, max_tokens=1, tenant="x")
    h.run()
    before = h.scheduler.fairness.counter(MEDIUM, "x")
    second = h.seq("second", 40, max_tokens=1, tenant="x")  # same tokens: cached prefix
    h.run()
    assert second.cached_tokens == 36
    assert h.scheduler.fairness.counter(MEDIUM, "x") == before + (40 - 36) * 1.0 + 2.0


class _ReferenceVTC:
    """VTC's counters as the paper states them (nothing forgotten), to check that
    FairShare forgetting idle tenants at or below the lift level changes nothing."""

    def __init__(self) -> None:
        self.counters: dict[str, float] = {}
        self.active: Counter[str] = Counter()
        self.last_left = 0.0

    def arrived(self, tenant: str) -> None:
        if not self.active[tenant]:
            live = [self.counters[t] for t in self.active if self.active[t]]
            level = min(live) if live else self.last_left
            self.counters[tenant] = max(self.counters.get(tenant, 0.0), level)
        self.active[tenant] += 1

    def left(self, tenant: str) -> None:
        self.active[tenant] -= 1
        if not self.active[tenant]:
            self.last_left = self.counters[tenant]

    def counter(self, tenant: str) -> float:
        if self.active[tenant]:
            return self.counters[tenant]
        live = [self.counters[t] for t in self.active if self.active[t]]
        level = min(live) if live else self.last_left
        return max(self.counters.get(tenant, 0.0), level)


def _sequence(tenant: str, priority: Priority = MEDIUM) -> Sequence:
    return Sequence(
        request_id=f"{tenant}-{random.random()}", prompt_tokens=[1], params=SamplingParams(),
        priority=priority, deadline=None, arrival=0.0, detokenizer=Detokenizer(bytes),
        tenant=tenant,
    )  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["arrive", "leave", "prompt", "output"]),
            st.sampled_from(["a", "b", "c", "d"]),
            st.integers(1, 50),
        ),
        max_size=120,
    )
)
def test_forgetting_idle_tenants_keeps_the_papers_counters(events):
    fair, reference = FairShare(1.0, 2.0), _ReferenceVTC()
    live: dict[str, list[Sequence]] = {t: [] for t in "abcd"}
    for kind, tenant, n in events:
        if kind == "arrive":
            seq = _sequence(tenant)
            live[tenant].append(seq)
            fair.arrived(seq)
            reference.arrived(tenant)
        elif not live[tenant]:
            continue
        elif kind == "leave":
            fair.left(live[tenant].pop())
            reference.left(tenant)
        else:
            charge = 1.0 * n if kind == "prompt" else 2.0
            if kind == "prompt":
                fair.charge_prompt(live[tenant][0], n)
            else:
                fair.charge_output(live[tenant][0])
            reference.counters[tenant] += charge
        for t in "abcd":
            assert fair.counter(MEDIUM, t) == reference.counter(t)
        assert fair.tenants == sum(1 for t in "abcd" if live[t])


# -- classes first --------------------------------------------------------------------


def test_classes_still_come_before_fairness():
    """heavy has been served far more than light, but its high requests still join
    before light's medium and low ones, and background only once nothing live waits."""
    h = Harness(EngineConfig(block_size=4, max_sequences=1, tpot_target_s=1.0))
    for i in range(3):
        h.seq(f"heavy-warmup{i}", 30, Priority.HIGH, max_tokens=20, base=100 + i, tenant="heavy")
    h.run()
    assert h.scheduler.fairness.counter(Priority.HIGH, "heavy") > 200
    h.seq("light-bg", 8, Priority.BACKGROUND, base=500, tenant="light")
    h.seq("light-low", 8, Priority.LOW, base=510, tenant="light")
    h.seq("light-medium", 8, Priority.MEDIUM, base=520, tenant="light")
    h.seq("heavy-high", 8, Priority.HIGH, base=530, tenant="heavy")
    h.seq("light-high", 8, Priority.HIGH, base=540, tenant="light")
    order: list[str] = []
    while h.scheduler.has_work():
        plan, _ = h.step()
        order += [c.seq.request_id for c in plan.chunks if c.start == 0]
    # light's high request, from a tenant new to the class, is lifted to heavy's level
    # and goes second: the oldest first on a tie
    assert order == ["heavy-high", "light-high", "light-medium", "light-low", "light-bg"]


def test_prefill_inside_a_class_is_split_evenly_between_tenants():
    """b's one prompt is prefilled beside a's three, at half the class's prefill, not
    after all of them; between classes the 5/2/1 split is as before."""
    config = EngineConfig(block_size=4, max_batch_tokens=80, tpot_target_s=1e-6)
    h = Harness(config)
    for i in range(3):
        h.seq(f"a{i}", 200, base=100 + i, tenant="a")
    h.seq("low", 200, Priority.LOW, base=400, tenant="a")
    h.step()
    h.seq("b0", 200, base=300, tenant="b")
    plan, _ = h.step()
    got = Counter[str]()
    for chunk in plan.chunks:
        kind = chunk.seq.request_id[0] if chunk.seq.priority is MEDIUM else "low"
        got[kind] += len(chunk.tokens)
    assert got == {"a": 27, "b": 27, "low": 26}  # medium's 2/3 (and the rounding) halved


# -- the per-tenant cap ------------------------------------------------------------------


def _joined_by_tenant(cap: int) -> Counter[str]:
    """a asks four questions with 4-token prompts, b four with 64-token prompts, at
    once, for 4 slots: by counters alone a would take 3 (a's prompts cost it little)."""
    h = Harness(EngineConfig(block_size=4, max_sequences=4, max_sequences_per_tenant=cap,
                             tpot_target_s=1.0))  # fmt: skip
    for i in range(4):
        h.seq(f"a{i}", 4, max_tokens=50, base=100 + i, tenant="a")
    for i in range(4):
        h.seq(f"b{i}", 64, max_tokens=50, base=200 + i, tenant="b")
    h.step()
    return running_by_tenant(h)


def test_a_tenant_at_its_cap_waits_while_another_tenant_waits():
    assert _joined_by_tenant(cap=4) == {"a": 3, "b": 1}
    assert _joined_by_tenant(cap=2) == {"a": 2, "b": 2}


def test_the_cap_is_work_conserving():
    """Alone, a tenant uses every slot; once the other tenant's requests are in, it
    takes the free slots again. Nobody is preempted for the cap."""
    config = EngineConfig(block_size=4, max_sequences=4, tpot_target_s=1.0)
    assert config.tenant_sequences == 2
    h = Harness(config)
    a = [h.seq(f"a{i}", 8, max_tokens=40, base=100 + i, tenant="a") for i in range(10)]
    h.step()
    assert running_by_tenant(h) == {"a": 4}
    b = [h.seq(f"b{i}", 8, max_tokens=3, base=200 + i, tenant="b") for i in range(2)]
    while not all(s.is_finished for s in b):
        h.step()
    for _ in range(2):
        h.step()
    assert running_by_tenant(h) == {"a": 4}
    h.run()
    assert all(s.preemptions == 0 for s in a + b)


def test_default_cap_is_half_the_batch():
    assert EngineConfig(max_sequences=16).tenant_sequences == 8
    assert EngineConfig(max_sequences=1, min_sequences=1).tenant_sequences == 1
    assert EngineConfig(max_sequences_per_tenant=3).tenant_sequences == 3
    with pytest.raises(ValueError):
        EngineConfig(max_sequences_per_tenant=0)


# -- the engine API -----------------------------------------------------------------------


class _SlowTokenizer(FakeRunner):
    """Tokenises slowly, as a 64 KiB prompt does, and says on which thread."""

    def __init__(self, delay_s: float, n_ctx: int = 4096) -> None:
        super().__init__(n_ctx=n_ctx)
        self.delay_s = delay_s
        self.tokenized_on: list[int] = []
        self.closed_under_it: list[bool] = []

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        if "slow" in text:
            self.tokenized_on.append(threading.get_ident())
            time.sleep(self.delay_s)
            self.closed_under_it.append(self.closed)
        return super().tokenize(text, add_special)


def test_submit_async_tokenises_off_the_loop():
    async def main() -> None:
        runner = _SlowTokenizer(0.2)
        engine = make_engine(EngineConfig(context_size=4096, block_size=8), runner)
        try:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            stream = await engine.submit_async(
                "slow prompt", params=SamplingParams(max_tokens=6), tenant="t"
            )
            ticker.cancel()
            assert ticks >= 5  # the loop ran on while the prompt was tokenised
            assert runner.tokenized_on and threading.get_ident() not in runner.tokenized_on
            done = await stream.collect()
            assert done.finish_reason is FinishReason.LENGTH
            prompt = FakeRunner().tokenize("slow prompt")
            assert list(done.token_ids) == reference_output(prompt, 6)
            chat = await engine.submit_async(
                messages=[{"role": "user", "content": "hi"}], params=SamplingParams(max_tokens=3)
            )
            assert (await chat.collect()).prompt_tokens == len(
                engine.chat_template.render([{"role": "user", "content": "hi"}])
            )
            ids = await engine.submit_async([5, 6, 7], params=SamplingParams(max_tokens=2))
            assert list((await ids.collect()).token_ids) == reference_output([5, 6, 7], 2)
        finally:
            engine.close()

    asyncio.run(main())


def test_submit_async_refuses_as_submit_does():
    async def main() -> None:
        engine = make_engine(EngineConfig(context_size=1024, block_size=8), _SlowTokenizer(0.1))
        engine.step_model.overhead_s = 0.01
        engine.step_model.per_token_s = 0.01
        try:
            with pytest.raises(AdmissionRefusedError) as refused:
                await engine.submit_async("x" * 300, deadline_s=0.2)
            assert refused.value.reason == "deadline"
            with pytest.raises(ValueError):
                await engine.submit_async("x", priority=Priority.BACKGROUND, deadline_s=1.0)
            pending = asyncio.create_task(engine.submit_async("slow one"))
            await asyncio.sleep(0.02)  # tokenising on its thread
            engine.close()  # waits for the tokeniser before it frees the model
            with pytest.raises(EngineClosedError):
                await pending
            with pytest.raises(EngineClosedError):
                await engine.submit_async("after close")
        finally:
            engine.close()
        assert engine.runner.closed_under_it == [False]  # type: ignore[attr-defined]

    asyncio.run(main())


def test_status_counts_tenants_and_anonymous_is_one():
    async def main() -> None:
        config = EngineConfig(context_size=1024, block_size=8)
        engine = make_engine(config, FakeRunner(n_ctx=1024, step_delay_s=(0.002, 0.0)))
        try:
            long = SamplingParams(max_tokens=200)
            streams = [
                engine.submit("one", params=long, tenant="a"),
                engine.submit("two", params=long, tenant="a"),
                engine.submit("three", params=long),
                engine.submit("four", params=long, tenant=None),
            ]
            for stream in streams:
                await stream.__anext__()
            assert engine.status().tenants == 2
            done = await engine.generate("five", params=SamplingParams(max_tokens=2), tenant="b")
            assert done.finish_reason is FinishReason.LENGTH
            for stream in streams:
                stream.abort()
                await stream.collect()
            assert engine.status().tenants == 0
        finally:
            engine.close()

    asyncio.run(main())
