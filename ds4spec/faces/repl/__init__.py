"""``ds4spec repl``: a prompt-toolkit REPL (``command``), its input (``input``) and the streamed
rendering of answers (``render``)."""
