"""The canonical request log (CSV, JSON Lines, Parquet) and the shared request frame."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from svcdoctor.errors import SvcdoctorError
from svcdoctor.model import REQUEST_COLUMNS, ROLES, Outcome

OUTCOMES = [o.value for o in Outcome]
# Low-cardinality text is categorical (4 bytes a row, not ~30): ten million rows must fit.
SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Float64(),
    "outcome": pl.Enum(OUTCOMES),
    "status": pl.Int64(),
    "latency_ms": pl.Float64(),
    "client": pl.Categorical(),
    "backend": pl.Categorical(),
    "conn": pl.Utf8(),
    "node": pl.Categorical(),
    "upstream": pl.Categorical(),
    "detail": pl.Categorical(),
    "role": pl.Enum(list(ROLES)),
    "source": pl.Categorical(),
}
OPTIONAL = ("status", "latency_ms", "client", "backend", "conn", "node", "upstream", "detail")


class RequestLogError(SvcdoctorError, ValueError):
    """A request log that cannot be used, phrased for the user."""


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def conform(frame: pl.LazyFrame, source: str, keep: tuple[str, ...] = ()) -> pl.LazyFrame:
    """Add missing optional columns as nulls and cast every column to ``SCHEMA`` (``keep``:
    extra columns to carry along)."""
    names = frame.collect_schema().names()
    extra = [pl.lit(None, dtype=SCHEMA[c]).alias(c) for c in REQUEST_COLUMNS if c not in names]
    frame = frame.with_columns(extra) if extra else frame
    if "role" not in names:
        frame = frame.with_columns(pl.lit("request").alias("role"))
    return frame.with_columns(pl.lit(source).alias("source")).select(
        [pl.col(c).cast(SCHEMA[c], strict=False) for c in REQUEST_COLUMNS]
        + [pl.col(k) for k in keep]
    )


def epoch_seconds(number: pl.Expr) -> pl.Expr:
    """Unix time in seconds from seconds, milliseconds, microseconds or nanoseconds, told
    apart by magnitude (now is ~1.8e9 s; 1e11 s would be the year 5138)."""
    return (
        pl.when(number.abs() >= 1e17)
        .then(number / 1e9)
        .when(number.abs() >= 1e14)
        .then(number / 1e6)
        .when(number.abs() >= 1e11)
        .then(number / 1e3)
        .otherwise(number)
    )


def epoch_micros(text: pl.Expr, fmt: str | None = None) -> pl.Expr:
    """Time text → Unix microseconds (null where it does not parse): ``fmt`` a strptime
    format, else RFC 3339 / ISO 8601."""
    return text.str.to_datetime(fmt, time_unit="us", time_zone="UTC", strict=False).dt.epoch("us")


def text_seconds(text: pl.Expr, fmt: str | None = None) -> pl.Expr:
    """Time text → Unix seconds (Float64; null where it does not parse), as
    :func:`epoch_micros` reads it."""
    return epoch_micros(text, fmt).cast(pl.Float64) / 1e6


def _parse_ts(text: pl.Expr, mode: str) -> pl.Expr:
    as_number = epoch_seconds(text.cast(pl.Float64, strict=False))
    as_time = text_seconds(text.str.strip_chars())
    return {"number": as_number, "time": as_time}.get(mode, pl.coalesce(as_number, as_time))


def _ts_mode(sample: pl.Series) -> str:
    """``number``, ``time`` or ``mixed``, from the first rows: parsing every value both ways
    would double the cost of the biggest column."""
    if sample.dtype.is_numeric():
        return "native"
    numbers = sample.cast(pl.Float64, strict=False).is_not_null().sum()
    return "number" if numbers == sample.len() else "time" if numbers == 0 else "mixed"


def _scan(path: Path, fmt: str, exact: bool = False) -> tuple[pl.LazyFrame, str]:
    """The lazy frame and how its ts reads (``_ts_mode``); ``exact``: a CSV's outcome is
    parsed straight into the enum (an outcome written otherwise fails the collect)."""
    if fmt == "csv":
        sample = pl.read_csv(path, n_rows=1000, infer_schema=False)
        _require(sample.columns)
        mode = _ts_mode(sample.get_column("ts"))
        overrides: dict[str, pl.DataType] = {c: pl.Utf8() for c in sample.columns}
        # typed at parse time: read as text and cast after, they would be parsed twice
        overrides.update(
            {
                c: SCHEMA[c]
                for c in ("client", "backend", "node", "upstream", "status", "latency_ms")
                + (("outcome",) if exact else ())
                if c in sample.columns
            }
        )
        if mode == "number":
            overrides["ts"] = pl.Float64()
            mode = "native"
        frame = pl.scan_csv(
            path, schema_overrides=overrides, infer_schema=False, ignore_errors=True
        )
    elif fmt == "jsonl":
        frame = pl.scan_ndjson(path, infer_schema_length=1000)
        mode = "?"
    else:
        frame = pl.scan_parquet(path)
        mode = "?"
    schema = frame.collect_schema()
    _require(schema.names())
    if mode == "?":
        mode = _ts_mode(frame.select("ts").head(1000).collect().get_column("ts"))
    return frame, mode


def _require(columns: list[str]) -> None:
    missing = [c for c in ("ts", "outcome") if c not in columns]
    if missing:
        raise RequestLogError(f"missing required column(s) {', '.join(missing)}")


_ZONED = r"(?i)(z|[+-]\d\d:?\d\d)$"


def _zoneless(frame: pl.LazyFrame, mode: str, unit: str) -> list[str]:
    """A warning when text timestamps carry no UTC offset: they are read as UTC, which is
    wrong by hours if they are local times (checked on the first thousand rows)."""
    if mode not in ("time", "mixed"):
        return []
    sample = (
        frame.select(pl.col("ts").cast(pl.Utf8).str.strip_chars(), "__row")
        .head(1000)
        .filter(
            pl.col("ts").cast(pl.Float64, strict=False).is_null()
            & ~pl.col("ts").str.contains(_ZONED)
        )
        .collect()
    )
    if sample.height == 0:
        return []
    first, value = sample.row(0)
    return [
        f"ts has no UTC offset (first at {unit} {value}: {first!r}): read as UTC; if these "
        "are local times, pass --clock-offset FILE=SECONDS"
    ]


Read = tuple[pl.DataFrame, list[str], list[str]]


def read_canonical(path: Path, fmt: str, source: str) -> Read:
    """Rows with a valid ts and outcome, one message per kind of rejected row, and the
    warnings about what was assumed (zone-less timestamps).

    A CSV is first read with its outcomes parsed straight into the enum, which spares a
    text column of every row and its cast (a fifth of the read); when an outcome is
    written otherwise (``OK``, empty), it is read again as text and normalised."""
    if fmt == "csv":
        try:
            exact = _read(path, fmt, source, exact=True)
        except pl.exceptions.ComputeError:
            exact = None  # an outcome outside the enum
        if exact is not None:
            return exact
    read = _read(path, fmt, source)
    assert read is not None
    return read


def _read(path: Path, fmt: str, source: str, exact: bool = False) -> Read | None:
    """:func:`read_canonical`; with ``exact``, ``None`` when an outcome is missing."""
    frame, mode = _scan(path, fmt, exact)
    outcome = (
        pl.col("outcome")
        if exact
        else pl.col("outcome").cast(pl.Utf8).cast(SCHEMA["outcome"], strict=False)
    )
    ts = (
        epoch_seconds(pl.col("ts").cast(pl.Float64))
        if mode == "native"
        else _parse_ts(pl.col("ts").cast(pl.Utf8), mode)
    )
    indexed = frame.with_row_index("__row", offset=2 if fmt == "csv" else 1)
    warnings = _zoneless(indexed, mode, "line" if fmt != "parquet" else "row")
    data = conform(
        indexed.with_columns(ts.alias("ts"), outcome.alias("outcome")), source, keep=("__row",)
    ).collect()
    if data.get_column("outcome").null_count():
        if exact:
            return None
        data = _normalise_outcomes(data, indexed)
    bad_ts = pl.col("ts").is_null() | ~pl.col("ts").is_finite()
    bad_outcome = pl.col("outcome").is_null()
    problems = []
    for flag, column, what in (
        (bad_ts, "ts", "ts is not RFC 3339 or Unix time"),
        (bad_outcome, "outcome", f"outcome is not one of {', '.join(OUTCOMES)}"),
    ):
        bad = data.filter(flag).get_column("__row")
        if bad.len():
            first = bad[0]
            raw = indexed.filter(pl.col("__row") == first).select(column).collect()
            value = raw.item() if raw.height else None
            unit = "line" if fmt != "parquet" else "row"
            problems.append(
                f"{bad.len()} rows skipped: {what} (first at {unit} {first}: {value!r})"
            )
    if problems:
        data = data.filter(~bad_ts & ~bad_outcome)
    return data.drop("__row"), problems, warnings


def _normalise_outcomes(data: pl.DataFrame, indexed: pl.LazyFrame) -> pl.DataFrame:
    """Outcomes written differently (``OK``, `` reset``) are normalised, not rejected. Only
    the rows that failed the exact match are read again, so the common case pays nothing."""
    rows = data.filter(pl.col("outcome").is_null()).get_column("__row")
    fixed = (
        indexed.filter(pl.col("__row").is_in(rows.implode()))
        .select(
            "__row",
            pl.col("outcome")
            .cast(pl.Utf8)
            .str.strip_chars()
            .str.to_lowercase()
            .cast(SCHEMA["outcome"], strict=False)
            .alias("fixed"),
        )
        .collect()
    )
    return (
        data.join(fixed, on="__row", how="left", maintain_order="left")
        .with_columns(pl.coalesce("outcome", "fixed").alias("outcome"))
        .drop("fixed")
    )
