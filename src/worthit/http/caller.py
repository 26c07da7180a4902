"""Who a request is from (the tenant the guard authenticated) and what it may ask for.

A key's class is a ceiling on every route: a request may ask for a lower class, never a
higher one (OWASP API5, function-level authorization), and one that asks for none runs
at its key's class. Without auth (the demo) there is no tenant and a request gets the
class it asks for, medium by default.
"""

from __future__ import annotations

from fastapi import Request
from starlette.types import Scope

from worthit.engine.sequence import Priority
from worthit.service.tenants import Tenant

TENANT_KEY = "tenant"
"""Where the guard middleware leaves the authenticated tenant in the request's state."""


def remember_tenant(scope: Scope, tenant: Tenant) -> None:
    scope.setdefault("state", {})[TENANT_KEY] = tenant


def request_tenant(request: Request) -> Tenant | None:
    tenant = request.scope.get("state", {}).get(TENANT_KEY)
    return tenant if isinstance(tenant, Tenant) else None


def tenant_name(request: Request) -> str | None:
    """The authenticated tenant's name, or None without auth."""
    tenant = request_tenant(request)
    return None if tenant is None else tenant.name


def fair_share_key(request: Request, user: str | None = None) -> str | None:
    """The engine's fair-share key for a request naming OpenAI's `user`.

    With API keys it is the key's tenant whatever `user` says: otherwise a key's holder
    could split itself into as many shares as it has names to send. Without keys it is
    `user`, else None (one anonymous share): that is `worthit engine serve`, which runs
    with auth off behind the API workers, and they send the tenant they authenticated as
    `user` (engine/remote/client.py)."""
    tenant = request_tenant(request)
    return user if tenant is None else tenant.name


def request_priority(request: Request, asked: str | None = None) -> Priority:
    tenant = request_tenant(request)
    ceiling = Priority.MEDIUM if tenant is None else Priority[tenant.priority.name]
    if not asked:
        return ceiling
    wanted = Priority[asked.upper()]
    return wanted if tenant is None else max(wanted, ceiling)  # a larger value is lower
