"""Drive a Scheduler step by step with a fake runner and a controlled clock."""

from __future__ import annotations

from worthit.engine.config import EngineConfig
from worthit.engine.detokenizer import Detokenizer
from worthit.engine.kv.block_manager import BlockManager
from worthit.engine.scheduler import Scheduler, StepPlan, Update
from worthit.engine.sequence import Priority, SamplingParams, Sequence
from worthit.engine.timing.latency import StepTimeModel

from engine_fakes import FakeRunner


class Harness:
    def __init__(
        self,
        config: EngineConfig,
        runner: FakeRunner | None = None,
        overhead_s: float = 0.001,
        per_token_s: float = 0.001,
        freeze: bool = True,
        timed: bool = False,
        background_model: StepTimeModel | None = None,
    ) -> None:
        self.config = config
        self.runner = runner or FakeRunner(n_ctx=config.context_size)
        self.blocks = BlockManager(
            config.num_blocks, config.block_size, config.num_seq_ids, self.runner
        )
        self.model = StepTimeModel(overhead_s=overhead_s, per_token_s=per_token_s)
        if freeze:  # keep the step-time model at its prior, so budgets are exact
            self.model.observe = lambda *args, **kwargs: None  # type: ignore[method-assign]
        self.scheduler = Scheduler(
            config, self.blocks, self.model, self.runner.is_eog, background_model=background_model
        )
        self.step_s = overhead_s
        self.timed = timed
        """Advance the clock by the model's predicted cost of each step's tokens (with a
        frozen model: exactly what the scheduler planned with)."""
        self.now = 0.0
        self.finished: list[Sequence] = []
        """Sequences in the order they finished."""

    def seq(
        self,
        rid: str,
        prompt_len: int,
        priority: Priority = Priority.MEDIUM,
        deadline: float | None = None,
        max_tokens: int = 4,
        base: int = 100,
        required_tokens: int = 1,
        tenant: str = "",
    ) -> Sequence:
        seq = Sequence(
            request_id=rid,
            prompt_tokens=[base + (i % 50) for i in range(prompt_len)],
            params=SamplingParams(max_tokens=max_tokens),
            priority=priority,
            deadline=deadline,
            arrival=self.now,
            detokenizer=Detokenizer(self.runner.piece),
            required_tokens=required_tokens,
            tenant=tenant,
        )
        self.scheduler.add(seq)
        return seq

    def step(self) -> tuple[StepPlan, list[Update]]:
        """What the engine's step does, on the harness's clock."""
        plan = self.scheduler.schedule(self.now)
        sampled: dict[int, int] = {}
        step_s = 0.0
        if plan.chunks:
            sampled = self.runner.step(plan.chunks, {c.seq_id: None for c in plan.chunks})
            step_s = self.model.predict(plan.num_tokens) if self.timed else self.step_s
            self.now += step_s
        updates = self.scheduler.postprocess(plan, sampled, step_s, self.now)
        self.finished += [u.seq for u in updates if u.seq.is_finished]
        self.blocks.check()
        return plan, updates

    def run(self, max_steps: int = 1000) -> None:
        for _ in range(max_steps):
            if not self.scheduler.has_work():
                return
            self.step()
        raise AssertionError("scheduler did not drain")
