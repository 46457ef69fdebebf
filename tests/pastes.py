"""The paste corpus (``benchmarks/paste_corpus``): log lines people posted in public issue
threads and docs, each with the cause the thread established (``index.json``, every entry
citing its source). ``run_all`` diagnoses each paste as ``diagnose FILE`` would and scores
it: ``right`` (the strongest cause is the confirmed one, alone), ``open`` (it ties with
another cause), ``wrong`` (another cause is stronger, or any cause where the truth is none),
``no cause`` (nothing named), ``unread`` (no reader knew the lines)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "benchmarks" / "paste_corpus"
SCORES = ("right", "open", "wrong", "no cause", "unread")


@dataclass(frozen=True)
class Paste:
    file: str
    cause: str  # race | backend | reuse | infra | none
    source: str
    confirmed: str
    thread_confirmed: bool = True


@dataclass(frozen=True)
class Scored:
    paste: Paste
    score: str
    said: tuple[str, ...]  # the strongest causes (ties), empty when none was named
    top: float | None

    def line(self) -> str:
        said = "+".join(self.said) or "-"
        return f"{self.paste.file:<52} truth {self.paste.cause:<8} said {said:<12} {self.score}"


def pastes() -> list[Paste]:
    index = json.loads((CORPUS / "index.json").read_text())
    return [Paste(**entry) for entry in index["pastes"]]


def run_one(paste: Paste) -> Scored:
    from svcdoctor.diagnose import diagnose
    from svcdoctor.evidence import read_evidence
    from svcdoctor.evidence.reader import EvidenceError

    try:
        d = diagnose(read_evidence([str(CORPUS / paste.file)]))
    except EvidenceError:
        return Scored(paste, "unread", (), None)
    if d.primary is None:
        return Scored(paste, "no cause" if paste.cause != "none" else "right", (), None)
    top = d.primary.score
    tied = tuple(a.cause.value for a in d.causes if a.score == top)
    if paste.cause == "none" or paste.cause not in tied:
        return Scored(paste, "wrong", tied, top)
    return Scored(paste, "right" if len(tied) == 1 else "open", tied, top)


def run_all() -> list[Scored]:
    return [run_one(p) for p in pastes()]


def summary(results: list[Scored]) -> str:
    counts = {s: sum(r.score == s for r in results) for s in SCORES}
    causes = sorted({r.paste.cause for r in results})
    per = ", ".join(
        f"{c} {sum(r.score == 'right' for r in results if r.paste.cause == c)}/"
        f"{sum(r.paste.cause == c for r in results)}"
        for c in causes
    )
    confirmed = [r for r in results if r.paste.thread_confirmed]
    return (
        f"paste corpus: {counts['right']}/{len(results)} right ("
        + ", ".join(f"{counts[s]} {s}" for s in SCORES[1:])
        + f"); per cause: {per}; confirmed in their own thread: "
        f"{sum(r.score == 'right' for r in confirmed)}/{len(confirmed)}"
    )
