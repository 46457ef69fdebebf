"""Delay and latency distributions: a tiny spec language users type on the command line.

``0.5`` or ``const:0.5`` · ``uniform:LOW,HIGH`` · ``exp:MEAN`` ·
``lognormal:MEDIAN,P99`` (a right-skewed delay given by its median and 99th percentile).
All values are seconds. The lab draws one value at a time (``draw``, the standard library);
the simulation draws arrays (``sample``, numpy, imported only there).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist
from typing import TYPE_CHECKING

from svcdoctor.errors import SvcdoctorError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

Z99 = NormalDist().inv_cdf(0.99)  # the standard normal's 99th percentile


class DistKind(StrEnum):
    CONST = "const"
    UNIFORM = "uniform"
    EXP = "exp"  # exponential, given by its mean
    LOGNORMAL = "lognormal"  # given by its median and 99th percentile


KINDS = tuple(k.value for k in DistKind)


class DistError(SvcdoctorError, ValueError):
    """A distribution spec that cannot be read."""


@dataclass(frozen=True, slots=True)
class Dist:
    kind: DistKind  # the word is taken too: ``Dist("uniform", 0.5, 1.5)``
    a: float
    b: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", DistKind(self.kind))

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray[np.float64]:
        """An array of draws (numpy)."""
        import numpy as np

        if self.kind is DistKind.CONST:
            return np.full(size, self.a)
        if self.kind is DistKind.UNIFORM:
            return rng.uniform(self.a, self.b, size)
        if self.kind is DistKind.EXP:
            return rng.exponential(self.a, size)
        return rng.lognormal(math.log(self.a), self._sigma(), size)

    def draw(self, rng: random.Random) -> float:
        """One draw (the standard library's generator)."""
        if self.kind is DistKind.CONST:
            return self.a
        if self.kind is DistKind.UNIFORM:
            return rng.uniform(self.a, self.b)
        if self.kind is DistKind.EXP:
            return rng.expovariate(1 / self.a)
        return rng.lognormvariate(math.log(self.a), self._sigma())

    def quantile(self, q: float) -> float:
        """The q-quantile (0 < q < 1)."""
        if self.kind is DistKind.CONST:
            return self.a
        if self.kind is DistKind.UNIFORM:
            return self.a + q * (self.b - self.a)
        if self.kind is DistKind.EXP:
            return -self.a * math.log1p(-q)
        return self.a * math.exp(self._sigma() * NormalDist().inv_cdf(q))

    @property
    def high(self) -> float:
        """The largest value (the 99.99th percentile for unbounded distributions)."""
        return self.b if self.kind is DistKind.UNIFORM else self.quantile(0.9999)

    @property
    def mean(self) -> float:
        if self.kind is DistKind.UNIFORM:
            return (self.a + self.b) / 2
        if self.kind is DistKind.LOGNORMAL:
            return self.a * math.exp(self._sigma() ** 2 / 2)
        return self.a

    def _sigma(self) -> float:
        return math.log(self.b / self.a) / Z99

    def __str__(self) -> str:
        """The spec, exactly: ``parse_dist(str(d)) == d``."""
        if self.kind is DistKind.CONST:
            return _number(self.a)
        if self.kind is DistKind.EXP:
            return f"exp:{_number(self.a)}"
        return f"{self.kind}:{_number(self.a)},{_number(self.b)}"


def _number(x: float) -> str:
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


def parse_dist(text: str) -> Dist:
    """Read a spec (see the module docstring); raises DistError with a one-line reason."""
    kind, _, rest = text.strip().partition(":")
    if not rest:
        kind, rest = "const", kind
    kind = kind.lower()
    if kind not in KINDS:
        raise DistError(f"unknown distribution {kind!r} in {text!r} (one of {', '.join(KINDS)})")
    try:
        values = [float(v) for v in rest.split(",")]
    except ValueError:
        raise DistError(f"{text!r}: the parameters must be numbers (seconds)") from None
    want = 2 if kind in ("uniform", "lognormal") else 1
    if len(values) != want:
        raise DistError(f"{text!r}: {kind} takes {want} number{'s' * (want > 1)}")
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise DistError(f"{text!r}: values must be finite and ≥ 0")
    if kind == "uniform" and values[1] < values[0]:
        raise DistError(f"{text!r}: uniform needs LOW ≤ HIGH")
    if kind == "lognormal" and not 0 < values[0] < values[1]:
        raise DistError(f"{text!r}: lognormal needs 0 < MEDIAN < P99")
    if kind == "exp" and values[0] == 0:
        return Dist(DistKind.CONST, 0.0)
    return Dist(DistKind(kind), values[0], values[1] if want == 2 else 0.0)
