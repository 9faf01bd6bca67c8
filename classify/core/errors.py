"""The one base class of every error a user can cause (a bad file, an unknown option, an
unreachable server). The command line prints these as one line and exits 2; anything else is a
bug and keeps its traceback."""

from __future__ import annotations


class ClassifyError(Exception):
    """An error whose message tells the user what to fix (file and line, key and allowed keys)."""


class UsageError(ClassifyError, ValueError):
    """A bad argument to a library function (an unknown task, folds < 2, a malformed fraction list)."""
