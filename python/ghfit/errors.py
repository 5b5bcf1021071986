"""Exceptions of the report command, shared by its parts."""


class ReportError(Exception):
    """Bad input: one line, exit 2."""
