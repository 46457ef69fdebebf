"""Output paths the commands write, checked when the options are parsed (before any work):
the directory exists and takes new files, the name has the extension the format needs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # click >= 8.2 types ParamType by its value and input
    ParamBase = click.ParamType[Any, Any]
else:
    ParamBase = click.ParamType


def _writable_dir(folder: Path) -> str | None:
    """Why files cannot be created in ``folder`` (None: they can), found by creating (and
    removing) one: permission bits do not tell root, /proc or a read-only mount."""
    if not folder.exists():
        return f"directory {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a directory"
    try:
        fd, name = tempfile.mkstemp(prefix=".svcdoctor-write-test-", dir=folder)
    except OSError as exc:
        return f"cannot create files in {folder} ({exc.strerror or exc})"
    os.close(fd)
    os.unlink(name)
    return None


class OutputFile(ParamBase):
    """A file the command will write: its directory must exist and be writable, it must not
    be a directory, and its extension must be one of ``suffixes`` (when given). Checked when
    the options are parsed, before any work."""

    name = "file"

    def __init__(self, suffixes: Sequence[str] = (), what: str = "") -> None:
        self.suffixes = tuple(s.lower() for s in suffixes)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = _given_path(self, value, param, ctx)
        if self.suffixes and path.suffix.lower() not in self.suffixes:
            kinds = " or ".join(dict.fromkeys(s.lstrip(".").upper() for s in self.suffixes))
            self.fail(
                f"{str(value)!r}: {self.what or 'the file'} is written as {kinds}: give a "
                f"name ending in {' or '.join(self.suffixes)}",
                param,
                ctx,
            )
        if path.is_dir():
            self.fail(f"{str(value)!r} is a directory; give a file name", param, ctx)
        problem = _writable_dir(path.parent if str(path.parent) else Path("."))
        if problem is None and path.exists():
            try:
                with path.open("ab"):
                    pass
            except OSError as exc:
                problem = exc.strerror or str(exc)
        if problem:
            self.fail(f"cannot write {str(value)!r}: {problem}", param, ctx)
        return path

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "FILE"


def _given_path(
    ptype: ParamBase, value: Any, param: click.Parameter | None, ctx: click.Context | None
) -> Path:
    """The path the user gave (an empty one is an error)."""
    if isinstance(value, Path):
        return value
    if not str(value).strip():
        ptype.fail("an empty path", param, ctx)
    return Path(str(value))


class OutputDir(ParamBase):
    """A directory the command will create or fill: it must be a directory if it exists,
    and it (or the nearest existing parent) must be writable. Checked before any work."""

    name = "directory"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = _given_path(self, value, param, ctx)
        if path.exists() and not path.is_dir():
            self.fail(f"{str(value)!r} exists and is not a directory", param, ctx)
        existing = next((d for d in (path, *path.absolute().parents) if d.exists()), Path("/"))
        problem = _writable_dir(existing)
        if problem:
            self.fail(f"cannot write {str(value)!r}: {problem}", param, ctx)
        return path

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "DIR"


__all__ = ["OutputDir", "OutputFile", "ParamBase"]
