"""Standard input among the evidence paths: ``-`` read like any other file."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from svcdoctor.evidence.reader import read_evidence
from svcdoctor.model import Evidence


def read_with_stdin(
    paths: Sequence[str],
    stdin: BinaryIO | None,
    clock_offsets: dict[str, float] | None = None,
    tz: str | None = None,
) -> Evidence:
    """``read_evidence`` where ``-`` among the paths is ``stdin``: written to a temporary
    file (readers detect formats by content and may read twice), removed afterwards, and
    named ``-`` in what the evidence reports, as the user gave it."""
    if "-" not in paths:
        return read_evidence(paths, clock_offsets, tz=tz)
    with tempfile.TemporaryDirectory(prefix="svcdoctor-stdin-") as folder:
        target = Path(folder) / "stdin"
        with target.open("wb") as out:
            if stdin is not None:
                shutil.copyfileobj(stdin, out)
        found = read_evidence([str(target) if p == "-" else p for p in paths], clock_offsets, tz=tz)
    return _named_stdin(found, str(target))


def _named_stdin(found: Evidence, temporary: str) -> Evidence:
    def name(text: str) -> str:
        return text.replace(temporary, "-")

    return replace(
        found,
        sources=tuple(replace(src, path=name(src.path)) for src in found.sources),
        problems=tuple(map(name, found.problems)),
        warnings=tuple(map(name, found.warnings)),
        loads=tuple(replace(x, source=name(x.source)) for x in found.loads),
    )
