"""Issue 16, line by line: bad option values, output paths checked before the work, one
error mechanism, and the conventions users bring from kubectl."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tracemalloc
from io import BytesIO
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from svcdoctor.cli import cli, prog_name
from svcdoctor.cli._params import Duration, IntOrPercent, Number, Option, Share, resolve_count
from svcdoctor.errors import SvcdoctorError
from svcdoctor.manifests.loader import _read_upto

from .test_cli import APP, assert_usage_error, run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_BUNDLE = ROOT / "src" / "svcdoctor" / "examples" / "rollout-race"


def invoke(*args: str, **kw: Any) -> Result:
    return CliRunner().invoke(cli, list(args), **kw)


def error_line(result: Result) -> str:
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.fixture
def app(tmp_path: Path) -> Path:
    path = tmp_path / "app.yaml"
    path.write_text(APP)
    return path


# ---- numbers: NaN, infinities, out of range ---------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--propagation-seconds", "nan"),
        ("--propagation-seconds", "inf"),
        ("--max-request-seconds", "nan"),
        ("--margin-seconds", "inf"),
        ("--margin-seconds", "-1"),
        ("--max-file-mb", "nan"),
        ("--max-file-mb", "inf"),
        ("--max-file-mb", "1e12"),
        ("--max-file-mb", "0"),
    ],
)
def test_lint_numbers_must_be_finite_and_in_range(app: Path, option: str, value: str) -> None:
    done = invoke("lint", str(app), option, value)
    assert done.exit_code == 2
    assert f"'{option}': '{value}'" in error_line(done)
    assert "Traceback" not in done.output


@pytest.mark.parametrize(
    "line",
    [
        "propagation-seconds = nan",
        "max-request-seconds = inf",
        "margin-seconds = -inf",
        "max-file-mb = nan",
        "max-file-mb = 1e12",
        'propagation-seconds = "nan"',
    ],
)
def test_config_numbers_go_through_the_same_type(tmp_path: Path, app: Path, line: str) -> None:
    (tmp_path / ".svcdoctor.toml").write_text(line + "\n")
    proc = run("lint", app.name, cwd=tmp_path)
    message = assert_usage_error(proc, ".svcdoctor.toml", line.split(" = ", maxsplit=1)[0])
    assert "finite" in message or "out of range" in message


def test_a_huge_file_limit_does_not_allocate_it(tmp_path: Path, app: Path) -> None:
    """--max-file-mb 1e12 was a MemoryError on a 1 KB file: the read allocated the limit."""
    proc = run("lint", app.name, "--max-file-mb", "2048", "-o", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # findings, no error
    tracemalloc.start()
    try:
        data = _read_upto(BytesIO(b"x" * 1000), 2048 * 1024 * 1024 + 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == b"x" * 1000
    assert peak < 4 * 1024 * 1024


def test_read_upto_stops_at_the_limit() -> None:
    assert _read_upto(BytesIO(b"y" * (3 << 20)), (2 << 20) + 1) == b"y" * ((2 << 20) + 1)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e12", "abc", ""])
def test_clock_offsets_must_be_finite_and_bounded(value: str) -> None:
    done = invoke("diagnose", str(EXAMPLE_BUNDLE), "--clock-offset", f"requests.csv={value}")
    assert done.exit_code == 2
    assert "--clock-offset" in error_line(done)


@pytest.mark.parametrize("value", ["-30", "2.5", "90s", "-1h", "1449000000"])
def test_clock_offsets_take_seconds_and_durations(value: str) -> None:
    """...and a boot time, the offset that puts dmesg's seconds since boot on the clock."""
    from svcdoctor.cli.diagnose import _offsets

    seconds = {"-30": -30.0, "2.5": 2.5, "90s": 90.0, "-1h": -3600.0}.get(value, 1449000000.0)
    assert _offsets((f"requests.csv={value}",)) == {"requests.csv": seconds}


@pytest.mark.parametrize(
    "args",
    [
        ["--grace", "nan"],
        ["--prestop", "nan"],
        ["--rate", "nan"],
        ["--min-sync", "nan"],
        ["--min-sync-period", "inf"],
        ["--baseline", "inf"],
        ["--max-surge", "nan"],
        ["--max-surge", "150%"],
        ["--seed", "nan"],
        ["--propagation", "1e12"],
    ],
)
def test_lab_run_refuses_non_finite_values_before_starting(args: list[str]) -> None:
    done = invoke("lab", "run", *args)
    assert done.exit_code == 2
    assert f"'{args[1]}'" in error_line(done)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1", "150%"])
def test_recommend_target_must_be_a_share_below_1(value: str) -> None:
    done = invoke("simulate", "recommend", "--target-failures", value)
    assert done.exit_code == 2
    assert "'--target-failures'" in error_line(done)


def test_target_failures_takes_a_percentage() -> None:
    assert Share(0, 1, high_open=True).convert("0.01%", None, None) == pytest.approx(0.0001)


def test_the_number_types() -> None:
    assert Number(0, 10, integer=True).convert("3", None, None) == 3
    assert Duration().convert("1h30m", None, None) == 5400
    assert Duration().convert("250ms", None, None) == 0.25
    assert IntOrPercent(32).convert(" 25% ", None, None) == "25%"
    assert resolve_count("25%", 10, True) == 3
    assert resolve_count("25%", 10, False) == 2
    for bad in ("nan", "inf", "-inf", "1e999", True):
        with pytest.raises(click.BadParameter):
            Number().convert(bad, None, None)
    with pytest.raises(click.BadParameter, match="whole number"):
        Number(integer=True).convert("2.5", None, None)


# ---- output paths, checked before the work ----------------------------------------------


@pytest.mark.parametrize(
    ("option", "path", "fragment"),
    [
        ("--html", "/nonexistent-dir/r.html", "does not exist"),
        ("--plot", "/proc/nope.png", "cannot create files in /proc"),
        ("--plot", "t.jpg", "written as PNG or SVG: give a name ending in .png or .svg"),
        ("--html", "report.pdf", "ending in .html"),
        ("--plot", ".", "ending in .png"),
    ],
)
def test_diagnose_outputs_are_checked_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, path: str, fragment: str
) -> None:
    monkeypatch.chdir(tmp_path)
    done = invoke("diagnose", str(EXAMPLE_BUNDLE), option, path)
    assert done.exit_code == 2
    assert fragment in error_line(done)
    assert "Verdict" not in done.output  # nothing was diagnosed


def test_an_output_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "r.html"
    folder.mkdir()
    done = invoke("diagnose", str(EXAMPLE_BUNDLE), "--html", str(folder))
    assert done.exit_code == 2
    assert "is a directory" in error_line(done)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--plot", "/proc/x.png"], "cannot create files in /proc"),
        (["--plot", "t.jpg"], "PNG or SVG"),
        (["--emit-evidence", "/proc/bundle"], "cannot create files in /proc"),
    ],
)
def test_simulate_outputs_are_checked_first(args: list[str], fragment: str) -> None:
    done = invoke("simulate", "--nodes", "3", "--replicas", "2", *args)
    assert done.exit_code == 2
    assert fragment in error_line(done)
    assert "Simulated" not in done.output


def test_outputs_that_can_be_written_are_written(tmp_path: Path) -> None:
    html, svg = tmp_path / "r.HTML", tmp_path / "t.svg"
    done = invoke("diagnose", str(EXAMPLE_BUNDLE), "--html", str(html), "--plot", str(svg))
    assert done.exit_code == 0, done.output
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
    assert svg.read_text().lstrip().startswith("<?xml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.HTML", "t.svg"]  # no probes left


# ---- one error mechanism ----------------------------------------------------------------


def test_an_unexpected_error_is_one_line_and_exit_1(
    app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(sys.modules["svcdoctor.cli.lint"], "run_checks", broken)
    done = invoke("lint", str(app))
    assert done.exit_code == 1
    assert done.output == (
        "svcdoctor: error: unexpected ZeroDivisionError: division by zero (a bug: run with "
        "--debug for the traceback)\n"
    )
    debug = invoke("--debug", "lint", str(app))
    assert isinstance(debug.exception, ZeroDivisionError)  # the traceback is printed
    monkeypatch.setenv("SVCDOCTOR_DEBUG", "1")
    assert isinstance(invoke("lint", str(app)).exception, ZeroDivisionError)


def test_known_errors_are_one_line_and_their_exit_code(
    app: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Known(SvcdoctorError):
        pass

    class Invalid(SvcdoctorError):
        exit_code = 1

    for error, code in ((Known("the input is bad"), 2), (Invalid("run invalid: x"), 1)):

        def broken(*args: Any, error: Exception = error, **kwargs: Any) -> Any:
            raise error

        monkeypatch.setattr(sys.modules["svcdoctor.cli.lint"], "run_checks", broken)
        done = invoke("lint", str(app))
        assert done.exit_code == code
        assert done.output == f"svcdoctor: error: {error}\n"


def test_the_known_errors_share_the_base_class() -> None:
    from svcdoctor.cli.config import ConfigError
    from svcdoctor.cluster.collect import BundleError
    from svcdoctor.cluster.reader import ClusterError
    from svcdoctor.diagnose.upstreams import UnknownService
    from svcdoctor.evidence.reader import EvidenceError
    from svcdoctor.evidence.requests import RequestLogError
    from svcdoctor.lab.datapath import LabError
    from svcdoctor.lab.kernel import KernelUnavailable
    from svcdoctor.lab.run import RunInvalid
    from svcdoctor.model.dist import DistError
    from svcdoctor.simulate.params import ParamError

    for cls in (ConfigError, BundleError, ClusterError, LabError, ParamError, EvidenceError):
        assert issubclass(cls, SvcdoctorError)
    for cls in (RequestLogError, UnknownService, DistError):
        assert issubclass(cls, SvcdoctorError)
    assert (LabError.exit_code, RunInvalid.exit_code, KernelUnavailable.exit_code) == (1, 1, 2)


def test_a_path_the_machine_refuses_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/etc/shadow")

    monkeypatch.setattr(sys.modules["svcdoctor.cli.lint"], "lint_paths", refuse)
    done = invoke("lint", "x.yaml")
    assert (done.exit_code, done.output) == (
        2,
        "svcdoctor: error: /etc/shadow: Permission denied\n",
    )


# ---- lint of an unreadable directory ----------------------------------------------------


@pytest.fixture
def shared_tmp() -> Any:
    """A directory every user can search (pytest's own is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="svcdoctor-perm-"))
    folder.chmod(0o755)
    yield folder
    for path in (folder / "locked", folder / "outer" / "inner"):
        if path.exists():
            path.chmod(0o755)
    shutil.rmtree(folder)


def test_lint_of_an_unreadable_directory_says_permission_denied(shared_tmp: Path) -> None:
    tmp_path = shared_tmp
    locked = tmp_path / "locked"
    (locked / "sub").mkdir(parents=True)
    (locked / "sub" / "app.yaml").write_text(APP)
    nested = tmp_path / "outer"
    (nested / "inner").mkdir(parents=True)
    (nested / "ok.yaml").write_text(APP)
    (nested / "inner" / "x.yaml").write_text(APP)
    locked.chmod(0)
    (nested / "inner").chmod(0)
    tmp_path.chmod(0o755)
    command = [str(Path(sys.executable).parent / "svcdoctor"), "lint", "-o", "json"]
    prefix: list[str] = []
    if os.geteuid() == 0:  # root reads anything: lint as nobody
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv cannot drop the privilege to read anything")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        for parent in (tmp_path, *tmp_path.parents):
            if (
                not os.access(parent, os.X_OK, effective_ids=False)
                or parent.stat().st_mode & 1 == 0
            ):
                pytest.skip(f"{parent} is not searchable by nobody")
    try:
        for target, rule_path in ((locked, "locked"), (nested, "inner")):
            proc = subprocess.run(
                [*prefix, *command, str(target)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                cwd=tmp_path,
            )
            assert proc.returncode == 2, proc.stderr
            assert "Permission denied" in proc.stdout
            assert rule_path in proc.stdout
            assert "has no *.yaml" not in proc.stdout
    finally:
        locked.chmod(0o755)
        (nested / "inner").chmod(0o755)


# ---- kubectl conventions ----------------------------------------------------------------


def commands() -> list[tuple[str, click.Command]]:
    out = []

    def walk(group: click.Group, prefix: str) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            out.append((f"{prefix} {name}".strip(), command))
            if isinstance(command, click.Group):
                walk(command, f"{prefix} {name}")

    walk(cli, "")
    return out


def test_output_format_is_dash_o_everywhere_and_dash_f_is_a_file() -> None:
    for name, command in commands():
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            if param.name == "fmt":
                assert {"-o", "--output", "--format"} <= set(param.opts), name
                assert isinstance(param, Option), name
                assert "--format" in param.aliases, name
            if "-f" in param.opts:
                assert param.opts[-1] == "--filename", (name, param.opts)


def test_format_is_a_hidden_alias(app: Path) -> None:
    help_text = invoke("lint", "--help", terminal_width=200).output
    assert "-o, --output [text|json|sarif|github]" in help_text
    assert "--format" not in help_text
    assert invoke("lint", str(app), "--format", "json").output.startswith("{")


def test_lint_dash_f_is_a_file_like_kubectl(app: Path) -> None:
    by_flag = invoke("lint", "-f", str(app), "-o", "json")
    by_path = invoke("lint", str(app), "-o", "json")
    assert by_flag.exit_code == by_path.exit_code == 1
    assert by_flag.output == by_path.output


def test_diagnose_reads_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    rows = (EXAMPLE_BUNDLE / "requests.csv").read_text()
    piped = invoke("diagnose", "-", "-o", "json", input=rows)
    assert piped.exit_code == 0, piped.output
    filed = invoke("diagnose", "-f", str(EXAMPLE_BUNDLE / "requests.csv"), "-o", "json")
    assert filed.exit_code == 0, filed.output
    assert '"summary"' in piped.output
    sources = json.loads(piped.output)["summary"]["sources"]
    assert [src["path"] for src in sources] == ["-"]  # named as the user gave it
    assert list(tmp_path.iterdir()) == []  # the temporary copy of stdin is gone


def test_empty_stdin_is_an_input_error() -> None:
    done = invoke("diagnose", "-", input="")
    assert done.exit_code == 2
    assert "Traceback" not in done.output


ALIASES = [
    ("lint", "--kube-version", "--kubernetes-version", "1.29"),
    ("simulate recommend", "--kube-version", "--kubernetes-version", "1.29"),
    ("simulate", "--min-sync", "--min-sync-period", "2"),
    ("lab run", "--min-sync", "--min-sync-period", "2"),
    ("lab run", "--bad", "--bad-backends", "1"),
]


@pytest.mark.parametrize(("command", "old", "new", "value"), ALIASES)
def test_one_name_per_concept_old_names_hidden(
    command: str, old: str, new: str, value: str
) -> None:
    found = dict(commands())[command]
    param = next(p for p in found.params if isinstance(p, click.Option) and new in p.opts)
    assert old in param.opts
    help_text = invoke(*command.split(), "--help", terminal_width=200).output
    assert new in help_text
    assert re.search(rf"{re.escape(old)}\b(?!-)", help_text) is None


def test_max_surge_is_an_integer_or_a_percentage_everywhere() -> None:
    from svcdoctor.cli._lab import customised as _customised
    from svcdoctor.lab.scenarios import SCENARIOS

    for command in ("simulate", "lab run"):
        param = next(p for p in dict(commands())[command].params if p.name == "max_surge")
        assert isinstance(param.type, IntOrPercent)
    custom = _customised(
        SCENARIOS["race"], {"replicas": 8, "max_surge": "25%", "max_unavailable": "25%"}
    )
    assert (custom.max_surge, custom.max_unavailable) == (2, 2)


def test_every_option_has_help_and_shows_its_default() -> None:
    missing = []
    for name, command in commands():
        ctx = click.Context(command, info_name=name)
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            record = param.get_help_record(ctx)
            assert record is not None
            text = record[1]
            shown = "default" in text.lower() or param.required
            if not text or not (param.is_flag or shown):
                missing.append(f"{name} {param.opts[-1]}: {text!r}")
    assert missing == []


def test_simulate_help_describes_every_option() -> None:
    command = dict(commands())["simulate"]
    ctx = click.Context(command, info_name="simulate")
    for option in ("--connection", "--runs", "--controller-latency", "--watch-latency"):
        param = next(p for p in command.params if option in getattr(p, "opts", ()))
        record = param.get_help_record(ctx)
        assert record is not None
        assert not record[1].startswith("["), record  # a description, not just a default


def test_lab_help_shows_the_scenario_defaults() -> None:
    text = " ".join(invoke("lab", "run", "--help").output.split())
    assert "preStop sleep, seconds. [default: the scenario's; race: 0 s]" in text
    assert "[default: auto]" in text


def test_run_as_the_kubectl_plugin_usage_says_kubectl_svcdoctor(tmp_path: Path) -> None:
    assert prog_name("/usr/local/bin/kubectl-svcdoctor") == "kubectl svcdoctor"
    assert prog_name("svcdoctor") == "svcdoctor"
    proc = run("lint", "--help", cwd=tmp_path, program="kubectl-svcdoctor")
    assert proc.stdout.startswith("Usage: kubectl svcdoctor lint [OPTIONS]")
    proc = run("lint", "--bogus", cwd=tmp_path, program="kubectl-svcdoctor")
    assert "Try 'kubectl svcdoctor lint --help' for help." in proc.stderr


def test_the_documented_config_blocks_work_pasted_into_svcdoctor_toml(
    tmp_path: Path, app: Path
) -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    blocks = [
        textwrap.dedent(m.group(2))
        for m in re.finditer(r"^( *)```toml\n(.*?)^\1```", page, re.DOTALL | re.MULTILINE)
        if "[tool.svcdoctor]" in m.group(2)
    ]
    assert len(blocks) >= 2  # the configuration block and the drains one
    for block in blocks:
        (tmp_path / ".svcdoctor.toml").write_text(block)
        proc = run("lint", app.name, "-o", "json", cwd=tmp_path)
        assert proc.returncode in (0, 1), proc.stderr
        assert proc.stderr == ""
    (tmp_path / ".svcdoctor.toml").write_text(blocks[0] + "\n[other]\nx = 1\n")
    assert_usage_error(run("lint", app.name, cwd=tmp_path), "[tool.svcdoctor] and other keys")


def test_text_off_a_terminal_is_not_wrapped(tmp_path: Path) -> None:
    long_name = "a-deployment-with-a-name-long-enough-to-pass-eighty-columns-" + "x" * 20
    (tmp_path / "app.yaml").write_text(APP.replace("name: api", f"name: {long_name}"))
    proc = run("lint", "app.yaml", cwd=tmp_path)
    assert long_name in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) > 80


def test_the_serve_bound_matches_the_lab() -> None:
    from svcdoctor.cli._lab import MAX_SERVE
    from svcdoctor.lab.serve import MAX_SERVE_SECONDS

    assert MAX_SERVE == MAX_SERVE_SECONDS
