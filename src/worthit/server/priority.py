"""Which class a request runs at: what it asks for, capped by its key's class.

A key's class is a ceiling on every route: a request may ask for a lower class, never a
higher one (OWASP API5, function-level authorization). Without auth (the demo) a request
gets the class it asks for, medium by default.
"""

from __future__ import annotations

from fastapi import Request

from worthit.engine.sequence import Priority

CEILING_KEY = "priority_ceiling"
"""Where the guard middleware leaves the authenticated key's class on the request."""


def request_priority(request: Request, asked: str | None = None) -> Priority:
    wanted = Priority[asked.upper()] if asked else Priority.MEDIUM
    ceiling = request.scope.get("state", {}).get(CEILING_KEY)
    if isinstance(ceiling, Priority):
        return max(wanted, ceiling)  # a larger value is a lower class
    return wanted
