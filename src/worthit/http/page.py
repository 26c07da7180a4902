"""The shopper's page: one HTML file and its static assets, no inline script."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import Mount

STATIC = files("worthit.http") / "static"

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(str(STATIC / "index.html"), media_type="text/html")


def static_mount() -> Mount:
    return Mount("/static", StaticFiles(directory=str(STATIC)), name="static")
