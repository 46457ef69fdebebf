"""Static checks. Each module registers its rules; the import order is the list order."""

from svcdoctor.checks import backend, infra, inputs, live, race, reuse
from svcdoctor.checks.registry import DOC_SECTIONS, RULES, Hit, Rule, all_rules, lookup, rule
from svcdoctor.checks.run import LintResult, run_checks
from svcdoctor.checks.settings import Settings

__all__ = [
    "DOC_SECTIONS",
    "RULES",
    "Hit",
    "LintResult",
    "Rule",
    "Settings",
    "all_rules",
    "backend",
    "infra",
    "inputs",
    "live",
    "lookup",
    "race",
    "reuse",
    "rule",
    "run_checks",
]
