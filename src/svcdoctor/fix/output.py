"""What ``svcdoctor fix`` writes: a file replaced atomically, or a unified diff of it."""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile


def labels(name: str) -> tuple[str, str]:
    """The diff's file labels: ``a/PATH`` and ``b/PATH`` for a path below the working
    directory (what ``git apply`` and ``patch -p1`` take), the path itself for one
    elsewhere (``patch -p0``)."""
    shown = os.path.normpath(name).replace(os.sep, "/")
    if os.path.isabs(shown) or shown == ".." or shown.startswith("../"):
        return shown, shown
    return f"a/{shown}", f"b/{shown}"


def diff_text(name: str, before: bytes, after: bytes, shown: str | None = None) -> str:
    """The unified diff of file ``name`` (labelled ``shown`` when given, as for standard
    input), a missing final newline marked as ``diff`` marks it."""
    old, new = (shown, shown) if shown is not None else labels(name)
    diff = difflib.unified_diff(
        before.decode("utf-8-sig").splitlines(keepends=True),
        after.decode("utf-8-sig").splitlines(keepends=True),
        fromfile=old,
        tofile=new,
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff
    )


def replace_file(name: str, data: bytes) -> None:
    """Write atomically, keeping the file's mode."""
    folder = os.path.dirname(os.path.abspath(name))
    fd, tmp = tempfile.mkstemp(prefix=".svcdoctor-fix-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        shutil.copymode(name, tmp)
        os.replace(tmp, name)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = ["diff_text", "labels", "replace_file"]
