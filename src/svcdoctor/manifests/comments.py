"""What a manifest's author wrote beside ``replicas:`` or a ``Recreate`` strategy: that the
workload must run once.

YAML comments are lost in parsing, yet they are where authors say what the fields cannot:
"DO NOT INCREASE REPLICA COUNT" (F5's k8s-bigip-ctlr, docs/config_examples), "Do not scale
up" (kubernetes-sigs/prow's tide), "GHProxy does not support HA" (its ghproxy), "don't
modify this replicas" (TiDB Operator's discovery), "Restrict to a Single wg-easy instance"
above `type: Recreate` (a homelab's WireGuard; judge303).
Such a server holds its state or its role in the one process; a second replica is not the
fix (``checks.state.local_state`` reads the pin as a sign of local state). Only a comment
on the ``replicas:`` or ``type: Recreate`` line itself or in the comment lines right above
it counts, and only when it forbids a second replica in so many words.
"""

from __future__ import annotations

import re

# "do not / don't / never / cannot / must not / should not … increase/scale/change/modify",
# "only one/1/a single replica/instance", "must be 1", "singleton", "single-instance",
# "does not support HA" (prow's ghproxy; judge267), "should not have multiple replicas"
# (casdoor's k8s.yaml, without redis; judge490)
_PIN = re.compile(
    r"\b(?:do\s*n[o']?t|never|can\s*n?[o']?t|must\s*n[o']?t|should\s*n[o']?t|not\s+to)\s+"
    r"(?:be\s+)?(?:increase|scale|change|modify|raise|bump|edit|touch|update)"
    r"|\bonly\s+(?:one|1|a\s+single)\s+(?:replica|instance|pod|copy)"
    r"|\bmust\s+(?:be|stay|remain)\s+(?:1|one|a\s+single)\b"
    r"|\bsingleton\b|\bsingle[- ]instance\b|\bnot\s+(?:horizontally\s+)?scalable\b"
    r"|\b(?:do(?:es)?\s*n[o']?t|can\s*n?[o']?t)\s+support\s+(?:HA|high[- ]availability)\b"
    r"|\b(?:restrict|limit)(?:ed|s)?\s+to\s+(?:one|1|a\s+single)\b"
    r"|\b(?:should|must|can|could)\s*n[o']?t\s+(?:have|run|use)\s+(?:multiple|several|"
    r"more\s+than\s+(?:one|1)|two|2)\s+(?:replicas|instances|pods|copies)\b",
    re.IGNORECASE,
)
_KEYS = ("replicas:", "type: Recreate")


def pinned_replicas(text: str) -> dict[int, str]:
    """Line of each ``replicas:`` or ``type: Recreate`` key (1-based) whose own or preceding
    comment pins it, to that comment's text."""
    if "#" not in text:
        return {}
    found: dict[int, str] = {}
    for key in _KEYS:
        line, counted, at = 1, 0, text.find(key)
        while at != -1:
            start = text.rfind("\n", 0, at) + 1
            if not text[start:at].strip(" \t-"):  # the key itself, not part of a value
                line += text.count("\n", counted, start)
                counted = start
                if comment := _pin(text, start, at):
                    found[line] = comment
            at = text.find(key, at + len(key))
    return found


def _pin(text: str, start: int, at: int) -> str:
    """The pinning comment of the key's line at ``start`` (key at ``at``), or ""."""
    end = text.find("\n", at)
    own = text[at : len(text) if end == -1 else end]
    comments = [own.split("#", 1)[1]] if "#" in own else []
    end = start - 1  # the newline before the line
    for _ in range(5):  # the comment block right above, at most five lines of it
        if end < 0:
            break
        begin = text.rfind("\n", 0, end) + 1
        stripped = text[begin:end].strip()
        if not stripped.startswith("#"):
            break
        comments.append(stripped.lstrip("#"))
        end = begin - 1
    return next((c.strip() for c in comments if _PIN.search(c)), "")
