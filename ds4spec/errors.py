"""Errors a user sees as one line on stderr, each with the exit code the CLI returns for it."""

from __future__ import annotations


class Ds4Error(Exception):
    """Base error: its message is printed as one line, prefixed with ``ds4spec: error:``."""

    exit_code = 1


class UsageError(Ds4Error):
    """The command line or the input is wrong: the user can fix it by changing what they pass."""

    exit_code = 2


class InputError(UsageError):
    """The text on stdin (or in an editor message) cannot be used as it is."""


class ContextOverflow(InputError):
    """The prompt does not fit the context window (a server answers it as ``context_length_exceeded``)."""


class ModelError(Ds4Error):
    """A model is missing, corrupt, or fails to load."""


class UnknownModelError(UsageError):
    """A name that is neither a known model nor a path to a file."""
