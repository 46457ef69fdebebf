"""The one place where errors become exit codes: known errors (``SvcdoctorError``) are one
line and their exit code (2 unless they say otherwise); anything else is a bug: one line,
a hint at ``--debug``, exit 1."""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from svcdoctor.errors import SvcdoctorError


@contextmanager
def extras_needed(what: str, *extras: str) -> Iterator[None]:
    """Imports of an optional extra: a missing module is one line naming the extras to
    install (``what`` needs them), not a traceback."""
    try:
        yield
    except ImportError as exc:  # pragma: no cover - an extra is missing
        names = " and ".join(f"'{e}'" for e in extras)
        raise click.ClickException(
            f"{what} needs the {names} extra{'s' if len(extras) > 1 else ''} ({exc.name} is "
            f"missing): pip install 'svcdoctor[{','.join(extras)}]'"
        ) from None


def say(message: str) -> None:
    click.echo(f"svcdoctor: error: {message}", err=True)


@contextmanager
def handled(debug: Callable[[], bool]) -> Iterator[None]:
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except BrokenPipeError:
        # the reader of our output went away (`| head`): nothing more to say to anyone
        sys.stderr.close()
        sys.exit(1)
    except Exception as exc:
        if debug():
            raise
        if isinstance(exc, SvcdoctorError):
            say(str(exc))
            sys.exit(getattr(exc, "exit_code", 2))
        if isinstance(exc, OSError) and exc.errno in _USER_ERRNOS:
            where = f"{exc.filename}: " if exc.filename else ""
            say(f"{where}{exc.strerror or exc}")
            sys.exit(2)
        first = str(exc).splitlines()[0] if str(exc) else ""
        say(
            f"unexpected {type(exc).__name__}{': ' + first if first else ''} "
            "(a bug: run with --debug for the traceback)"
        )
        sys.exit(1)


# what the machine or the user's paths cause, not svcdoctor: a one-line input error
_USER_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.EACCES,
        errno.EPERM,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.ENOSPC,
        errno.EROFS,
        errno.EEXIST,
        errno.ENAMETOOLONG,
        errno.EDQUOT,
        errno.ELOOP,
    }
)
