"""Bad input never crashes and never reaches the code: a property test over every command.

Every command and subcommand is found through click's own introspection, and so are its
options and arguments. Each example gives one to three of them values drawn from what a
user (or a script with an empty variable) really types: NaN, ±inf, 0, negatives, 1e12,
empty strings, unicode, paths that do not exist, cannot be written or are directories, and
the option's own valid choices. The property: exit code 0, 1 or 2, never a traceback, never
an "unexpected" error, a number that is not finite is always a usage error (exit 2), and
each run ends in bounded time.

The runs are in-process (click's CliRunner) on small bases (``lint --example``, a tiny
cluster for ``simulate``). ``lab run``/``lab demo``/``lab serve`` get a stand-in for the run
itself that checks every number of the scenario it was handed is finite and ends the
command: a real run takes 5-10 s, too long for hundreds of examples; a second property
below runs ``lab run`` for real, on the shortest valid durations, a few times.
``lab clean`` is left out: it takes no parameter, and it would remove what other lab
sessions on this machine left behind.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdoctor.cli import cli
from svcdoctor.cli._params import Distribution, IntOrPercent, Number

WORK = Path(tempfile.mkdtemp(prefix="svcdoctor-fuzz-"))
(WORK / "file.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n")
(WORK / "sub").mkdir()

NOT_FINITE = ("nan", "NaN", "inf", "-inf", "+inf", "Infinity", "1e999")
VALUES = (
    *NOT_FINITE,
    "0",
    "-1",
    "-0",
    "1e12",
    "-1e12",
    "1e308",
    "1e-12",
    "0.5",
    "3",
    "25%",
    "nan%",
    "-5%",
    "10s",
    "1h",
    "",
    " ",
    "ünïcødé ☃",
    "日本語",
    "\u202e",
    "x=nan",
    "a=inf",
    "=",
    "-",
    str(WORK / "nope" / "x.png"),  # a directory that does not exist
    str(WORK / "missing.yaml"),  # a file that does not exist
    "/proc/nope.png",  # cannot be written, even by root
    "/proc/nope/",
    str(WORK),  # a directory
    str(WORK / "sub"),
    str(WORK / "file.yaml"),  # an existing file
    str(WORK / "out.json"),
    str(WORK / "t.jpg"),
)

# fast, valid bases for the commands whose valid runs would otherwise be long
BASES: dict[tuple[str, ...], list[str]] = {
    ("lint",): ["--example"],
    ("diagnose",): ["--example"],
    ("simulate",): [
        *("--nodes", "3", "--replicas", "2", "--duration", "5", "--rate", "20", "--runs", "1"),
    ],
    ("simulate", "recommend"): [
        *("--nodes", "3", "--replicas", "2", "--duration", "5", "--rate", "20", "--runs", "1"),
    ],
    ("lab", "run"): [
        *("--scenario", "race", "--datapath", "userspace", "--replicas", "1", "--nodes", "1"),
        *("--baseline", "1", "--tail", "0", "--rate", "20", "--clients", "1", "--grace", "0.5"),
    ],
    ("lab", "serve"): ["--datapath", "userspace", "--for", "1"],
    ("lab", "demo"): ["--datapath", "userspace"],
    ("collect",): ["--out", str(WORK / "bundle")],
}
# positional arguments of the bases (left out when an argument is drawn)
BASE_ARGUMENTS: dict[tuple[str, ...], list[str]] = {
    ("rules", "explain"): ["SVD101"],
    ("rules", "export"): [str(WORK / "rules")],
    ("collect",): ["api"],
}
LEFT_OUT = {("lab", "clean")}
NUMERIC = (Number, IntOrPercent, Distribution)
SECONDS_PER_RUN = 30.0
EXAMPLES = 80  # per command: about 10 s for all of them


def walk(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        assert command is not None
        here = (*path, name)
        yield here, command
        if isinstance(command, click.Group):
            yield from walk(command, here)


COMMANDS = [(path, command) for path, command in walk(cli) if path not in LEFT_OUT]


def fuzzable(command: click.Command) -> list[click.Parameter]:
    return [
        p
        for p in command.params
        if not (isinstance(p, click.Option) and (p.is_flag or p.name in ("help", "version")))
    ]


def values_for(param: click.Parameter) -> st.SearchStrategy[str]:
    choices = list(param.type.choices) if isinstance(param.type, click.Choice) else []
    return st.sampled_from([*VALUES, *map(str, choices)])


def args_for(param: click.Parameter, value: str, spelling: int) -> list[str]:
    """The option under one of its names (hidden aliases too), or the argument."""
    if isinstance(param, click.Option):
        return [param.opts[spelling % len(param.opts)], value]
    return [value]


@st.composite
def invocations(
    draw: st.DrawFn, path: tuple[str, ...], command: click.Command
) -> tuple[list[str], list[tuple[click.Parameter, str]]]:
    params = fuzzable(command)
    if not params:
        return [*path], []
    chosen = draw(st.lists(st.sampled_from(params), min_size=1, max_size=3, unique_by=id))
    given_values = [(p, draw(values_for(p))) for p in chosen]
    spellings = draw(st.lists(st.integers(0, 3), min_size=len(chosen), max_size=len(chosen)))
    fuzzed = [
        a for (p, v), n in zip(given_values, spellings, strict=True) for a in args_for(p, v, n)
    ]
    base = BASES.get(path, [])
    if len(path) == 2 and path[0] == "simulate":  # the group's options come first
        return ["simulate", *base, path[1], *fuzzed], given_values
    drawn_argument = any(isinstance(p, click.Argument) for p, _ in given_values)
    arguments = [] if drawn_argument else BASE_ARGUMENTS.get(path, [])
    return [*path, *base, *fuzzed, *arguments], given_values


def finite_everywhere(value: Any, where: str = "scenario") -> None:
    """Every number in a (nested) dataclass is finite: nothing non-finite reached the lab."""
    if isinstance(value, float):
        assert math.isfinite(value), f"{where} = {value!r} reached the lab"
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            finite_everywhere(getattr(value, f.name), f"{where}.{f.name}")


class Reached(Exception):
    pass


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab's run and serve replaced by checks of what they were handed (see above)."""
    lab_cli = importlib.import_module("svcdoctor.cli.lab")  # the attribute is the group
    serve_module = importlib.import_module("svcdoctor.lab.serve")

    def run_one(scenario: Any, datapath: str, out: Path, seed: int, progress: Any = None) -> Any:
        finite_everywhere(scenario)
        raise click.exceptions.Exit(0)

    async def serve(scenario: Any, *args: Any, **kwargs: Any) -> Any:
        finite_everywhere(scenario)
        for value in args:
            if isinstance(value, float):
                assert math.isfinite(value)
        raise click.exceptions.Exit(0)

    monkeypatch.setattr(lab_cli, "_run_one", run_one)
    monkeypatch.setattr(serve_module, "serve", serve)
    monkeypatch.chdir(WORK)
    monkeypatch.setenv("KUBECONFIG", str(WORK / "no-kubeconfig"))


def check(args: list[str], given_values: list[tuple[click.Parameter, str]]) -> Result:
    started = time.monotonic()
    result = CliRunner().invoke(cli, args, input="")
    took = time.monotonic() - started
    shown = f"svcdoctor {' '.join(map(repr, args))} → {result.exit_code}\n{result.output}"
    assert result.exit_code in (0, 1, 2), shown
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(shown) from result.exception
    assert "Traceback" not in result.output, shown
    assert "run with --debug" not in result.output, shown  # an unexpected error
    assert took < SECONDS_PER_RUN, f"{took:.1f} s: {shown}"
    for param, value in given_values:
        if isinstance(param.type, NUMERIC) and value in NOT_FINITE:
            assert result.exit_code == 2, shown
    return result


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_bad_values_never_crash(
    stand_ins: None, path: tuple[str, ...], command: click.Command
) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(invocations(path, command))
    def prop(invocation: tuple[list[str], list[tuple[click.Parameter, str]]]) -> None:
        check(*invocation)

    prop()


def test_every_command_is_fuzzed() -> None:
    """Commands added later are covered without a change here."""
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"lint", "diagnose", "simulate", "simulate recommend", "lab run", "lab serve"} <= names
    assert {"scan", "collect", "rules explain", "rules export", "lab demo"} <= names


@pytest.mark.lab
def test_lab_run_for_real_never_crashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lab run`` really run (userspace datapath, the shortest valid durations): bad
    values end in exit 2 at once; valid ones, among them the explicit examples, in a real
    run that passes its own ground-truth checks."""
    monkeypatch.chdir(WORK)
    path = ("lab", "run")
    command = dict(COMMANDS)[path]
    options = {p.name: p for p in command.params}
    base = ["lab", "run", *BASES[path]]
    valid = [
        ([*base], []),
        ([*base, "--max-surge", "100%", "--prestop", "0"], [(options["max_surge"], "100%")]),
        (
            [*base, "--scenario", "bad-backend", "--duration", "1", "--replicas", "2"],
            [(options["duration"], "1")],
        ),
    ]

    @settings(
        max_examples=6,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(invocations(path, command))
    def prop(invocation: tuple[list[str], list[tuple[click.Parameter, str]]]) -> None:
        check(*invocation)

    for args, given_values in valid:
        result = check(args, given_values)
        assert result.exit_code == 0, result.output
    prop()


def test_no_numeric_option_bypasses_the_number_types() -> None:
    """One parameter type for every number: click's own FLOAT/INT and ranges (which let
    NaN through) appear in no command."""
    bypassing = [
        f"{' '.join(path)} {p.name}"
        for path, command in COMMANDS
        for p in command.params
        if isinstance(p.type, click.types.FloatParamType | click.types.IntParamType)
    ]
    assert bypassing == []


def test_the_temporary_directory_is_ours() -> None:
    assert os.path.isdir(WORK)
