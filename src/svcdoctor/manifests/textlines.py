"""Line access to a file's text: where each line starts, a document's lines around a line,
the first template on a line (the loader's messages about templated and broken files)."""

from __future__ import annotations

import bisect
import itertools
import re

import yaml

_DOCUMENT_START = re.compile(r"---(?:[ \t].*)?")
# A placeholder a script replaces that is never YAML: single braces glued to a value,
# `image: {username}/app:1` (kserve's docs/samples; judge193: a flow mapping cannot go on
# into text), `@NAME@` (autoconf's and sed's: longhorn's dev/scale-test; judge195) or
# `%%NAME%%` (sed's: ssp-operator's functional test template; judge481), or a
# printf verb as the whole value, `name: %s` (Go's fmt.Sprintf: topolvm's e2e testdata;
# judge206), or an UPPER_CASE name glued to a quoted value, text sed puts there
# (`is-kwok: "true"OTHER_LABELS_6_SPACES`: azure-container-networking's test/scale; judge412)
_SCRIPT_PLACEHOLDER = re.compile(
    r"(?<=[:\s])(?:\{[A-Za-z_][\w.-]*\}(?=[^\s,}\]])|@[A-Za-z_][\w-]*@|%%[A-Za-z_][\w-]*%%"
    r"|%[-+# 0-9.]*[sdvqfgxX](?=\s|$))|(?<=\")[A-Z][A-Z0-9]*_[A-Z0-9_]+[ \t]*$",
    re.MULTILINE,
)

# ...or a line that is nothing but a shell variable, text envsubst puts in already indented
# (`${k6_source}` under a block scalar: kyma-project/serverless' tests/performance/templates,
# judge353; `$CONJUR_SSL_CERT`: secrets-store-csi-driver's conjur tests, judge328; Garden's
# `${indent(yamlEncode(var.env), 12)}`, judge454)
# ...or a Jinja statement alone on its line (`{% if x %}`: a docs site's macros), or a
# `<name>` a script replaces with lines (a kubeconfig template's `<server>`; judge412), or an
# UPPER_CASE name a script replaces with lines (`REPLACE_WITH_TLS_CA_BUNDLE_PEM` under a block
# scalar: assisted-service's deploy/; judge463), in sed's `__NAME__` too (maistra's
# build/manifest-templates; judge511), or Gen3's, whose names may hold a `-` and carry a
# default, `GEN3_SOURCE_BUCKET|-value: ""-|` (uc-cdis/cloud-automation's kube/; judge515)
_VARIABLE_LINE = re.compile(
    r"^[ \t]*(?:\$(?:\{[^{}\n]+\}|[A-Za-z_]\w*)|\{%.*?%\}|<[A-Za-z_][\w-]*>"
    r"|_*[A-Z][A-Z0-9]*_[A-Z0-9_-]*[A-Z0-9_](?:\|-[^\n]*?-\|)?)[ \t]*(?:#[^\n]*)?$",
    re.MULTILINE,
)


class TextLines:
    """Line access to a templated file's text (built only for files holding ``{{``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        lengths = (len(line) + 1 for line in text.split("\n")[:-1])
        self.starts = list(itertools.accumulate(lengths, initial=0))

    def offset(self, line: int) -> int:
        """Offset where 1-based ``line`` starts (the end of the text past the last line)."""
        return self.starts[line - 1] if 1 <= line <= len(self.starts) else len(self.text)

    def between(self, first: int, last: int) -> str:
        return self.text[self.offset(first) : self.offset(last + 1)]

    def after(self, line: int) -> str:
        return self.text[self.offset(line + 1) :]

    def first_template(self, first: int, last: int) -> int | None:
        """The line of the first ``{{`` in lines ``first``..``last``."""
        at = self.text.find("{{", self.offset(first), self.offset(last + 1))
        return None if at < 0 else bisect.bisect_right(self.starts, at)

    def first_placeholder(self, first: int, last: int) -> int | None:
        """The line of the first ``{x}`` glued to a value, ``@X@``, printf verb or line of
        a lone ``${VAR}``, in lines ``first``..``last``."""
        text = self.between(first, last)
        starts = [m.start() for p in (_SCRIPT_PLACEHOLDER, _VARIABLE_LINE) if (m := p.search(text))]
        return None if not starts else first + text.count("\n", 0, min(starts))

    def quoted_only(self, first: int, last: int) -> bool:
        """Whether every ``{{`` of lines ``first``..``last`` is in a line that is valid YAML
        by itself (a quoted scalar: Prometheus' alert templates, `message: '{{ $labels.pod }}
        …'`): strings the parser read, so not what broke the document. Helm's
        `"{{ template "x" . }}"` is not one."""
        for n in range(first, last + 1):
            text = self.between(n, n)
            if "{{" not in text:
                continue
            try:
                yaml.safe_load(text.strip().removeprefix("- "))
            except yaml.YAMLError:
                return False
        return True

    def template_at(self, line: int, limit: int = 40) -> str:
        """The first ``{{ … }}`` on ``line`` (else a glued ``{x}``), shortened to ``limit``
        characters."""
        text = self.between(line, line)
        start = text.find("{{")
        if start < 0 and (glued := _SCRIPT_PLACEHOLDER.search(text)):
            return glued.group(0)
        if start < 0 and (variable := _VARIABLE_LINE.search(text)):
            return variable.group(0).strip()
        if start < 0:
            return "{{ … }}"
        end = text.find("}}", start)
        end += 1 if end >= 0 and text[end + 2 : end + 3] == "}" else 0  # Mustache's {{{x}}}
        shown = text[start : end + 2] if end >= 0 else text[start:].rstrip()
        return shown if len(shown) <= limit else shown[: limit - 4] + " …}}"

    def document_around(self, line: int) -> tuple[int, int]:
        """The lines of the document holding ``line``: from after the ``---`` before it to
        the line before the next ``---``. An error reported on a ``---`` line belongs to the
        document that line ends."""
        count = len(self.starts)
        line = min(max(line, 1), count)
        if self._is_start(line) and line > 1:
            line -= 1
        first = line
        while first > 1 and not self._is_start(first):
            first -= 1
        last = line
        while last < count and not self._is_start(last + 1):
            last += 1
        return first, last

    def _is_start(self, line: int) -> bool:
        return bool(_DOCUMENT_START.fullmatch(self.between(line, line).rstrip("\r\n")))
