"""How a handler reaches the service's state: `state: StateDep` instead of untyped
`app.state` attributes; `/v1/decide`, which reads its body itself (http/json_body.py),
calls `state_of` instead of solving a dependency."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from worthit.service.state import ServiceState


def state_of(request: Request) -> ServiceState:
    """The state, for a handler on the answer path that reads it without a dependency."""
    state = request.app.state.service
    assert isinstance(state, ServiceState)
    return state


async def service_state(request: Request) -> ServiceState:
    """Async, so FastAPI resolves it on the loop: a sync dependency costs every request a
    trip through the thread pool."""
    return state_of(request)


StateDep = Annotated[ServiceState, Depends(service_state)]
