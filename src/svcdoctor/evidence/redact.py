"""Redaction: what a bundle must not carry, replaced by ``REDACTED`` (pure, but ``Redactor``).

Bundles exist to be attached to issues, so ``collect`` and ``rollout-test`` pass every file
they write through a ``Redactor`` (``--no-redact`` keeps everything). Kubernetes objects
(``*.json``, a document or a watch stream) lose:

* env values (names kept; ``valueFrom`` references kept: they hold no secret). A value that
  cannot hold a secret is kept when its name does not look secret: a number, a duration,
  ``true``/``false`` or a listen address (``:8080``), because the rules read such values
  (max connection age, gRPC ports: ``checks/reuse.py``) and the diagnosis must not change;
* secret-looking command and args (``--password=x``, ``--token x``, ``--client-secret``,
  ``DB_PASSWORD=x`` in a script) and ``httpGet.httpHeaders`` credentials of probes;
* the ``kubectl.kubernetes.io/last-applied-configuration`` annotation (a copy of the whole
  object as applied, env values included), and annotations named like a secret;
* in every other string, what log lines lose.

Log lines (any other file) lose, in place, with everything around them untouched (times,
statuses, addresses, durations: diagnose reads the same rows): Authorization,
Proxy-Authorization, Cookie and Set-Cookie values (``authorization: Bearer x``,
``"authorization":"…"``, ``cookie="…"``, a bare ``Bearer x`` as nginx's
``"$http_authorization"`` writes it; the scheme is kept), passwords in URLs
(``postgres://u:pw@h``: the user is kept), token parameters of URLs (``token=``,
``access_token=``, ``api_key=``, ``sig=``, ``X-Amz-Signature=`` …), fields named like a
secret (``password=…``, ``"client_secret": "…"``) and JWT-shaped strings anywhere.

Counts, never values: each ``Kind`` is counted per occurrence.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

PLACEHOLDER = "REDACTED"
# https://kubernetes.io/docs/reference/labels-annotations-taints/
# #kubectl-kubernetes-io-last-applied-configuration
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class Kind(StrEnum):
    """What was redacted (the key of the bundle's counts)."""

    ENV = "env values"
    ARGS = "command arguments"
    LAST_APPLIED = "last-applied-configuration"
    AUTHORIZATION = "authorization headers"
    COOKIES = "cookies"
    URL_PASSWORDS = "URL passwords"
    URL_TOKENS = "URL tokens"
    SECRET_FIELDS = "secret fields"
    JWTS = "JWTs"


@dataclass(frozen=True, slots=True)
class Redaction:
    """A text with its secrets replaced, and how many of each kind were."""

    text: str
    counts: Mapping[Kind, int]


# ---------------------------------------------------------------- shapes

# A value after ``name: ``/``name=``/``"name":``/``\"name\":`` (Docker's json-file log
# escapes the quotes): quoted (to the matching quote, escapes honoured) or bare.
_SEP = r"(?P<sep>(?:\\?\")?\s*[:=]\s*)"
_QUOTED = r"\"(?P<q1>(?:[^\"\\]|\\.)*)\"|\\\"(?P<q2>(?:[^\"\\]|\\[^\"])*)\\\""
# Authentication schemes: IANA HTTP Authentication Scheme Registry
# (https://www.iana.org/assignments/http-authschemes), plus GitHub's ``token`` and AWS
# SigV4's ``AWS4-HMAC-SHA256`` (https://docs.aws.amazon.com/IAM/latest/UserGuide/
# reference_sigv-create-signed-request.html)
_SCHEMES = (
    r"(?:Basic|Bearer|Concealed|Digest|DPoP|GNAP|HOBA|Mutual|Negotiate|NTLM|OAuth|PrivateToken"
    r"|SCRAM-SHA-1|SCRAM-SHA-256|vapid|token|ApiKey|AWS4-HMAC-SHA256)"
)
_SCHEME = re.compile(rf"(?i){_SCHEMES}\s+")
# Authorization and Proxy-Authorization (RFC 9110 §11.6.2, §11.7.2), the common API-key
# headers; as nginx variables (``$http_proxy_authorization``) or in JSON logs with a prefix
_AUTH_NAMES = r"(?:proxy[-_])?authorization|x[-_]api[-_]key|x[-_]auth[-_]token"
_COOKIE_NAMES = r"(?:set[-_])?cookie"  # RFC 6265 §4.1 (Set-Cookie), §4.2 (Cookie)
# A bare credential: the scheme, then a token or comma-separated parameters (Digest, SigV4)
_BARE_AUTH = rf"(?:{_SCHEMES}\s+)?[^\s\"\\,&]+(?:,\s*[\w-]+=[^\s\"\\,&]*)*"
_BARE_COOKIE = r"[^\s;,\"\\]+(?:;[ ]?[^\s;,\"\\]+)*"  # cookie-octets (RFC 6265 §4.1.1)
# Set-Cookie's attributes (RFC 6265 §4.1.1, SameSite and Partitioned from RFC 6265bis)
_COOKIE_ATTRIBUTES = frozenset(
    {"expires", "max-age", "domain", "path", "secure", "httponly", "samesite", "partitioned"}
)
_AUTH = re.compile(rf"(?i)(?P<name>{_AUTH_NAMES}){_SEP}(?:{_QUOTED}|(?P<bare>{_BARE_AUTH}))")
_COOKIE = re.compile(rf"(?i)(?P<name>{_COOKIE_NAMES}){_SEP}(?:{_QUOTED}|(?P<bare>{_BARE_COOKIE}))")
# A credential with no header name (nginx ``"$http_authorization"``, Envoy
# ``"%REQ(AUTHORIZATION)%"``): Bearer tokens (RFC 6750 §2.1) of 8+ characters, Basic
# credentials (RFC 7617) that decode to ``user:password``
_BARE_CREDENTIAL = re.compile(r"\b(?P<scheme>Bearer|Basic)\s+(?P<cred>[A-Za-z0-9._~+/-]+=*)")
# userinfo with a password (RFC 3986 §3.2.1), as in DSNs: postgres://user:pw@host
_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:\"'\\]*:)(?P<pw>[^\s/?#@\"'\\]+)@"
)
# Query parameters that carry credentials: OAuth 2.0 (RFC 6749 §4.1.2 code, RFC 6750 §2.3
# access_token), AWS SigV4 presigned URLs (https://docs.aws.amazon.com/AmazonS3/latest/API/
# sigv4-query-string-auth.html), GCS signed URLs (https://cloud.google.com/storage/docs/
# authentication/signatures), Azure SAS ``sig`` (https://learn.microsoft.com/en-us/rest/api/
# storageservices/create-service-sas), Google API keys (``key``)
_URL_TOKEN = re.compile(
    r"(?i)(?P<head>[?&;](?:(?:access|id|refresh|auth)[_-]?token|token|api[_-]?key|apikey|key"
    r"|sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature"
    r"|x-goog-credential|password|passwd|secret|client[_-]?secret|code|jwt|session[_-]?id)=)"
    r"(?P<value>[^&\s\"'#\\;]+)"
)
# A field named like a secret: ``password=x``, ``"client_secret": "x"``, ``DB_PASSWORD=x``
_SECRET_WORD = (
    r"password|passwd|passphrase|secret|token|credentials?|api[_-]?key|apikey"
    r"|(?:access|secret|private|signing|encryption|master|client)[_-]?key"
)
_SECRET_WORDS = rf"(?:{_SECRET_WORD})"
_SECRET_FIELD = re.compile(
    rf"(?i)(?P<name>{_SECRET_WORDS}){_SEP}(?:{_QUOTED}|(?P<bare>[^\s\"\\,;&]+))"
)
# A command-line flag named like a secret, with its value (``--password=x``, ``--token x``)
_FLAG_NAME = rf"--?(?:[\w.-]*[-_.])?(?:{_SECRET_WORD}|pass|auth)"
_FLAG_ALONE = re.compile(rf"(?i){_FLAG_NAME}")
_FLAG = re.compile(
    rf"(?i)(?<![\w-])(?P<flag>{_FLAG_NAME})(?P<sep>=|\s+)(?!-)"
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s\"'\\]+)"
)
# RFC 7519: base64url(JSON header).base64url(JSON claims).signature; ``eyJ`` is ``{"``
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")
# env values that cannot hold a secret: numbers, durations, booleans, listen addresses
_PLAIN = re.compile(
    r"(?i)-?\d{1,6}(?:\.\d+)?|(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|d))+|true|false|yes|no|on"
    r"|off|(?:\[[0-9a-f:]*\]|[0-9.]*|localhost|\*)?:\d{1,5}"
)
# a name segment that says the value is secret (``DB_PASS``, ``API_KEY``, ``PIN``)
_SECRET_NAME = re.compile(
    r"(?i)(?:^|[_.-])(?:password|passwd|passphrase|pass|pwd|pin|secret|token|key|apikey|auth"
    r"|credentials?|dsn)(?:$|[_.-])"
)
_EMPTY = frozenset({"", "-", "null", "none"})  # what proxies log for an absent header


# ---------------------------------------------------------------- text


def _value_of(m: re.Match[str]) -> tuple[str, str | None]:
    """The matched value and which group holds it."""
    for group in ("q1", "q2", "bare"):
        if m[group] is not None:
            return m[group], group
    return "", None


def _keep_scheme(value: str) -> str:
    scheme = _SCHEME.match(value)
    return (scheme[0] if scheme else "") + PLACEHOLDER


def _cookies(value: str) -> str:
    """Each cookie's value replaced, names and Set-Cookie's attributes kept."""
    pairs = []
    for pair in value.split(";"):
        name, eq, _ = pair.partition("=")
        keep = not eq or name.strip().lower() in _COOKIE_ATTRIBUTES
        pairs.append(pair if keep else f"{name}={PLACEHOLDER}")
    return ";".join(pairs) if "=" in value else PLACEHOLDER


def _hidden(kind: Kind, value: str) -> str:
    """What replaces a value: a credential keeps its scheme, cookies their names."""
    if kind is Kind.AUTHORIZATION:
        return _keep_scheme(value)
    if kind is Kind.COOKIES:
        return _cookies(value)
    return PLACEHOLDER


def _named(pattern: re.Pattern[str], kind: Kind, text: str, counts: Counter[Kind]) -> str:
    """Replace the value of each ``name: value`` the pattern finds (the scheme of a
    credential kept); empty and ``-`` values are left."""

    def sub(m: re.Match[str]) -> str:
        value, group = _value_of(m)
        if group is None or value.strip().lower() in _EMPTY or PLACEHOLDER in value:
            return m[0]
        counts[kind] += 1
        new = _hidden(kind, value)
        start, end = m.span(group)
        return m[0][: start - m.start()] + new + m[0][end - m.start() :]

    return pattern.sub(sub, text)


def _bare_credential(m: re.Match[str], counts: Counter[Kind]) -> str:
    cred = m["cred"]
    if cred == PLACEHOLDER or len(cred) < 8:
        return m[0]
    if m["scheme"] == "Basic":
        try:
            if b":" not in base64.b64decode(cred, validate=True):
                return m[0]
        except (binascii.Error, ValueError):
            return m[0]
    counts[Kind.AUTHORIZATION] += 1
    return f"{m['scheme']} {PLACEHOLDER}"


def _replace(
    pattern: re.Pattern[str], group: str | int, kind: Kind, text: str, counts: Counter[Kind]
) -> str:
    def sub(m: re.Match[str]) -> str:
        if m[group] == PLACEHOLDER:
            return m[0]
        counts[kind] += 1
        start, end = m.span(group)
        return m[0][: start - m.start()] + PLACEHOLDER + m[0][end - m.start() :]

    return pattern.sub(sub, text)


_URL_TOKEN_WORDS = ("token=", "key=", "sig=", "signature=", "credential=", "password=",
                    "passwd=", "secret=", "code=", "jwt=", "session")  # fmt: skip
_Scrubber = Callable[[str, Counter[Kind]], str]
_Rule = tuple[tuple[str, ...], _Scrubber]
# Each scrubber, after the lower-case words one of which a line must hold for it to run (a
# plain substring test: the patterns cost ~0.1 µs a character, most lines hold none of
# them). Headers first, so a Bearer JWT counts as a header.
_SCRUBBERS: tuple[_Rule, ...] = (
    (
        ("authorization", "api-key", "api_key", "auth-token", "auth_token"),
        lambda t, c: _named(_AUTH, Kind.AUTHORIZATION, t, c),
    ),
    (("cookie",), lambda t, c: _named(_COOKIE, Kind.COOKIES, t, c)),
    (("bearer", "basic"), lambda t, c: _BARE_CREDENTIAL.sub(lambda m: _bare_credential(m, c), t)),
    (("@",), lambda t, c: _replace(_USERINFO, "pw", Kind.URL_PASSWORDS, t, c)),
    (
        _URL_TOKEN_WORDS,
        lambda t, c: _replace(_URL_TOKEN, "value", Kind.URL_TOKENS, t, c),
    ),
    (
        ("password", "passwd", "passphrase", "secret", "token", "credential", "key"),
        lambda t, c: _named(_SECRET_FIELD, Kind.SECRET_FIELDS, t, c),
    ),
    (("eyj",), lambda t, c: _replace(_JWT, 0, Kind.JWTS, t, c)),
)


def _scrub_line(line: str, counts: Counter[Kind], scrubbers: Iterable[_Rule]) -> str:
    for words, scrub in scrubbers:
        low = line.lower()
        if any(w in low for w in words):
            line = scrub(line, counts)
    return line


def _scrub(text: str, counts: Counter[Kind]) -> str:
    """Every text scrubber in turn, line by line (a value never runs across lines)."""
    low = text.lower()
    wanted = [s for s in _SCRUBBERS if any(w in low for w in s[0])]
    if not wanted:
        return text
    if "\n" not in text:
        return _scrub_line(text, counts, wanted)
    return "\n".join(_scrub_line(line, counts, wanted) for line in text.split("\n"))


def redact_text(text: str) -> Redaction:
    """A log (any text) with its secrets replaced; lines and everything else unchanged."""
    counts: Counter[Kind] = Counter()
    return Redaction(_scrub(text, counts), dict(counts))


# ---------------------------------------------------------------- objects


def _command(words: list[Any], counts: Counter[Kind]) -> list[Any]:
    """A command or args list: a secret flag's value (``--token x``: the next word; or
    ``--token=x`` and flags inside scripts), then the text scrubbers on every word."""
    out: list[Any] = []
    hide_next = False
    for word in words:
        if not isinstance(word, str):
            out.append(word)
            continue
        if hide_next and not word.startswith("-") and word != PLACEHOLDER:
            counts[Kind.ARGS] += 1
            out.append(PLACEHOLDER)
            hide_next = False
            continue
        hide_next = _FLAG_ALONE.fullmatch(word) is not None
        out.append(_scrub(_replace(_FLAG, "value", Kind.ARGS, word, counts), counts))
    return out


def _named_values(
    entries: list[Any], counts: Counter[Kind], hide: Callable[[str, str], tuple[Kind, str] | None]
) -> list[Any]:
    """A list of ``{name, value}`` (env, probe headers): the values ``hide`` replaces."""
    out: list[Any] = []
    for entry in entries:
        value = entry.get("value") if isinstance(entry, dict) else None
        if isinstance(value, str) and value.strip() and PLACEHOLDER not in value:
            found = hide(str(entry.get("name", "")), value)
            if found is not None:
                counts[found[0]] += 1
                entry = {**entry, "value": found[1]}  # noqa: PLW2901
        out.append(_walk(entry, counts))
    return out


def _env_value(name: str, value: str) -> tuple[Kind, str] | None:
    if _PLAIN.fullmatch(value.strip()) and not _SECRET_NAME.search(name):
        return None
    return Kind.ENV, PLACEHOLDER


def _header_value(name: str, value: str) -> tuple[Kind, str] | None:
    for names, kind in ((_AUTH_NAMES, Kind.AUTHORIZATION), (_COOKIE_NAMES, Kind.COOKIES)):
        if re.fullmatch(names, name, re.IGNORECASE):
            return kind, _hidden(kind, value)
    return None


def _annotations(notes: dict[str, Any], counts: Counter[Kind]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in notes.items():
        last = key.rsplit("/", 1)[-1]
        if not isinstance(value, str) or not value or value == PLACEHOLDER:
            out[key] = value
        elif key == LAST_APPLIED:
            counts[Kind.LAST_APPLIED] += 1
            out[key] = PLACEHOLDER
        elif re.fullmatch(rf"(?i)(?:[\w.-]*[-_.])?{_SECRET_WORDS}", last):
            counts[Kind.SECRET_FIELDS] += 1
            out[key] = PLACEHOLDER
        else:
            out[key] = _scrub(value, counts)
    return out


def _walk(value: Any, counts: Counter[Kind]) -> Any:
    if isinstance(value, str):
        return _scrub(value, counts)
    if isinstance(value, list):
        return [_walk(v, counts) for v in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, list) and key in ("command", "args"):
            out[key] = _command(item, counts)
        elif isinstance(item, list) and key == "env":
            out[key] = _named_values(item, counts, _env_value)
        elif isinstance(item, list) and key == "httpHeaders":
            out[key] = _named_values(item, counts, _header_value)
        elif isinstance(item, dict) and key == "annotations":
            out[key] = _annotations(item, counts)
        else:
            out[key] = _walk(item, counts)
    return out


def redact_object(value: Any) -> tuple[Any, dict[Kind, int]]:
    """A JSON value (Kubernetes objects, a List, watch events) with its secrets replaced
    (a new value; the given one is not changed), and the counts."""
    counts: Counter[Kind] = Counter()
    return _walk(value, counts), dict(counts)


# ---------------------------------------------------------------- files


def redact_file(name: str, text: str) -> Redaction:
    """A bundle file by its name: ``*.json`` as Kubernetes objects (a watch stream of one
    object a line, or one document, written with indent 2 as collect writes it), anything
    else as log text. The text unchanged when nothing was found."""
    if not name.endswith(".json"):
        return redact_text(text)
    lines = text.splitlines()
    try:
        records = [json.loads(line) if line.strip() else None for line in lines]
    except ValueError:
        try:
            doc = json.loads(text)
        except ValueError:
            return redact_text(text)
        new, counts = redact_object(doc)
        return Redaction(json.dumps(new, indent=2) + "\n" if counts else text, counts)
    total: Counter[Kind] = Counter()
    out = []
    for line, record in zip(lines, records, strict=True):
        new, counts = redact_object(record)
        total.update(counts)
        out.append(json.dumps(new, separators=(",", ":")) if counts else line)
    return Redaction("".join(f"{line}\n" for line in out) if total else text, dict(total))


def counts_dict(counts: Mapping[Kind, int]) -> dict[str, int]:
    """The counts as the bundle's JSON holds them: by kind, in ``Kind``'s order, no zeros."""
    return {k.value: counts[k] for k in Kind if counts.get(k)}


def redaction_note(counts: Mapping[str, int] | None) -> str:
    """The one line a command prints about redaction (``counts`` as ``counts_dict`` gives
    them; None: redaction was turned off)."""
    if counts is None:
        return "not redacted (--no-redact): the bundle may hold secrets; do not publish it"
    if not counts:
        return "redacted: nothing secret-looking found"
    shown = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return f"redacted {shown} (as {PLACEHOLDER}; --no-redact keeps them)"


class Redactor:
    """What a command writes, redacted when ``enabled``, with the counts per file written
    (the last write of a path counts; ``moved`` follows a rename)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._counts: dict[Path, dict[Kind, int]] = {}

    def file(self, path: Path, text: str) -> str:
        """``text`` to write to ``path``, redacted by the file's name."""
        if not self.enabled:
            return text
        done = redact_file(path.name, text)
        self._counts[path] = dict(done.counts)
        return done.text

    def moved(self, source: Path, target: Path) -> None:
        if source in self._counts:
            self._counts[target] = self._counts.pop(source)

    def totals(self, paths: Iterable[Path]) -> dict[str, int] | None:
        """The counts over ``paths`` (the bundle's files) as ``counts_dict`` gives them;
        None when redaction is off."""
        if not self.enabled:
            return None
        total: Counter[Kind] = Counter()
        for path in set(paths):
            total.update(self._counts.get(path, {}))
        return counts_dict(total)
