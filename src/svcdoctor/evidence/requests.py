"""The canonical request log (CSV, JSON Lines, Parquet) and the shared request frame."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from svcdoctor.model import REQUEST_COLUMNS, Outcome

SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Float64(),
    "outcome": pl.Utf8(),
    "status": pl.Int64(),
    "latency_ms": pl.Float64(),
    "client": pl.Utf8(),
    "backend": pl.Utf8(),
    "conn": pl.Utf8(),
    "node": pl.Utf8(),
    "role": pl.Utf8(),
    "source": pl.Utf8(),
}
OUTCOMES = [o.value for o in Outcome]
OPTIONAL = ("status", "latency_ms", "client", "backend", "conn", "node")


class RequestLogError(ValueError):
    """A request log that cannot be used, phrased for the user."""


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def conform(frame: pl.LazyFrame, source: str) -> pl.LazyFrame:
    """Add missing optional columns as nulls and cast every column to ``SCHEMA``."""
    names = frame.collect_schema().names()
    extra = [pl.lit(None, dtype=SCHEMA[c]).alias(c) for c in REQUEST_COLUMNS if c not in names]
    frame = frame.with_columns(extra) if extra else frame
    if "role" not in names:
        frame = frame.with_columns(pl.lit("request").alias("role"))
    return frame.with_columns(pl.lit(source).alias("source")).select(
        [pl.col(c).cast(SCHEMA[c], strict=False) for c in REQUEST_COLUMNS]
    )


def _timestamps(frame: pl.LazyFrame, dtype: pl.DataType) -> pl.LazyFrame:
    if dtype.is_numeric():
        return frame.with_columns(pl.col("ts").cast(pl.Float64))
    text = pl.col("ts").cast(pl.Utf8).str.strip_chars()
    as_number = text.cast(pl.Float64, strict=False)
    as_time = (
        text.str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
        .dt.epoch("us")
        .cast(pl.Float64)
        / 1e6
    )
    return frame.with_columns(pl.coalesce(as_number, as_time).alias("ts"))


def scan_canonical(path: Path, fmt: str) -> pl.LazyFrame:
    """A lazy frame over a canonical request log (``csv``, ``jsonl`` or ``parquet``)."""
    if fmt == "csv":
        frame = pl.scan_csv(path, infer_schema=False)  # every column as text: no guessing
    elif fmt == "jsonl":
        frame = pl.scan_ndjson(path, infer_schema_length=1000)
    else:
        frame = pl.scan_parquet(path)
    schema = frame.collect_schema()
    missing = [c for c in ("ts", "outcome") if c not in schema]
    if missing:
        raise RequestLogError(f"missing required column(s) {', '.join(missing)}")
    if not schema["ts"].is_numeric():
        frame = frame.with_columns(pl.col("ts").cast(pl.Utf8).alias("__ts_raw"))
    frame = _timestamps(frame, schema["ts"])
    for column in ("status",):
        if column in schema and not schema[column].is_numeric():
            frame = frame.with_columns(pl.col(column).cast(pl.Float64, strict=False))
    return frame.with_columns(pl.col("outcome").cast(pl.Utf8).str.strip_chars().str.to_lowercase())


def read_canonical(path: Path, fmt: str, source: str) -> tuple[pl.DataFrame, list[str]]:
    """Rows with a valid ts and outcome, and one message per kind of rejected row."""
    frame = scan_canonical(path, fmt).with_row_index("__row", offset=2 if fmt == "csv" else 1)
    frame = frame.with_columns(
        (pl.col("ts").is_null() | ~pl.col("ts").is_finite()).alias("__bad_ts"),
        (~pl.col("outcome").is_in(OUTCOMES)).alias("__bad_outcome"),
    )
    data = frame.collect()
    problems = []
    for flag, what in (
        ("__bad_ts", "ts is not RFC 3339 or Unix seconds"),
        ("__bad_outcome", f"outcome is not one of {', '.join(OUTCOMES)}"),
    ):
        bad = data.filter(pl.col(flag))
        if bad.height:
            first = bad.row(0, named=True)
            unit = "line" if fmt != "parquet" else "row"
            value = first.get("__ts_raw") if flag == "__bad_ts" else first["outcome"]
            problems.append(
                f"{bad.height} rows skipped: {what} (first at {unit} {first['__row']}: {value!r})"
            )
    good = data.filter(~pl.col("__bad_ts") & ~pl.col("__bad_outcome"))
    return conform(good.lazy(), source).collect(), problems
