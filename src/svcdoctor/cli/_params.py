"""The command line's parameter types: every number, duration, share, count, distribution
and output path of every command goes through one of these (and the config file's numbers
too, through :func:`config_value`), so that NaN, infinities and out-of-range values are
refused with one line and exit 2 before any work starts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from svcdoctor.cli._paths import OutputDir, OutputFile, ParamBase
from svcdoctor.model import duration
from svcdoctor.model.dist import DistError, parse_dist

F = TypeVar("F", bound=Callable[..., Any])


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) and abs(x) < 1e16 else f"{x:g}"


class Number(ParamBase):
    """A finite number within ``[low, high]`` (``low_open``/``high_open``: excluded);
    ``integer``: a whole number. NaN and infinities are refused whatever the range."""

    name = "number"

    def __init__(
        self,
        low: float | None = None,
        high: float | None = None,
        *,
        low_open: bool = False,
        high_open: bool = False,
        integer: bool = False,
        unit: str = "",
    ) -> None:
        self.low, self.high = low, high
        self.low_open, self.high_open = low_open, high_open
        self.integer = integer
        self.unit = unit

    # the text → number step; subclasses read durations and percentages
    def parse(self, text: str) -> float:
        return float(text)

    def what(self) -> str:
        return "a whole number" if self.integer else "a number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not {self.what()}", param, ctx)
        if isinstance(value, int | float):
            number = float(value)
        else:
            text = str(value).strip()
            try:
                number = self.parse(text)
            except (ValueError, OverflowError):
                self.fail(f"{value!r} is not {self.what()}", param, ctx)
        bounds = self.range_text()
        if not math.isfinite(number):
            self.fail(
                f"{value!r} is not a finite number" + (f" (give one {bounds})" if bounds else ""),
                param,
                ctx,
            )
        if self.integer and number != int(number):
            self.fail(f"{value!r} is not a whole number", param, ctx)
        if not self.within(number):
            self.fail(f"{value!r} is out of range: give a value {bounds}", param, ctx)
        return int(number) if self.integer else number

    def within(self, x: float) -> bool:
        if self.low is not None and (x < self.low or (self.low_open and x == self.low)):
            return False
        if self.high is None:
            return True
        return x < self.high or (not self.high_open and x == self.high)

    def range_text(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        low = None if self.low is None else f"{_fmt(self.low)}{unit}"
        high = None if self.high is None else f"{_fmt(self.high)}{unit}"
        lower = None if low is None else (f"more than {low}" if self.low_open else f"≥ {low}")
        upper = None if high is None else (f"below {high}" if self.high_open else f"≤ {high}")
        return " and ".join(b for b in (lower, upper) if b)

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "INTEGER" if self.integer else "NUMBER"

    def __repr__(self) -> str:
        return f"Number({self.low}, {self.high})"


class Duration(Number):
    """Seconds: ``90``, ``2.5``, ``90s``, ``2m``, ``1h30m``, ``500ms`` (kubectl's style)."""

    name = "duration"
    units: tuple[str, ...] = duration.CLI  # the units taken (a subclass takes others)

    def __init__(self, low: float | None = 0, high: float | None = None, **kw: Any) -> None:
        super().__init__(low, high, unit="s", **kw)

    def parse(self, text: str) -> float:
        return duration.parse_duration(text, self.units)

    def what(self) -> str:
        return "a duration (seconds, or 90s, 2m, 1h, 500ms)"

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "DURATION"


class Share(Number):
    """A share between 0 and 1, also written as a percentage (``0.5`` or ``50%``)."""

    name = "share"

    def __init__(self, low: float = 0.0, high: float = 1.0, **kw: Any) -> None:
        super().__init__(low, high, **kw)

    def parse(self, text: str) -> float:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)

    def what(self) -> str:
        return "a share (0.25 or 25%)"

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "SHARE"


class IntOrPercent(ParamBase):
    """A Deployment's ``maxSurge``/``maxUnavailable``: a whole number (up to ``high``) or a
    percentage of the replicas (0-100 %); the value is kept as text (``"3"``, ``"25%"``):
    :func:`resolve_count` turns it into pods."""

    name = "int-or-percent"

    def __init__(self, high: int = 10_000) -> None:
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value).strip()
        digits = text[:-1] if text.endswith("%") else text
        if not digits.isascii() or not digits.isdigit():
            self.fail(f"{value!r}: give a whole number or a percentage such as 25%", param, ctx)
        limit = 100 if text.endswith("%") else self.high
        if int(digits) > limit:
            self.fail(f"{value!r} is more than {limit}{'%' * text.endswith('%')}", param, ctx)
        return f"{int(digits)}{'%' * text.endswith('%')}"

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "N|N%"


def resolve_count(value: str, replicas: int, round_up: bool) -> int:
    """Pods of an :class:`IntOrPercent` value: a percentage of ``replicas``, rounded up for
    maxSurge and down for maxUnavailable, as the Deployment controller does."""
    if value.endswith("%"):
        share = int(value[:-1]) / 100 * replicas
        return math.ceil(share - 1e-9) if round_up else math.floor(share + 1e-9)
    return int(value)


class Distribution(ParamBase):
    """A delay distribution (``svcdoctor.model.dist``) whose largest value is at most
    ``high`` seconds; ``lows_highs``: ``LOW:HIGH`` also means uniform (the lab's)."""

    name = "dist"

    def __init__(self, high: float = 3600.0, *, low_high: bool = False, what: str = "") -> None:
        self.high = high
        self.low_high = low_high
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        text = value
        low, sep, high = value.partition(":")
        if self.low_high and sep:
            try:
                float(low)
                text = f"uniform:{low},{high}"
            except ValueError:
                pass
        try:
            dist = parse_dist(text)
        except DistError as exc:
            self.fail(str(exc), param, ctx)
        if not math.isfinite(dist.high) or dist.high > self.high:
            where = f" {self.what}" if self.what else ""
            self.fail(
                f"{value!r} reaches {dist.high:.3g} s;{where} at most {_fmt(self.high)} s",
                param,
                ctx,
            )
        return dist

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "DIST"


class Option(click.Option):
    """A click option with hidden aliases (old spellings kept working, shown nowhere) and
    ``default_text`` for defaults computed elsewhere (the scenario's, the model's)."""

    def __init__(
        self,
        param_decls: Sequence[str],
        *,
        aliases: Sequence[str] = (),
        default_text: str | Callable[[], str] | None = None,
        **attrs: Any,
    ) -> None:
        self.aliases = tuple(aliases)
        self.default_text = default_text
        super().__init__([*param_decls, *aliases], **attrs)

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        opts, secondary = self.opts, self.secondary_opts
        self.opts = [o for o in opts if o not in self.aliases]
        self.secondary_opts = [o for o in secondary if o not in self.aliases]
        try:
            record = super().get_help_record(ctx)
        finally:
            self.opts, self.secondary_opts = opts, secondary
        if record is None or self.default_text is None:
            return record
        text = self.default_text() if callable(self.default_text) else self.default_text
        return record[0], f"{record[1]}  [default: {text}]".strip()


def option(*decls: str, **attrs: Any) -> Callable[[F], F]:
    """``click.option`` with :class:`Option` (``aliases=``, ``default_text=``); a default
    given here is shown in the help."""
    attrs.setdefault("cls", Option)
    if attrs.get("default") is not None and not attrs.get("is_flag"):
        attrs.setdefault("show_default", True)
    return click.option(*decls, **attrs)


def filename_option(what: str) -> Callable[[F], F]:
    """``-f/--filename PATH`` as kubectl takes it, repeatable; the command receives the
    paths as ``filenames``."""
    return option(
        "-f",
        "--filename",
        "filenames",
        multiple=True,
        metavar="PATH",
        help=f"{what}, as kubectl apply -f takes it; repeatable.",
        default_text="none",
    )


def output_option(formats: Sequence[str], default: str = "text") -> Callable[[F], F]:
    """``-o/--output FORMAT`` as kubectl spells it (``--format`` kept as a hidden alias);
    the command receives it as ``fmt``."""
    return option(
        "-o",
        "--output",
        "fmt",
        aliases=("--format",),
        type=click.Choice(formats),
        default=default,
        help="Output format.",
    )


def config_value(ptype: ParamBase, value: Any, where: str) -> Any:
    """A config file's value through the same type as its flag; raises ValueError with a
    one-line message naming ``where``."""
    try:
        return ptype.convert(value, None, None)
    except click.BadParameter as exc:
        raise ValueError(f"{where}: {exc.message}") from None


__all__ = [
    "Distribution",
    "Duration",
    "IntOrPercent",
    "Number",
    "Option",
    "OutputDir",
    "OutputFile",
    "ParamBase",
    "Share",
    "config_value",
    "option",
    "output_option",
    "resolve_count",
]
