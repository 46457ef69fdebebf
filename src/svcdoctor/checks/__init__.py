"""Static checks. Each module registers its rules; the import order is the list order.

Besides the rules, the public seam other analyses use (``diagnose`` plans remedies for the
same containers lint checks): ``racing``, ``prestop_hook`` and ``has_shell``."""

from svcdoctor.checks import (
    backend,
    balancers,
    images,
    infra,
    inputs,
    live,
    mesh,
    race,
    replicas,
    reuse,
    rollout,
    routes,
    selection,
    shells,
    signals,
)
from svcdoctor.checks._carrying import racing
from svcdoctor.checks._shutdown import has_shell
from svcdoctor.checks.race import prestop_hook
from svcdoctor.checks.registry import DOC_SECTIONS, RULES, Hit, Rule, all_rules, lookup, rule
from svcdoctor.checks.run import LintResult, run_checks
from svcdoctor.checks.settings import Drain, Settings

__all__ = [
    "DOC_SECTIONS",
    "RULES",
    "Drain",
    "Hit",
    "LintResult",
    "Rule",
    "Settings",
    "all_rules",
    "backend",
    "balancers",
    "has_shell",
    "images",
    "infra",
    "inputs",
    "live",
    "lookup",
    "mesh",
    "prestop_hook",
    "race",
    "racing",
    "replicas",
    "reuse",
    "rollout",
    "routes",
    "rule",
    "run_checks",
    "selection",
    "shells",
    "signals",
]
