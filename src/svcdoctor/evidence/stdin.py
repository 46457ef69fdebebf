"""Standard input among the evidence paths: ``-`` read like any other file."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from svcdoctor.evidence import lines
from svcdoctor.evidence.reader import EvidenceError, read_evidence
from svcdoctor.model import Evidence


def read_with_stdin(
    paths: Sequence[str],
    stdin: BinaryIO | None,
    clock_offsets: dict[str, float] | None = None,
    tz: str | None = None,
) -> Evidence:
    """``read_evidence`` where ``-`` among the paths is ``stdin``: written to a temporary
    file (readers detect formats by content and may read twice), removed afterwards, and
    named ``-`` in what the evidence reports, as the user gave it. A paste with nothing
    readable is answered in one line: what its lines looked like and what to collect."""
    if "-" not in paths:
        return read_evidence(paths, clock_offsets, tz=tz)
    with tempfile.TemporaryDirectory(prefix="svcdoctor-stdin-") as folder:
        target = Path(folder) / "-"  # notes that name the file by its name say "-" too
        with target.open("wb") as out:
            if stdin is not None:
                shutil.copyfileobj(stdin, out)
        given = [str(target) if p == "-" else p for p in paths]
        try:
            found = read_evidence(given, clock_offsets, tz=tz)
        except EvidenceError as exc:
            raise _unreadable(exc, target, len(paths) == 1) from None
    return _named_stdin(found, str(target))


def _unreadable(exc: EvidenceError, target: Path, alone: bool) -> EvidenceError:
    """The reader's error with stdin's line shapes counted (see ``lines.describe``)."""
    text = target.read_text(encoding="utf-8-sig", errors="replace")
    frame = lines.classify(lines.split(text))
    counts = {str(k): int(v) for k, v in frame.group_by("shape").len().iter_rows()}
    said = lines.describe(counts)
    if alone:
        return EvidenceError(f"nothing readable on stdin: {said}")
    return EvidenceError(f"{str(exc).replace(str(target), '-')}; stdin: {said}")


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
