"""The FastAPI app: OpenAI's /v1/completions, /v1/chat/completions, /v1/responses and /v1/models, plus /health,
/metrics, /version, vLLM's /tokenize and /detokenize, and /profile_steps (the next steps' GPU time by op family,
with --enable-step-profile), the last three behind the API key like /v1/*.

    app = create_app(llm, ServerConfig(api_key="..."))      # an LLM, or a bare Engine
    uvicorn.run(app)                                        # (quickmoe serve: server/serve.py)

Every error is answered as OpenAI does, `{"error": {"message", "type", "param", "code"}}`: 400 for an invalid
request (naming the field), 401 for a missing or wrong API key (when one is set; /v1/* only), 404/405 for
unknown routes, 413 for oversized bodies, 503 when the queue is full or the server is shutting down, 500 for
the server's own failures (logged; the server keeps serving).
"""

from __future__ import annotations

import hmac
import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from quickmoe import __version__
from quickmoe.server.api_errors import APIError, error_body
from quickmoe.server.async_engine import AsyncEngine
from quickmoe.server.chat import create_chat_completion
from quickmoe.server.completions import create_completion
from quickmoe.server.config import ServerConfig
from quickmoe.server.context import ServingContext
from quickmoe.server.core_client import CoreClient
from quickmoe.server.metrics import CONTENT_TYPE, ServerMetrics
from quickmoe.server.profile_steps import profile_steps
from quickmoe.server.responses import JSONBytesResponse
from quickmoe.server.responses_api import ResponseStore, create_response
from quickmoe.server.tokenize import detokenize, tokenize
from quickmoe.startup.report import StartupReport

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


def create_app(model, config: ServerConfig | None = None, *, startup_report: StartupReport | None = None,
               model_dir: str | Path | None = None) -> FastAPI:
    """The app over `model`: an `LLM` (its engine, tokenizer and start-up report are used), an `Engine` (the step
    loop then runs on a thread of this process), or an engine in another process (`engine_process.RemoteCore`).
    The step loop starts with the app's lifespan and stops (in-flight requests aborted) when it ends."""
    config = config if config is not None else ServerConfig()
    if isinstance(model, CoreClient):  # an engine process: what the app needs of the model came with it
        engine, tokenizer, max_model_len, vocab_size = model, model.tokenizer, model.max_model_len, model.vocab_size
    else:
        engine = getattr(model, "engine", model)  # an LLM's, or the Engine itself
        tokenizer, max_model_len, vocab_size = engine.tokenizer, engine.max_model_len, engine.config.vocab_size
    startup_report = startup_report if startup_report is not None else getattr(model, "startup_report", None)
    model_dir = model_dir if model_dir is not None else getattr(model, "model_dir", None)
    name = config.served_model_name or (Path(model_dir).name if model_dir is not None else "quickmoe")
    metrics = ServerMetrics(name, startup_report)
    async_engine = AsyncEngine(engine, max_waiting=config.max_waiting, metrics=metrics,
                               stats_interval_s=config.stats_interval_s, log_requests=config.log_requests,
                               time_steps=True)
    metrics.watch(lambda: async_engine.snapshot, lambda: async_engine.num_waiting)
    ctx = ServingContext(engine=async_engine, tokenizer=tokenizer, model_name=name, max_model_len=max_model_len,
                         vocab_size=vocab_size, config=config, metrics=metrics, created=int(time.time()))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async_engine.start()
        try:
            yield
        finally:
            await async_engine.shutdown()

    app = FastAPI(title="quickmoe", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.serving = ctx
    _add_error_handlers(app, metrics)

    @app.get("/health")
    async def health() -> Response:
        """200 once the engine runs; 503 while starting, draining or after its step loop died."""
        if async_engine.running:
            return JSONBytesResponse({"status": "ok"})
        return JSONBytesResponse({"status": "unavailable"}, status_code=503)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/version")
    async def version() -> Response:
        return JSONBytesResponse({"version": __version__})

    authorized = [Depends(_authorizer(config.api_key))]

    @app.post("/tokenize", dependencies=authorized)
    async def tokenize_route(request: Request) -> Response:
        return await tokenize(ctx, request)

    @app.post("/detokenize", dependencies=authorized)
    async def detokenize_route(request: Request) -> Response:
        return await detokenize(ctx, request)

    @app.post("/profile_steps", dependencies=authorized)
    async def profile_steps_route(request: Request) -> Response:
        return await profile_steps(ctx, request)

    v1 = APIRouter(prefix="/v1", dependencies=authorized)

    def model_card() -> dict:
        return {"id": name, "object": "model", "created": ctx.created, "owned_by": "quickmoe",
                "root": str(model_dir) if model_dir is not None else None, "max_model_len": ctx.max_model_len}

    @v1.get("/models")
    async def list_models() -> Response:
        return JSONBytesResponse({"object": "list", "data": [model_card()]})

    @v1.get("/models/{model_id:path}")
    async def get_model(model_id: str) -> Response:
        if model_id != name:
            raise APIError(404, f"model {model_id!r} is not served here; this server serves {name!r}",
                           param="model", code="model_not_found")
        return JSONBytesResponse(model_card())

    @v1.post("/completions")
    async def completions(request: Request) -> Response:
        return await create_completion(ctx, request)

    @v1.post("/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await create_chat_completion(ctx, request)

    stored_responses = ResponseStore()

    @v1.post("/responses")
    async def responses(request: Request) -> Response:
        return await create_response(ctx, stored_responses, request)

    app.include_router(v1)
    return app


def _authorizer(api_key: str | None):
    expected = api_key.encode() if api_key is not None else None

    async def authorize(request: Request) -> None:
        if expected is None:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            raise APIError(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'",
                           code="invalid_api_key")

    return authorize


def _add_error_handlers(app: FastAPI, metrics: ServerMetrics) -> None:
    def respond(status: int, body: dict, headers: dict[str, str] | None = None) -> Response:
        metrics.count_error(status)
        return JSONBytesResponse(body, status_code=status, headers=headers)

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else \
            {"Retry-After": "1"} if exc.status == 503 else None
        return respond(exc.status, exc.body(), headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return respond(exc.status_code, APIError(exc.status_code, message).body(), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        return respond(400, error_body(f"invalid request: {exc.errors()[:1]}", "invalid_request_error"))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return respond(500, error_body(f"internal server error ({type(exc).__name__}); see the server log",
                                       "server_error", code="internal_error"))
