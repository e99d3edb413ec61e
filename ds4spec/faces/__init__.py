"""The faces: thin front ends over the engine's event stream. ``chat`` (Textual), ``repl`` (prompt-toolkit),
``complete``, ``server`` (the editor protocol), ``models``, ``doctor``; ``shared`` holds what the chat and the REPL
share (the conversation, slash commands, sessions)."""
