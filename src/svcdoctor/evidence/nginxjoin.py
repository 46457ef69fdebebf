"""One nginx bundle read as one log: the error log's times put on UTC, and each error line
that describes a request of the access log joined to that request (refining its outcome
and backend) instead of counted again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from svcdoctor.evidence.times import offset_text, utc_offset
from svcdoctor.model import REQUEST_COLUMNS

_JOIN_SLACK = 1.0  # seconds either side of a request an error line may fall (1 s clocks)


@dataclass(slots=True)
class Part:
    """Request rows that one file gave in one shape."""

    path: str
    fmt: str
    frame: pl.DataFrame
    note: str = ""
    offset: str | None = None  # nginx-access: the UTC offset its times carry (``+0200``)
    read: int = 0  # lines read as rows (error logs: before the join)
    span: tuple[float | None, float | None] | None = None  # error logs: before the join


def nginx_bundle(parts: list[Part], zone: float | None) -> None:
    """The nginx error log's times put on UTC (``--tz``, else the zone of the bundle's
    access log, else its collector's timestamps, else UTC: the note says which), then
    each error line that describes a request of the access log joined to that request
    instead of counted again."""
    access = [p for p in parts if p.fmt == "nginx-access"]
    errors = [p for p in parts if p.fmt == "nginx-error"]
    if not errors:
        return
    offsets = [p.offset for p in access if p.offset]
    common = max(set(offsets), key=offsets.count) if offsets else None
    for part in errors:
        frame = part.frame
        if zone is not None:
            shift, why = zone, f"read as UTC{offset_text(zone)} (--tz)"
        elif common is not None and utc_offset(common) is not None:
            shift = utc_offset(common) or 0.0
            names = sorted({Path(p.path).name for p in access if p.offset == common})
            why = f"read as UTC{offset_text(shift)}, the zone of the access log {', '.join(names)}"
        elif (derived := _zone_from_stamps(frame)) is not None:
            shift, why = derived, f"read as UTC{offset_text(derived)}, from the log's timestamps"
        else:
            shift, why = 0.0, "read as UTC: no access log gives the zone (pass --tz)"
        if shift:
            frame = frame.with_columns(pl.col("ts") - shift)
        part.frame = frame.drop("__pts")
        start, end = part.frame.get_column("ts").min(), part.frame.get_column("ts").max()
        part.span = (
            start if isinstance(start, float) else None,
            end if isinstance(end, float) else None,
        )
        part.note = join_note(part.note, f"times carry no UTC offset: {why}")
    if not access:
        for part in access + errors:
            part.frame = part.frame.drop("__end", strict=False)
        return
    _join(access, errors)
    _name_upstreams(access, errors)
    for part in access:
        part.frame = part.frame.drop("__end")


def _name_upstreams(access: list[Part], errors: list[Part]) -> None:
    """Error-log rows kept on their own get the Service (``upstream``) the access log routes
    their backend address to: the error log names only the address."""
    known = (
        pl.concat([p.frame.select("backend", "upstream") for p in access])
        .drop_nulls()
        .with_columns(pl.col("backend").cast(pl.Utf8), pl.col("upstream").cast(pl.Utf8))
        .group_by("backend", "upstream")
        .len()
        .sort("len", descending=True)
        .unique("backend", keep="first")
        .select("backend", pl.col("upstream").alias("__u"))
    )
    if not known.height:
        return
    for part in errors:
        if not part.frame.height:
            continue
        frame = part.frame.with_columns(pl.col("backend").cast(pl.Utf8).alias("__bk"))
        frame = frame.join(known, left_on="__bk", right_on="backend", how="left")
        part.frame = frame.with_columns(
            pl.coalesce(pl.col("upstream"), pl.col("__u").cast(pl.Categorical)).alias("upstream")
        ).select(REQUEST_COLUMNS)


def _zone_from_stamps(frame: pl.DataFrame) -> float | None:
    """The zone of nginx's local times from the collector's UTC stamps on the same lines
    (``kubectl logs --timestamps``, CRI), to the quarter hour."""
    lag = frame.select((pl.col("ts") - pl.col("__pts")).median()).item()
    if lag is None:
        return None
    return float(round(lag / 900.0) * 900.0)


def join_note(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _join(access: list[Part], errors: list[Part]) -> None:
    """Error lines that describe a request in the access log (same upstream address, same
    client, error time within [start - 1 s, end + 1 s]) refine that row (outcome from the
    errno, ``detail``) instead of becoming a row: each failure is counted once. Masked
    (retried) attempts match too. Failed rows are matched first, each row at most once."""
    rows = pl.concat(
        [p.frame.with_columns(pl.lit(i).alias("__part")) for i, p in enumerate(access)]
    ).with_row_index("__aid")
    errs = pl.concat(
        [p.frame.with_columns(pl.lit(i).alias("__epart")) for i, p in enumerate(errors)]
    ).with_row_index("__eid")
    keys = [
        pl.col("client").cast(pl.Utf8).alias("__c"),
        pl.col("backend").cast(pl.Utf8).alias("__b"),
    ]
    # nginx's "combined"/"main" lines name no backend: they match an error line by client
    # and time alone ("*"), and take the backend the error line names
    cand = rows.filter((pl.col("outcome") != "aborted") & pl.col("client").is_not_null()).select(
        "__aid",
        keys[0],
        pl.coalesce(keys[1], pl.lit("*")).alias("__b"),
        pl.col("ts").alias("__start"),
        pl.col("__end"),
        pl.col("outcome").is_in(["ok"]).not_().alias("__failed"),
    )
    left = errs.filter(pl.col("client").is_not_null() & pl.col("backend").is_not_null()).select(
        "__eid", *keys, (pl.col("ts") + _JOIN_SLACK).alias("__key"), pl.col("ts").alias("__ets")
    )
    left = pl.concat([left, left.with_columns(pl.lit("*").alias("__b"))])
    # only the requests of the (client, backend) pairs that error lines name, by start
    cand = cand.join(left.select("__c", "__b").unique(), on=["__c", "__b"], how="semi").sort(
        "__start"
    )
    left = left.sort("__key")
    matched: list[pl.DataFrame] = []
    for failed in (True, False):
        pool = cand.filter(pl.col("__failed") == failed)
        for _ in range(4):  # a request per round for errors that matched the same row
            if not left.height or not pool.height:
                break
            pairs = (
                left.join_asof(
                    pool,
                    left_on="__key",
                    right_on="__start",
                    by=["__c", "__b"],
                    strategy="backward",
                    check_sortedness=False,
                )
                .filter(
                    pl.col("__aid").is_not_null()
                    & (pl.col("__ets") <= pl.coalesce("__end", "__start") + _JOIN_SLACK)
                )
                .sort("__ets")
                .unique("__aid", keep="first", maintain_order=True)
                .unique("__eid", keep="first", maintain_order=True)
                .select("__eid", "__aid")
            )
            if not pairs.height:
                break
            matched.append(pairs)
            left = left.filter(~pl.col("__eid").is_in(pairs.get_column("__eid").implode()))
            pool = pool.filter(~pl.col("__aid").is_in(pairs.get_column("__aid").implode()))
    if not matched:
        for part in errors:
            part.note = join_note(part.note, "no line matches a request of the access log")
        return
    pairs = pl.concat(matched)
    refine = pairs.join(
        errs.select("__eid", *(pl.col(c).alias(f"__e{c[0]}") for c in ("outcome", "detail"))),
        on="__eid",
    )
    refine = refine.join(errs.select("__eid", pl.col("backend").alias("__eb")), on="__eid")
    rows = rows.join(refine.select("__aid", "__eo", "__ed", "__eb"), on="__aid", how="left")
    rows = rows.with_columns(
        pl.when(pl.col("__eo").is_not_null() & (pl.col("__eo") != "error"))
        .then(pl.col("__eo"))
        .otherwise(pl.col("outcome"))
        .alias("outcome"),
        pl.coalesce(pl.col("__ed"), pl.col("detail")).alias("detail"),
        pl.coalesce(pl.col("backend"), pl.col("__eb")).alias("backend"),
    )
    for i, part in enumerate(access):
        part.frame = (
            rows.filter(pl.col("__part") == i).sort("__aid").select([*REQUEST_COLUMNS, "__end"])
        )
    joined_ids = pairs.get_column("__eid").implode()
    for i, part in enumerate(errors):
        mine = errs.filter(pl.col("__epart") == i)
        joined = mine.filter(pl.col("__eid").is_in(joined_ids)).height
        part.frame = mine.filter(~pl.col("__eid").is_in(joined_ids)).select(REQUEST_COLUMNS)
        kept = part.frame.height
        part.note = join_note(
            part.note,
            f"{joined} of {joined + kept} failure lines describe requests of the access log: "
            f"counted once, there; {kept} kept as error-log rows",
        )


# ---------------------------------------------------------------- assembly
