"""``[tool.svcdoctor]`` in pyproject.toml or ``.svcdoctor.toml``, overridden by CLI flags."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svcdoctor.checks import lookup
from svcdoctor.checks.settings import drain_pattern
from svcdoctor.cli._params import Duration, Number, ParamBase, config_value
from svcdoctor.errors import SvcdoctorError
from svcdoctor.model import Severity
from svcdoctor.model.hops import Implementation

MAX_FILE_MB = 2048.0  # the largest --max-file-mb: a manifest file of 2 GB is not one
# the numbers of a config file and their flags: one type each, finite and in range
NUMBER_TYPES: dict[str, ParamBase] = {
    "propagation-seconds": Duration(0, 3600),
    "max-request-seconds": Duration(0, 86_400),
    "margin-seconds": Duration(0, 3600),
    "max-file-mb": Number(0, MAX_FILE_MB, low_open=True, unit="MB"),
}
NUMBERS = tuple(NUMBER_TYPES)
DRAIN_TYPE = Duration(0, 3600)  # seconds an app in ``drains`` keeps serving after SIGTERM
# old spellings of keys, still read
ALIASES = {"kube-version": "kubernetes-version"}
KEYS = frozenset(
    {*NUMBERS, "enable", "disable", "severity", "kubernetes-version", "fail-on", "drains", "hops"}
    | {"prometheus"}
)
# lint's input options (which files, and the namespace of objects that name none)
INPUT_KEYS = frozenset({"exclude", "namespace", "allow-empty"})
KEYS = KEYS | INPUT_KEYS


class ConfigError(SvcdoctorError, ValueError):
    """A configuration problem, phrased for a one-line message."""


@dataclass(slots=True)
class Config:
    """Options as read from a file (``None``: not set there)."""

    source: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


def find_config(start: Path) -> Path | None:
    """The nearest ``.svcdoctor.toml``, or ``pyproject.toml`` with ``[tool.svcdoctor]``."""
    for folder in (start, *start.parents):
        own = folder / ".svcdoctor.toml"
        if own.is_file():
            return own
        project = folder / "pyproject.toml"
        if project.is_file() and re.search(
            r"^\[tool\.svcdoctor[\].]", project.read_text(errors="replace"), re.MULTILINE
        ):
            return project
    return None


def read_config(path: Path) -> Config:
    """Parse and validate a config file; ``ConfigError`` names the file and key."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    table = _table(path, data)
    values: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("_", "-")
        key = ALIASES.get(key, key)
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown key {raw_key!r} (known: {', '.join(sorted(KEYS))})")
        values[key] = _check(path, key, value)
    return Config(str(path), values)


def _table(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The svcdoctor table of a file: ``[tool.svcdoctor]`` in pyproject.toml; in
    ``.svcdoctor.toml`` the top level, or a ``[tool.svcdoctor]`` block pasted from a
    pyproject.toml (then nothing else may be in the file)."""
    tool = data.get("tool")
    if path.name == "pyproject.toml":
        found = tool.get("svcdoctor", {}) if isinstance(tool, dict) else {}
        return found if isinstance(found, dict) else {}
    if isinstance(tool, dict) and "svcdoctor" in tool:
        others = sorted({*data} - {"tool"} | {f"tool.{k}" for k in tool if k != "svcdoctor"})
        if others:
            raise ConfigError(
                f"{path}: holds [tool.svcdoctor] and other keys ({', '.join(others)}): "
                "give the options either at the top level or in [tool.svcdoctor]"
            )
        table = tool["svcdoctor"]
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: tool.svcdoctor must be a table")
        return table
    return data


def _check(path: Path, key: str, value: Any) -> Any:
    if key in INPUT_KEYS:
        return _input_option(path, key, value)
    if key in NUMBERS:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ConfigError(f"{path}: {key} must be a number, got {value!r}")
        try:
            return float(config_value(NUMBER_TYPES[key], value, f"{path}: {key}"))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if key in ("enable", "disable"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: {key} must be a list of rule ids")
        return [rule_id(v, f"{path}: {key}") for v in value]
    if key == "severity":
        if not isinstance(value, dict):
            raise ConfigError(f'{path}: severity must be a table of RULE = "level"')
        return {
            rule_id(k, f"{path}: severity"): severity(v, f"{path}: severity.{k}")
            for k, v in value.items()
        }
    if key == "kubernetes-version":
        if not isinstance(value, str):  # TOML reads 1.30 as the float 1.3
            raise ConfigError(f'{path}: kubernetes-version must be a string such as "1.31"')
        return kube_version(value, f"{path}: kubernetes-version")
    if key == "drains":
        return drain_table(path, value)
    if key == "hops":
        return hop_table(path, value)
    if key == "prometheus":
        if not isinstance(value, str) or not value.startswith(("http://", "https://")):
            raise ConfigError(f"{path}: prometheus must be an http(s) URL, got {value!r}")
        return value
    return severity(value, f"{path}: fail-on")


def hop_table(path: Path, value: Any) -> dict[str, float]:
    """``[tool.svcdoctor.hops]``: implementation = seconds its leg of the race takes
    (``aws-alb = 45``), overriding the documented defaults of ``model.path``."""
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: hops must be a table of hop = seconds, e.g. aws-alb = 45")
    known = {i.value for i in Implementation}
    out: dict[str, float] = {}
    for key, seconds in value.items():
        if key not in known:
            raise ConfigError(
                f"{path}: hops.{key}: unknown hop (one of {', '.join(sorted(known))})"
            )
        out[key] = drain_seconds(seconds, f"{path}: hops.{key}")
    return out


def drain_table(path: Path, value: Any) -> dict[str, float | None]:
    """``drains`` as pattern → seconds the app keeps serving after SIGTERM: a list of
    patterns (seconds not told: ``None``) or a table ``{"pattern" = seconds}``."""
    where = f"{path}: drains"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return {drains(v, where): None for v in value}
    if isinstance(value, dict):
        return {drains(k, where): drain_seconds(v, f"{where}.{k!r}") for k, v in value.items()}
    raise ConfigError(
        f'{where} must be a list of patterns, e.g. ["ghcr.io/org/app*", "deployment/payments-*"]'
        ', or a table of pattern = seconds, e.g. {"deployment/payments-*" = 15}'
    )


def drain_seconds(value: Any, where: str) -> float:
    """How long an app keeps serving after SIGTERM: a number or duration (``15``, ``15s``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{where}: expected seconds the app keeps serving, got {value!r}")
    try:
        return float(config_value(DRAIN_TYPE, value, where))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def drains(pattern: str, where: str) -> str:
    """A valid ``drains`` pattern (image glob or ``KIND/NAME`` glob), stripped."""
    try:
        drain_pattern(pattern)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return pattern.strip()


def drain_flag(text: str, where: str) -> tuple[str, float | None]:
    """``--drains PATTERN`` or ``PATTERN=SECONDS`` (no pattern holds ``=``)."""
    pattern, sep, value = text.rpartition("=") if "=" in text else (text, "", "")
    return drains(pattern, where), drain_seconds(value.strip(), where) if sep else None


def rule_id(name: str, where: str) -> str:
    try:
        return lookup(name.strip()).id
    except KeyError:
        raise ConfigError(f"{where}: unknown rule {name!r} (see svcdoctor rules)") from None


def severity(value: Any, where: str) -> Severity:
    try:
        return Severity(str(value).lower())
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not one of info, warning, error") from None


def kube_version(text: str, where: str) -> tuple[int, int]:
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
    if not match:
        raise ConfigError(f"{where}: {text!r} is not a Kubernetes version such as 1.31")
    return int(match.group(1)), int(match.group(2))


def _input_option(path: Path, key: str, value: Any) -> Any:
    if key == "exclude":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f'{path}: exclude must be a list of globs, e.g. ["dashboards/"]')
        return list(value)
    if key == "allow-empty":
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: allow-empty must be true or false")
        return value
    return namespace(value, f"{path}: namespace")


def namespace(value: Any, where: str) -> str:
    """A namespace name (a DNS label)."""
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", value):
        raise ConfigError(f"{where}: {value!r} is not a namespace name (a DNS label)")
    return value
