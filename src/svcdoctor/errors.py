"""The one base class of svcdoctor's known errors.

A known error is a problem with what the user asked for or gave (an option, a file, the
machine): the command line prints its message as one line and exits with ``exit_code``
(2: usage or input; 1 where a command documents it, e.g. a lab run that is invalid). Any
other exception is a bug: one line, "run with --debug for the traceback", exit 1.
"""

from __future__ import annotations


class SvcdoctorError(Exception):
    """A known problem, phrased for a one-line message."""

    exit_code: int = 2


class CommandError(SvcdoctorError):
    """A problem a command found itself, with the exit code it documents."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


__all__ = ["CommandError", "SvcdoctorError"]
