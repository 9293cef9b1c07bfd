"""User-facing errors: the CLI prints these as one line, without a traceback."""


class UserError(Exception):
    """Bad input from the user (a flag, a path, a data layout, a file on disk)."""
