"""The OpenAI-compatible HTTP server (`quickmoe serve`): `create_app(llm, ServerConfig(...))` in app.py; the
engine's thread in async_engine.py; see docs/architecture.md, "Server"."""
