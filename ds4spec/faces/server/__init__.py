"""``ds4spec serve --stdio``: the editor protocol (JSON-RPC 2.0 framed like LSP) over stdin and stdout.

Layers, one module each: ``framing`` (Content-Length frames, size limit), ``rpc`` (JSON-RPC messages and
errors), ``params`` (each method's parameters, checked), ``stopping`` (ending an option at a line or block),
``service`` (the methods over one ``Engine`` and its generation worker) and ``stdio`` (the command, the
read loop and the guard that keeps stdout for protocol bytes only). ``docs/protocol.md`` is the contract.
"""

PROTOCOL_VERSION = "1.0"
