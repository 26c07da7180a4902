"""POST /v1/feedback through the real server: idempotent per request id, scoped to the
tenant that got the answer, and learnt from by the answers that follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from worthit.audit import CheckpointPolicy
from worthit.service.tenants import TenantStore

from service_fixtures import market_copy, serving

__all__ = ["market_copy"]

QUESTION = "Is the Aurora NC700 worth buying?"
FAST = CheckpointPolicy(every_leaves=1, every_s=0.05)
FOLLOWED = {"BUY": "bought", "WAIT": "waited", "SKIP": "returned"}
"""An outcome that is evidence for each verdict (decide/calibration.py)."""


def ask(url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    reply = httpx.post(url + "/v1/decide", json={"question": QUESTION}, headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def test_feedback_is_idempotent_per_request_id_and_answers_learn_from_it(
    market_copy: Path,
) -> None:
    with serving(market_copy, audit_policy=FAST, auth=False) as server:
        url = server.base_url + "/v1/feedback"
        answer = ask(server.base_url)
        assert answer["calibrated_confidence"] == answer["confidence"]  # no evidence yet
        assert answer["calibration_evidence"] == 0
        outcome = FOLLOWED[answer["verdict"]]
        sent = {"request_id": answer["request_id"], "outcome": outcome}
        first = httpx.post(url, json=sent)
        again = httpx.post(url, json=sent)
        by_receipt = httpx.post(url, json=sent | {"leaf_index": answer["receipt"]["leaf_index"]})
        other = next(o for o in ("dismissed", "waited") if o != outcome)
        conflict = httpx.post(url, json=sent | {"outcome": other})
        unknown = httpx.post(url, json={"request_id": "no-such-answer", "outcome": "bought"})
        wrong_leaf = httpx.post(
            url, json=sent | {"leaf_index": answer["receipt"]["leaf_index"] + 1000}
        )
        later = ask(server.base_url)
    assert first.status_code == 201, first.text
    body = first.json()
    assert body["duplicate"] is False and body["outcome"] == outcome
    assert body["verdict"] == answer["verdict"] and body["sku"] == answer["sku"]
    assert body["category"] == "headphones"
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert by_receipt.status_code == 200 and by_receipt.json()["duplicate"] is True
    assert conflict.status_code == 409
    assert conflict.json()["stored"] == outcome and conflict.json()["field"] == "outcome"
    assert unknown.status_code == 404 and unknown.json()["field"] == "request_id"
    assert wrong_leaf.status_code == 404
    assert later["calibration_evidence"] == 1  # one outcome, however often it was sent
    assert later["calibrated_confidence"] > later["confidence"] or later["confidence"] >= 0.99


def test_a_return_replaces_a_purchase_and_turns_a_success_into_a_failure(
    market_copy: Path,
) -> None:
    with serving(market_copy, audit_policy=FAST, auth=False) as server:
        url = server.base_url + "/v1/feedback"
        answer = ask(server.base_url)
        bought = httpx.post(url, json={"request_id": answer["request_id"], "outcome": "bought"})
        returned = httpx.post(url, json={"request_id": answer["request_id"], "outcome": "returned"})
        back = httpx.post(url, json={"request_id": answer["request_id"], "outcome": "bought"})
        later = ask(server.base_url)
    assert bought.status_code == 201
    assert returned.status_code == 200 and returned.json()["replaced"] == "bought"
    assert back.status_code == 409  # a return is final
    if answer["verdict"] in ("BUY", "SKIP"):  # both count a return (failure, success)
        assert later["calibration_evidence"] == 1


def test_feedback_is_scoped_to_the_tenant_that_got_the_answer(market_copy: Path) -> None:
    tenants = TenantStore(market_copy)
    a = {"Authorization": f"Bearer {tenants.create('a', 'medium', rpm=100, tpm=10_000)[1]}"}
    b = {"Authorization": f"Bearer {tenants.create('b', 'medium', rpm=100, tpm=10_000)[1]}"}
    with serving(market_copy, audit_policy=FAST) as server:
        url = server.base_url + "/v1/feedback"
        answer = ask(server.base_url, a)
        sent = {"request_id": answer["request_id"], "outcome": "dismissed"}
        anonymous = httpx.post(url, json=sent)
        other = httpx.post(url, json=sent, headers=b)
        other_by_receipt = httpx.post(
            url, json=sent | {"leaf_index": answer["receipt"]["leaf_index"]}, headers=b
        )
        own = httpx.post(url, json=sent, headers=a)
        other_after = httpx.post(url, json=sent, headers=b)
    assert anonymous.status_code == 401
    assert other.status_code == 404 and other_by_receipt.status_code == 404
    assert other_after.status_code == 404  # A's feedback does not make the answer B's
    assert own.status_code == 201 and own.json()["duplicate"] is False


def test_bad_feedback_is_a_4xx_naming_the_field(market_copy: Path) -> None:
    with serving(market_copy, audit_policy=FAST, auth=False) as server:
        url = server.base_url + "/v1/feedback"
        bad_outcome = httpx.post(url, json={"request_id": "x", "outcome": "loved"})
        no_id = httpx.post(url, json={"outcome": "bought"})
        extra = httpx.post(url, json={"request_id": "x", "outcome": "bought", "verdict": "BUY"})
    assert bad_outcome.status_code == 422 and bad_outcome.json()["field"] == "body.outcome"
    assert no_id.status_code == 422 and no_id.json()["field"] == "body.request_id"
    assert extra.status_code == 422  # the verdict is the server's to say, never the client's
