"""Errors a user can fix: the CLI prints their message as one line and exits non-zero."""


class UsageError(Exception):
    """Bad input, named by its field, with the fix in the message."""
