"""How a shell runs a ``-c`` script or a script file: its simple commands, the operators
between them, and whether it ends in a compound command (the facts SVD105, SVD116, SVD117
and the serving checks decide on). Pure text: no Kubernetes objects."""

from __future__ import annotations

import re
from dataclasses import dataclass

SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "ksh", "mksh"})
# Wrappers that run their arguments: look through them for the program.
_WRAPPERS = frozenset({"tini", "dumb-init", "busybox", "nohup", "exec", "command", "catatonit"})
_KEYWORDS = frozenset({"if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"})
_CLOSERS = frozenset({"fi", "done", "}", "esac", "for", "case", "in", ";;", "function"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_POSITIONAL = re.compile(r"\$(?:[@*1-9]|\{[@*1-9#])")


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command of a script: its words (quotes removed) and whether it redirects."""

    words: tuple[str, ...]
    redirected: bool = False
    before: str = ""  # the operator that precedes it ("" at the start)
    after: str = ""  # the operator that follows it ("" at the end)
    start: int = 0  # index of its first character in the script

    @property
    def program(self) -> str | None:
        """The program it runs (path stripped), looking past keywords, ``VAR=x``, ``exec``
        and init wrappers; ``None`` for loop/case headers and closers."""
        words = list(self.words)
        while words and (words[0] in _KEYWORDS or ASSIGNMENT.match(words[0])):
            words.pop(0)
        while words and words[0].rsplit("/", 1)[-1] in _WRAPPERS:
            words.pop(0)
            while words and words[0].startswith("-"):
                words.pop(0)
        if not words or words[0] in _CLOSERS:
            return None
        return words[0].rsplit("/", 1)[-1]

    @property
    def execs(self) -> bool:
        words = [w for w in self.words if not ASSIGNMENT.match(w)]
        while words and words[0] in _KEYWORDS:
            words.pop(0)
        return bool(words) and words[0] == "exec" and len(words) > 1


@dataclass(frozen=True, slots=True)
class Script:
    """A ``-c`` script reduced to what decides whether the shell stays the app's parent."""

    text: str
    commands: tuple[SimpleCommand, ...]
    compound: bool  # if/while/for/case, braces or a subshell
    trailing_newlines: int  # newlines after the last word (comments skipped)
    positional: bool  # runs "$@" / $1…: the program comes from the arguments

    @property
    def lone(self) -> bool:
        """One simple command, no list, pipe, background job or compound command."""
        return len(self.commands) == 1 and not self.compound and self.commands[0].after != "&"

    @property
    def last(self) -> SimpleCommand | None:
        return self.commands[-1] if self.commands else None


def ash_execs_last(script: Script) -> bool:
    """Whether busybox ash execs the last command of a ``-c`` list (after `&&`, `||`, `;` or
    a line, nothing after it): ``evalstring(minusc, EV_EXIT)`` in
    https://git.busybox.net/busybox shell/ash.c evaluates that command with EV_EXIT (``evaltree``
    passes it to the right side of NAND and NOR alike), and ``evalcommand`` then forks not."""
    last = script.last
    ends = script.trailing_newlines == 0 and not script.compound
    return ends and last is not None and last.after == "" and last.before in ("&&", "||", ";", "\n")


def bash_execs_last(script: Script) -> bool:
    """Whether bash 5.1 or later execs the last command of a ``-c`` list (after `&&`, `||`,
    `;` or a line; not in a block, a subshell or a pipeline; no redirection; at most one
    newline after it), as ``can_optimize_connection`` in builtins/evalstring.c does since
    bash 5.1 (CHANGES: "bash attempts to optimize the number of times it forks when
    executing commands in subshells and from `bash -c'")."""
    last = script.last
    return (
        last is not None
        and bool(last.words)
        and last.words[0] not in _CLOSERS | {")"}
        and not last.redirected
        and last.before in ("&&", "||", ";", "\n")
        and last.after in ("", ";", "\n")
        and script.trailing_newlines <= 1
    )


def shell_script(argv: tuple[str, ...] | list[str]) -> tuple[str, str] | None:
    """``(shell, script)`` when ``argv`` is ``SHELL [options] -c SCRIPT [arg0 args…]``
    (``-c`` may be clustered, ``-ec``, ``-lc``); arguments after the script are ``$0``,
    ``$1``…, not part of it."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in SHELLS:
        return None
    shell = argv[0].rsplit("/", 1)[-1]
    command_mode = False
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if word.startswith("--"):
            i += 1
            continue
        if len(word) > 1 and word[0] in "-+":
            command_mode = command_mode or (word[0] == "-" and "c" in word[1:])
            i += 1
            continue
        break
    if not command_mode or i >= len(argv):
        return None
    return shell, argv[i]


def parse_script(text: str) -> Script:
    """Split a POSIX shell script into simple commands, honouring quotes, ``$(…)``,
    backquotes, comments and redirections (enough to find the commands, not a full parser)."""
    commands: list[SimpleCommand] = []
    words: list[str] = []
    word: list[str] | None = None
    redirected = False
    target = False  # the next word is a redirection target
    compound = False
    before = ""
    newlines = 0
    start = 0
    i, n = 0, len(text)

    def end_word() -> None:
        nonlocal word, target
        if word is not None:
            if target:
                target = False
            else:
                words.append("".join(word))
            word = None

    def begin(at: int) -> list[str]:
        nonlocal start
        if word is None and not words and not redirected:
            start = at
        return word or []

    def end_command(op: str) -> None:
        nonlocal words, redirected, before
        end_word()
        if words:
            commands.append(SimpleCommand(tuple(words), redirected, before, op, start))
            before = op
        elif op in ("&&", "||", "|"):
            before = op
        words, redirected = [], False

    def scan(start: int, close: str, open_: str = "") -> int:
        """Index just past the ``close`` that ends a quoted or nested part from ``start``."""
        depth, j = 1, start
        while j < n:
            ch = text[j]
            if ch == "\\" and close != "'":
                j += 2
                continue
            if open_ and ch == open_:
                depth += 1
            elif ch == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return n

    while i < n:
        ch = text[i]
        if ch in " \t\r":
            end_word()
            i += 1
            continue
        if ch == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2
                continue
            word = [*begin(i), text[i + 1 : i + 2]]
            newlines = 0
            i += 2
            continue
        if ch == "#" and word is None:
            while i < n and text[i] != "\n":
                i += 1
            continue
        newlines = newlines + 1 if ch == "\n" else (newlines if ch in ";&|" else 0)
        if ch in "'\"`":
            j = scan(i + 1, ch)
            word = [*begin(i), text[i + 1 : j - 1]]
            i = j
            continue
        if ch == "$" and text[i + 1 : i + 2] in ("(", "{"):
            opener = text[i + 1]
            j = scan(i + 2, ")" if opener == "(" else "}", opener)
            word = [*begin(i), text[i:j]]
            i = j
            continue
        if ch in "<>" or (ch == "&" and text[i + 1 : i + 2] == ">"):
            if word is not None and "".join(word).isdigit():
                word = None  # 2>&1: the fd number belongs to the redirection
            end_word()
            j = i + 1
            while j < n and text[j] in "<>&|-":
                j += 1
            while j < n and text[j].isdigit() and text[j - 1] == "&":
                j += 1
            redirected = True
            target = not text[i:j].endswith("&") and not text[j - 1].isdigit()
            i = j
            continue
        if ch in ";&|\n()":
            if ch in "()":
                compound = True
                end_command(ch)
                i += 1
                continue
            op = text[i : i + 2] if text[i : i + 2] in ("&&", "||", ";;", "|&") else ch
            end_command(op)
            i += len(op)
            continue
        word = [*begin(i), ch]
        i += 1
    end_command("")
    if any(c.words[0] in _KEYWORDS | _CLOSERS for c in commands):
        compound = True
    return Script(
        text=text,
        commands=tuple(commands),
        compound=compound,
        trailing_newlines=newlines,
        positional=bool(_POSITIONAL.search(text)),
    )
