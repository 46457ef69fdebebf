"""``worst_clients`` (reuse's client concentration) is ordered by failures, then by the
client's name: clients with as many failures come out in one order, whatever the order of
the rows (issue 29 follow-up; it was the group-by's order)."""

from __future__ import annotations

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import build
from svcdoctor.diagnose.reuse import client_concentration
from svcdoctor.evidence.requests import conform
from svcdoctor.model import Evidence


def _frame(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    clients = [f"client-{c}" for c in "edcba"]
    rows = [(float(i), "ok", clients[i % 5]) for i in range(500)]
    # d, c and b fail 3 times each, e once, a never
    rows += [(600.0 + i, "reset", c) for i, c in enumerate(["d", "c", "b"] * 3 + ["e"])]
    order = rng.permutation(len(rows))
    ts, outcome, client = zip(*(rows[i] for i in order), strict=True)
    raw = pl.DataFrame({"ts": ts, "outcome": outcome, "client": client})
    raw = raw.with_columns(pl.col("client").str.replace(r"^(\w)$", "client-$1"))
    return conform(raw.lazy(), "test").collect()


def test_ties_are_ordered_by_client_name_whatever_the_row_order() -> None:
    seen = set()
    for seed in range(5):
        conc = client_concentration(build(Evidence(requests=_frame(seed))))
        assert conc is not None
        seen.add(tuple(c.client for c in conc.worst_clients))
    assert seen == {("client-b", "client-c", "client-d", "client-e", "client-a")}
