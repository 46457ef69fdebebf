"""One time series as a metrics store returns it: labels and aligned (time, value) arrays.

Times are Unix seconds (float64, UTC), ascending; values are float64 (NaN where the store
returned ``NaN``). A ``Series`` is what the Prometheus reader gives the analyses, so that
neither depends on the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class Series:
    """One series: its labels (``__name__`` included when the store kept it), sample times
    ``t`` (Unix seconds, ascending) and values ``v`` of the same length."""

    labels: Mapping[str, str]
    t: FloatArray
    v: FloatArray

    def __post_init__(self) -> None:
        # read-only views: the caller's arrays stay writable, the series cannot change
        t = np.asarray(self.t, dtype=np.float64).view()
        v = np.asarray(self.v, dtype=np.float64).view()
        if t.shape != v.shape or t.ndim != 1:
            raise ValueError(f"series times and values differ in shape: {t.shape} vs {v.shape}")
        t.flags.writeable = False
        v.flags.writeable = False
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "v", v)
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Series):
            return NotImplemented
        return (
            dict(self.labels) == dict(other.labels)
            and np.array_equal(self.t, other.t)
            and np.array_equal(self.v, other.v, equal_nan=True)
        )

    __hash__ = None  # type: ignore[assignment]

    def key(self) -> tuple[tuple[str, str], ...]:
        """The labels as a sorted tuple: a stable identity for grouping and ordering."""
        return tuple(sorted(self.labels.items()))


__all__ = ["FloatArray", "Series"]
