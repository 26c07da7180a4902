"""Property-based fuzzing of the app's own OpenAPI spec: no input may cause a 5xx.

The OpenAI-compatible chat route is left out: it refuses a deadline it cannot meet with
a deliberate 503 (as OpenAI-compatible servers signal overload), and the SDK tests pin
its behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from worthit.http.app import create_app

from live_server import LiveServer
from service_fixtures import fake_engine, market_copy, market_settings

__all__ = ["market_copy"]


@pytest.fixture
def live_server(market_copy) -> Iterator[LiveServer]:  # type: ignore[no-untyped-def]
    engine = fake_engine()
    app = create_app(market_settings(market_copy, auth=False), engine=engine)
    with LiveServer(app) as server:
        yield server
    engine.close()


def test_no_input_causes_a_server_error(live_server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(live_server.base_url + "/openapi.json")
    operations = [
        result.ok() for result in schema.exclude(path="/v1/chat/completions").get_all_operations()
    ]
    assert {op.path for op in operations} >= {"/v1/decide", "/v1/products/{sku}/facts"}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def fuzz(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=[not_a_server_error])

        fuzz()
