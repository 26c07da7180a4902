"""Records to fill audit logs with in tests."""

from __future__ import annotations

from worthit.audit.record import AuditRecord

BASE_MS = 1_790_000_000_000


def record(i: int, *, tenant: str | None = "acme", to_verdict: float = 10.0) -> AuditRecord:
    return AuditRecord.for_answer(
        request_id=f"req-{i}",
        question=f"Is product {i} worth buying?",
        tenant=tenant,
        facts={"sku": f"S{i}", "price": 99.5, "version": "v1"},
        facts_version="v1",
        verdict="buy",
        explanation=f"Explanation {i}.",
        explanation_source="template",
        model="no-model",
        timings_ms={"to_verdict": to_verdict, "total": 10.0 * to_verdict},
        sku=f"S{i}",
        language="en",
        priority="medium",
        status="answered",
        wall_ms=BASE_MS + i * 1000,
        monotonic_ns=i,
    )
