"""Content negotiation: request bodies to dicts, JSON answers to protobuf when the client prefers it.

The store and the HTTP handlers speak JSON only; this is the seam where a body in
`application/vnd.kubernetes.protobuf` becomes a dict (`decode_body`) and a JSON answer, watch
stream included, becomes protobuf for a client whose Accept header prefers it (`negotiate`).
As the API server: protobuf for the built-in kinds (those with a schema in protobuf_wire),
never for custom resources, whose protobuf bodies get 415 and whose protobuf-only Accept
gets 406.  Patch bodies stay JSON (the patch handler answers 415 to anything else).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse

from kube_elevator.fakes.kube_api.errors import ApiError, BadRequest
from kube_elevator.fakes.kube_api.protobuf_wire import (
    PROTOBUF,
    ProtobufError,
    decode_object,
    encode_object,
    encode_watch_frame,
    message_for,
)
from kube_elevator.fakes.kube_api.resources import ResourceType

log = logging.getLogger(__name__)

WATCH_PROTOBUF = PROTOBUF + ";stream=watch"
_JSONISH = ("application/json", "application/yaml", "*/*", "application/*")


def media_type(header: str) -> str:
    """`application/json; charset=utf-8` -> `application/json`."""
    return header.split(";")[0].strip().lower()


def serves_protobuf(rt: ResourceType) -> bool:
    """Whether the kind has a protobuf form (the built-ins do, custom resources do not)."""
    return message_for(rt.api_version, rt.kind) is not None


def prefers_protobuf(accept: str) -> bool:
    """Whether the Accept header ranks protobuf above JSON (by q, then by order), as
    client-go's typed clients send it: `application/vnd.kubernetes.protobuf,application/json`."""
    best: tuple[float, int, str] | None = None
    for index, part in enumerate(accept.split(",")):
        kind = media_type(part)
        if kind != PROTOBUF and kind not in _JSONISH:
            continue
        if "as=" in part:  # a Table or PartialObjectMetadata view: served as JSON
            continue
        quality = 1.0
        for param in part.split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0 and (best is None or quality > best[0]):
            best = (quality, index, kind)
    return best is not None and best[2] == PROTOBUF


def check_acceptable(accept: str, rt: ResourceType) -> None:
    """406 where a real server gives it: the client accepts only protobuf, and the kind has
    none (a custom resource)."""
    kinds = {media_type(part) for part in accept.split(",") if part.strip()}
    if kinds == {PROTOBUF} and not serves_protobuf(rt):
        raise ApiError(406, "NotAcceptable",
                       "the server was unable to respond with a content type that the client "
                       "supports (accepted types: application/json, application/yaml)")


def is_protobuf(content_type: str) -> bool:
    return media_type(content_type) == PROTOBUF


def decode_body(raw: bytes, rt: ResourceType) -> Any:
    """A protobuf request body (object, DeleteOptions, Eviction) as the dict JSON would be."""
    if not serves_protobuf(rt):
        raise ApiError(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media types "
                       "include: application/json, application/yaml")
    if not raw:
        return None
    try:
        return decode_object(raw)
    except (ProtobufError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the request body is not valid protobuf for {rt.kind}: {exc}") \
            from None


def negotiate(response: Response, accept: str, rt: ResourceType) -> Response:
    """The JSON `response` re-encoded as protobuf when the client prefers it and the body's
    kind has a protobuf form; otherwise `response` unchanged."""
    if not prefers_protobuf(accept) or not serves_protobuf(rt):
        return response
    headers = {k: v for k, v in response.headers.items()
               if k.lower() not in ("content-length", "content-type")}
    if isinstance(response, StreamingResponse):
        if media_type(response.media_type or "") != "application/json":
            return response
        return StreamingResponse(protobuf_frames(response.body_iterator),
                                 status_code=response.status_code, headers=headers,
                                 media_type=WATCH_PROTOBUF)
    if media_type(response.media_type or "") != "application/json":
        return response
    body = orjson.loads(bytes(response.body))
    if not isinstance(body, dict) or message_for(str(body.get("apiVersion", "")),
                                                 str(body.get("kind", ""))) is None:
        return response  # a Table, or a kind without a protobuf form: JSON as the server would
    try:
        encoded = encode_object(body)
    except (ProtobufError, ValueError, TypeError) as exc:
        # The stored object does not fit its kind's schema: answer JSON (client-go reads the
        # answer's own Content-Type) rather than fail a request the store has already served.
        log.warning("protobuf: cannot encode %s %s (%s); answered JSON", body.get("kind"),
                    _name(body), exc)
        return response
    return Response(encoded, status_code=response.status_code, headers=headers,
                    media_type=PROTOBUF)


def _name(body: dict[str, Any]) -> str:
    meta = body.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, dict) else ""


async def protobuf_frames(lines: AsyncIterable[Any]) -> AsyncIterator[bytes]:
    """A JSON-lines watch stream as protobuf frames (each chunk holds whole lines)."""
    async for chunk in lines:
        data = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
        frames = []
        for line in data.splitlines():
            if line.strip():
                event = orjson.loads(line)
                frames.append(encode_watch_frame(event["type"], event["object"]))
        if frames:
            yield b"".join(frames)
