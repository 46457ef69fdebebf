"""Readers of the evidence users already have → ``Evidence`` (formats detected by content)."""

from svcdoctor.evidence.reader import EvidenceError, detect, read_evidence

__all__ = ["EvidenceError", "detect", "read_evidence"]
