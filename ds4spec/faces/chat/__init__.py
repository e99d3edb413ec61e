"""``ds4spec chat``: a Textual chat with the target, streaming markdown, provenance colours and sessions on disk.

Modules: ``app`` (the application: loading, generating, commands), ``widgets`` (the input and the messages),
``status`` (the status bar), ``provenance`` (who wrote which text), ``screens`` (the session list),
``loader`` (pulling missing models and loading them), ``loading_panel`` (its progress on screen),
``command`` (the ``chat`` subcommand).
"""
