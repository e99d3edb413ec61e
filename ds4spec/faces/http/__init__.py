"""``ds4spec serve --http``: the OpenAI-compatible HTTP API (what llama-server, ollama and vLLM serve) over one engine.

Modules by role: ``command`` (the flags, the address, uvicorn and the signals), ``app`` (the Starlette routes,
keys and body limit), ``openai_params`` (an OpenAI request body, checked, into the shared generation params),
``scheduler`` (the engine's worker thread and the bounded FIFO queue), ``jobs`` (one request's cancel flag and
its channel from the worker to the event loop), ``replies`` (OpenAI's response and chunk objects),
``streaming`` (server-sent events and client disconnects) and ``errors`` (OpenAI's error object).
``docs/http.md`` is the contract.
"""
