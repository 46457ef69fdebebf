"""Differential diagnosis over evidence: one analysis per cause, then a ranking."""

from svcdoctor.diagnose.context import Settings
from svcdoctor.diagnose.rank import diagnose

__all__ = ["Settings", "diagnose"]
