"""Parameters of the checks, with the defaults the rules document."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cache

from svcdoctor.checks.drains import (
    FLAG_DRAINS,
    KNOWN_DRAINS,
    PROBE_HEADER_DRAINS,
    KnownDrain,
    argv_drain,
    env_drain,
)
from svcdoctor.model import Severity
from svcdoctor.model.duration import DurationError, parse_duration
from svcdoctor.model.path import Paths, PathSettings
from svcdoctor.model.remedy import (
    DEFAULT_MARGIN_SECONDS,
    DEFAULT_MAX_REQUEST_SECONDS,
    DEFAULT_PROPAGATION_SECONDS,
    ShutdownPlan,
    native_sleep,
)

# KIND/NAME patterns of ``drains``: the kind as kubectl spells it, case-insensitive.
WORKLOAD_ALIASES = {
    "deployment": "Deployment",
    "deploy": "Deployment",
    "statefulset": "StatefulSet",
    "sts": "StatefulSet",
    "daemonset": "DaemonSet",
    "ds": "DaemonSet",
    "replicaset": "ReplicaSet",
    "rs": "ReplicaSet",
    "replicationcontroller": "ReplicationController",
    "rc": "ReplicationController",
    "pod": "Pod",
    "po": "Pod",
    "rollout": "Rollout",
    "cloneset": "CloneSet",
    "job": "Job",
    "cronjob": "CronJob",
    "*": "*",
}
_IMAGE_GLOB = re.compile(r"[A-Za-z0-9._/:@*?\[\]!-]+")
_DOCKER_HUB = re.compile(r"^(?:docker\.io/|index\.docker\.io/|registry-1\.docker\.io/)")


def drain_pattern(text: str) -> tuple[str | None, str]:
    """``(kind, name glob)`` for ``KIND/NAME``, ``(None, image glob)`` for an image pattern;
    ``ValueError`` with a one-line reason when it is neither."""
    pattern = text.strip()
    head, sep, rest = pattern.partition("/")
    kind = WORKLOAD_ALIASES.get(head.lower()) if sep else None
    if kind is not None:
        if not rest or "/" in rest or not _IMAGE_GLOB.fullmatch(rest):
            raise ValueError(
                f"{text!r}: expected {head}/NAME with a name pattern such as {head}/payments-*"
            )
        return kind, rest
    if not pattern or not _IMAGE_GLOB.fullmatch(pattern):
        raise ValueError(
            f"{text!r} is neither an image pattern (ghcr.io/org/app*) nor KIND/NAME "
            "(deployment/payments-*)"
        )
    return None, pattern


@cache
def image_forms(image: str) -> frozenset[str]:
    """The spellings an image pattern is matched against: as written, without the Docker Hub
    registry and ``library/``, each also without its tag or digest."""
    forms = {image}
    short = _DOCKER_HUB.sub("", image)
    forms |= {short, short.removeprefix("library/")}
    for form in list(forms):
        bare = form.split("@", 1)[0]
        if ":" in bare.rsplit("/", 1)[-1]:
            bare = bare.rsplit(":", 1)[0]
        forms.add(bare)
    return frozenset(forms)


@cache
def image_matches(image: str, glob: str) -> bool:
    """Whether an image pattern matches the image, in any of its spellings
    (``image_forms``); the pattern too may leave out the Docker Hub registry."""
    globs = {glob, _DOCKER_HUB.sub("", glob).removeprefix("library/")}
    return bool(image) and any(fnmatchcase(f, g) for f in image_forms(image) for g in globs)


@dataclass(frozen=True, slots=True)
class Drain:
    """A ``drains`` entry that matched: its pattern, and how long the app keeps serving
    after SIGTERM (``None``: not told, trusted to outlast endpoint propagation);
    ``source``: for an entry of svcdoctor's list of known drains (``checks.drains``), where
    the app's code says so (empty: the user's configuration); ``quiet``: it ends once no
    request came for ``seconds``, so past endpoint propagation the app only idles."""

    pattern: str
    seconds: float | None = None
    source: str = ""
    quiet: bool = False


def known_drain(
    image: str,
    argv: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    headers: Collection[str] = (),
) -> Drain | None:
    """The drain of a well-known app (``checks.drains.KNOWN_DRAINS``) with the container's
    arguments and environment applied (a flag or variable that sets the seconds, a flag
    that turns the drain off), else the one a header its probes send names
    (``PROBE_HEADER_DRAINS``), else the one a flag it is given names (``FLAG_DRAINS``), else
    the one its environment names (``env_drain``), else the one its arguments start
    (``argv_drain``: Istio's pilot-agent);
    ``None`` when none is known or its drain is 0 s."""
    known = (
        known_app(image, tuple(argv))
        or next((PROBE_HEADER_DRAINS[h] for h in sorted(headers) if h in PROBE_HEADER_DRAINS), None)
        or next((FLAG_DRAINS[f] for f in FLAG_DRAINS if flag_value(argv, f) is not None), None)
        or env_drain(env or {})
        or argv_drain(argv)
    )
    if known is not None:
        if known.off is not None and flag_value(argv, known.off[0]) == known.off[1]:
            return None
        if (version := tag_version(image)) is not None and _padded(version) < _padded(known.since):
            return None  # a release from before the app drained
        seconds = float(known.seconds)
        value = flag_value(argv, known.flag) if known.flag is not None else None
        if value is None and known.env is not None:
            value = (env or {}).get(known.env)
        if value is not None:
            try:
                seconds = parse_duration(value)
            except DurationError:
                return None  # a value the app would refuse: nothing known
        found = Drain(known.image, seconds, known.source, known.quiet)
        return found if 0 < seconds < math.inf else None
    return None


_VERSION_TAG = re.compile(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:$|[-+_])")


def tag_version(image: str) -> tuple[int, ...] | None:
    """The version an image's tag names (``podinfo:0.0.1`` → (0, 0, 1), ``v2.1`` → (2, 1)),
    or ``None`` for a tag that names none (``latest``, a digest only)."""
    tag = image.split("@", 1)[0].rsplit("/", 1)[-1].partition(":")[2]
    m = _VERSION_TAG.match(tag)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def _padded(version: tuple[int, ...]) -> tuple[int, ...]:
    """A version with its missing parts as 0 (``2.0`` is ``2.0.0``)."""
    return (*version, *(0,) * (3 - len(version)))


@cache
def known_app(image: str, argv: tuple[str, ...]) -> KnownDrain | None:
    """The entry of ``checks.drains.KNOWN_DRAINS`` the image matches, if any (run as one of
    its ``commands``, when it names them)."""
    return next(
        (
            k
            for k in KNOWN_DRAINS
            if image_matches(image, k.image) and (not k.commands or set(k.commands) & set(argv))
        ),
        None,
    )


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of a Go-style flag in ``argv`` (``--f=v``, ``--f v``, one dash or two;
    the last one wins), or ``None``."""
    names = {"-" + flag.lstrip("-"), "--" + flag.lstrip("-")}
    value = None
    for i, arg in enumerate(argv):
        name, sep, rest = arg.partition("=")
        if name in names:
            value = rest if sep else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


@dataclass(frozen=True, slots=True)
class Settings:
    """What the user tells us about their cluster and traffic.

    ``propagation_seconds``: how long endpoint removal takes to reach every node and load
    balancer. ``max_request_seconds``: the longest legitimate request. ``margin_seconds``:
    slack added to computed grace periods. ``kube_version``: ``(major, minor)`` of the
    target cluster, or ``None`` when unknown. ``drains``: patterns of apps that keep
    serving after SIGTERM by themselves (image globs or ``KIND/NAME`` globs, see
    ``drains_itself``); ``drain_seconds``: how long, for the patterns that say
    (``drains = {"pattern" = seconds}`` in the config). ``plan``: a shutdown plan to fix
    the race to as given (a diagnosis' plan, ``fix --from-diagnosis``) instead of planning
    one from the race window (``None``: plan one).
    """

    propagation_seconds: float = DEFAULT_PROPAGATION_SECONDS
    max_request_seconds: float = DEFAULT_MAX_REQUEST_SECONDS
    margin_seconds: float = DEFAULT_MARGIN_SECONDS
    kube_version: tuple[int, int] | None = None
    disabled: frozenset[str] = frozenset()
    enabled: frozenset[str] | None = None  # None: every rule
    severities: dict[str, Severity] = field(default_factory=dict)
    drains: tuple[str, ...] = ()
    drain_seconds: dict[str, float] = field(default_factory=dict)
    plan: ShutdownPlan | None = None
    hop_seconds: dict[str, float] = field(default_factory=dict)
    paths: Paths | None = None  # the run's paths (``run_checks`` traces them once)
    test_inputs: bool = False  # report findings on unit tests' inputs too (testdata/)

    @property
    def path_settings(self) -> PathSettings:
        """What the path model needs of these settings."""
        return PathSettings(self.propagation_seconds, self.hop_seconds)

    def native_sleep(self) -> bool | None:
        """Whether ``lifecycle.preStop.sleep`` is available (beta 1.30, GA 1.34)."""
        return native_sleep(self.kube_version)

    @property
    def kube_version_text(self) -> str:
        if self.kube_version is None:
            return "unknown"
        major, minor = self.kube_version
        return f"{major}.{minor}"

    def drains_itself(self, kind: str, name: str, image: str) -> str | None:
        """The ``drains`` pattern saying this container's app keeps serving after SIGTERM,
        or ``None``. ``KIND/NAME`` matches the workload (kind case-insensitive, ``*`` any
        kind, name a glob); any other pattern is a glob over the image, which also matches
        without the Docker Hub prefix and, when it names no tag, any tag or digest."""
        for text in self.drains:
            want_kind, glob = drain_pattern(text)
            if want_kind is not None:
                if want_kind in ("*", kind) and fnmatchcase(name, glob):
                    return text
            elif image_matches(image, glob):
                return text
        return None

    def drain_of(
        self,
        kind: str,
        name: str,
        image: str,
        argv: Sequence[str] = (),
        config: tuple[float, str, str] | None = None,
        env: Mapping[str, str] | None = None,
        headers: Collection[str] = (),
    ) -> Drain | None:
        """How long this container's app keeps serving after SIGTERM: the ``drains`` entry
        that matches it, else what its mounted configuration sets (``config``:
        ``Container.config_drain``), else svcdoctor's list of known drains
        (``known_drain``, read with the container's ``argv``: command and args, and the
        ``headers`` its probes send), else ``None``."""
        pattern = self.drains_itself(kind, name, image)
        if pattern is None and config is not None:
            return Drain(config[1], config[0], config[2])
        if pattern is None:
            return known_drain(image, argv, env, headers)
        return Drain(pattern, self.drain_seconds.get(pattern))
