"""A JSON request body parsed and checked in one pass, for the routes on the answer path.

FastAPI reads a declared body by decoding the JSON in Python and then solving the
route's dependencies, which together were about a fifth of the Python calls of a
`/v1/decide` answer with every cache warm. Here pydantic's own parser reads the bytes
straight into the model. What a client sees does not change: a body the fast pass
refuses is read again the way FastAPI reads one, so every error (the field it names, the
message, 400 for bytes that are not UTF-8 or JSON nested too deeply) is the one a
declared body gets, and the route's OpenAPI entry is the one FastAPI writes for it
(`openapi`).
"""

from __future__ import annotations

import email.message
import json
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from worthit.http.problems import PARSE_ERROR

Model = TypeVar("Model", bound=BaseModel)


async def json_body(request: Request, model: type[Model]) -> Model:
    raw = await request.body()
    content_type = request.headers.get("content-type")
    if raw and is_json(content_type):
        try:
            return model.model_validate_json(raw)
        except ValidationError as exc:
            if all(error["loc"] for error in exc.errors()):  # not JSON, or not an object
                raise RequestValidationError(_in_body(exc)) from None
    return _as_fastapi_reads(raw, content_type, model)


def openapi(model: type[BaseModel]) -> dict[str, Any]:
    """The `openapi_extra` of a route that reads `model` with `json_body`: the request
    body FastAPI documents for a declared one (the schema inline) and its 422."""
    return {
        "requestBody": {
            "content": {"application/json": {"schema": model.model_json_schema()}},
            "required": True,
        },
        "responses": {
            "422": {
                "description": "Validation Error",
                "content": {
                    "application/json": {
                        "schema": {"$ref": "#/components/schemas/HTTPValidationError"}
                    }
                },
            }
        },
    }


def not_json(exc: RequestValidationError, content_type: str | None) -> str | None:
    """What to tell a client whose body was refused only because its Content-Type does
    not say JSON, or None. `curl -d` sends application/x-www-form-urlencoded, and the bare
    error ("Input should be a valid dictionary or object to extract fields from") did not
    say what to change."""
    errors = exc.errors()
    if (
        is_json(content_type)
        or not errors
        or tuple(errors[0].get("loc", ())) != ("body",)
        or errors[0].get("type") == "missing"
    ):
        return None
    sent = f"'{content_type}'" if content_type else "none"
    return (
        f"content-type: the body must be JSON sent with Content-Type: application/json "
        f"(this request's: {sent})"
    )


def is_json(content_type: str | None) -> bool:
    """FastAPI's test: application/json or application/*+json; no header is not JSON."""
    if content_type == "application/json":  # what nearly every client sends: no parse
        return True
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def _as_fastapi_reads(raw: bytes, content_type: str | None, model: type[Model]) -> Model:
    """The slow pass, for a body the fast one refused (or would not read as JSON)."""
    if not raw:
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
        )
    data: Any = raw
    if is_json(content_type):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RequestValidationError(
                [
                    {
                        "type": "json_invalid",
                        "loc": ("body", exc.pos),
                        "msg": "JSON decode error",
                        "input": {},
                        "ctx": {"error": exc.msg},
                    }
                ]
            ) from None
        except Exception as exc:  # not UTF-8, nested too deeply: as FastAPI answers them
            raise HTTPException(400, PARSE_ERROR) from exc
    try:
        return model.model_validate(data, from_attributes=True)
    except ValidationError as exc:
        raise RequestValidationError(_in_body(exc)) from None


def _in_body(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {**error, "loc": ("body", *error["loc"])}
        for error in exc.errors(include_url=False, include_input=False)
    ]
