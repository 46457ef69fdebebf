"""Which shell runs a script, and whether it stays the parent of the script's last command
(SVD105's and SVD116's question, and the Dockerfile entrypoints' of ``checks.images``)."""

from __future__ import annotations

import re

from svcdoctor.checks._serving import Script, ash_execs_last

# What /bin/sh is, by image family (checked against the real shells in
# tests/checks/test_shell_exec.py): busybox ash on Alpine and busybox images, dash on Debian
# and Ubuntu images, bash on the Red Hat family.
_ASH_IMAGES = re.compile(
    r"alpine|busybox|(^|/)curlimages/|distroless/.*:debug|(^|/)(traefik|bash|docker)(:|$)"
)
_BASH_IMAGES = re.compile(
    r"(^|/)(centos|fedora|rockylinux|almalinux|ubi\d*(-\w+)?|amazonlinux|oraclelinux|"
    r"amazoncorretto|photon|archlinux)(:|@|$)|(^|/)(redhat|rhel\d*|opensuse|fedora)/"
)
_DASH_IMAGES = re.compile(
    r"debian|ubuntu|bookworm|bullseye|buster|trixie|jammy|focal|noble|-slim\b|(^|/)bitnami/"
    r"|^(docker\.io/)?(library/)?(python|node|golang|nginx|redis|postgres|mysql|mariadb|ruby|"
    r"php|httpd|openjdk|eclipse-temurin|rabbitmq|mongo|memcached|haproxy|gradle|maven|"
    r"elixir|erlang|rust|perl|tomcat|jetty|wordpress|ghost|nextcloud)(:|@|$)"
)


def shell_family(shell: str, image: str) -> str | None:
    """``bash``, ``dash`` or ``ash``: the shell that runs a ``-c`` script, from the command's
    interpreter and, for ``sh``, the image family; ``None`` when unknown."""
    if shell in ("bash", "dash", "ash"):
        return shell
    if shell != "sh":
        return None  # zsh, ksh: not checked against the real shell
    if _ASH_IMAGES.search(image):
        return "ash"
    if _BASH_IMAGES.search(image):
        return "bash"
    if _DASH_IMAGES.search(image):
        return "dash"
    return None


def stays_parent(family: str | None, script: Script) -> bool:
    """Whether the shell keeps running as the parent of the script's last command (so
    SIGTERM, sent to the shell as PID 1, never reaches the app).

    An explicit ``exec`` replaces the shell in every shell. A lone simple command is exec'd
    by bash unless it has a redirection or is followed by more than one newline, and by
    busybox ash unless anything (a newline included) follows it; dash never does; ash also
    execs the last of some lists (``ash_execs_last``). Other lists, pipelines, background
    jobs and compound commands count as kept: bash >= 5.1 execs the last command of some
    lists, dash and older bash do not. Unknown shells count as dash."""
    last = script.last
    if last is None:
        return False
    if last.execs and last.before not in ("|", "|&") and last.after not in ("|", "|&", "&"):
        return False
    if not script.lone:
        return not (family == "ash" and ash_execs_last(script))
    if family == "bash":
        return last.redirected or script.trailing_newlines > 1
    if family == "ash":
        return script.trailing_newlines > 0
    return True
