"""PID-1 checks (``SVD116``): a runtime that is PID 1 and installs no SIGTERM handler
never hears the kubelet's SIGTERM."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from svcdoctor.checks._carrying import racing
from svcdoctor.checks._scripts import ASSIGNMENT, parse_script, shell_script
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.checks.shells import shell_family, stays_parent
from svcdoctor.model import Cause, Container, Inventory, Severity
from svcdoctor.model.images import NEXT_STANDALONE
from svcdoctor.model.patch import note

# Inits that forward signals to the app and reap children (https://github.com/krallin/tini,
# https://github.com/Yelp/dumb-init, https://github.com/openSUSE/catatonit).
_INITS = frozenset({"tini", "tini-static", "dumb-init", "catatonit"})
# Programs that replace themselves with the command they are given (execve): the command
# is PID 1 after them. `gosu`/`su-exec` take a user first.
_EXECS = frozenset({"env", "exec", "nice", "chpst", "setpriv"})
_EXECS_AS_USER = frozenset({"gosu", "su-exec"})
_NODE = re.compile(r"^(node|nodejs)$")
_PHP = re.compile(r"^php(\d+(\.\d+)?)?$")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
# Servers run with `python -m` that install their own SIGTERM handler: gunicorn (TERM is a
# graceful shutdown, https://docs.gunicorn.org/en/stable/signals.html), uvicorn (handles
# SIGINT and SIGTERM, uvicorn/server.py HANDLED_SIGNALS), celery (TERM is a warm shutdown,
# https://docs.celeryq.dev/en/stable/userguide/workers.html#stopping-the-worker), vLLM (its
# OpenAI server runs under uvicorn: serve_http in vllm/entrypoints/launcher.py).
_HANDLING_MODULES = frozenset({"gunicorn", "uvicorn", "celery", "vllm"})
_PYTHON_OPTION_WITH_VALUE = frozenset({"-X", "-W", "-Q"})
_NODE_INLINE = frozenset({"-e", "--eval", "-p", "--print", "-i", "--interactive"})
# What installs a SIGTERM handler in the app file: the signal's name in Node
# (process.on('SIGTERM', …): https://nodejs.org/api/process.html#signal-events) or Python
# (signal.signal(signal.SIGTERM, …)), or a server that installs one: uvicorn.run
# (HANDLED_SIGNALS in uvicorn/server.py), gunicorn (https://docs.gunicorn.org/en/stable/
# signals.html), aiohttp's web.run_app (GracefulExit on SIGTERM, aiohttp/web.py), and Node's
# @godaddy/terminus, http-terminator and lightship (their READMEs).
# (Quart's app.run serves with Hypercorn, which stops on SIGTERM: quart/app.py in pallets/quart;
# Flask's app.run with debug=True serves under Werkzeug's reloader, which exits at SIGTERM:
# run_with_reloader's signal.signal(SIGTERM, …) in werkzeug/_reloader.py)
HANDLES = re.compile(
    r"SIGTERM|uvicorn\.run|gunicorn|run_app\(|@godaddy/terminus|http-terminator|lightship"
    r"|\bQuart\(|\.run\([^)]*\b(debug|use_reloader)\s*=\s*True"
)

# Apps whose framework installs the handler, by the script node runs: Backstage's backend
# (`node packages/backend`, its Dockerfile's CMD), whose BackendInitializer registers a
# SIGTERM listener that stops every plugin (packages/backend-app-api/src/wiring/
# BackendInitializer.ts in backstage/backstage; cnoe-io/stacks, judge414)
_HANDLING_SCRIPTS = re.compile(r"(\./)?packages/backend/?")
# Next.js' server (`next start`, and the standalone output's `server.js`) closes and exits at
# SIGTERM unless NEXT_MANUAL_SIG_HANDLE is set (https://nextjs.org/docs/app/guides/self-hosting
# #manual-graceful-shutdowns): an image whose Dockerfile copies the standalone output in, or
# a known one built so (gethomepage/homepage's Dockerfile; rrumana/k8s-cluster, judge444)
_NEXT_IMAGES = re.compile(r"(^|/)gethomepage/homepage(:|@|$)")
_NEXT_MANUAL = "NEXT_MANUAL_SIG_HANDLE"


@dataclass(frozen=True, slots=True)
class Pid1:
    """What runs as PID 1: the runtime (``node``, ``python``, ``npm``, ``yarn``) and the
    first words of its command, shown in the finding."""

    runtime: str
    shown: str
    shell: str = ""  # the shell that is PID 1 now and stays the app's parent (SVD105's)
    script: str = ""  # the app file node or python runs, as the command names it


def pid1_runtime(container: Container, base: str = "") -> Pid1 | None:
    """The runtime the container's visible ``command``/``args`` make PID 1, when it is one
    that installs no SIGTERM handler by default (Node, Python) or that runs the app as a
    child without waiting for its shutdown (npm, yarn); ``None`` otherwise, or when the
    command is the image's (not in the manifest). ``base``: ``Inventory.image_base``."""
    argv = [*container.command, *container.args]
    found = shell_script(argv)
    if found is not None:
        shell, text = found
        script = parse_script(text)
        last = script.last
        if last is None or any(c.program == "trap" for c in script.commands):
            return None
        # a shell that stays the app's parent is SVD105's; the runtime becomes PID 1 once
        # it execs the app (SVD105's fix), and is told here so that the fix is not half one
        parent = stays_parent(shell_family(shell, container.image, base), script)
        runtime = _runtime(_unwrapped(list(last.words)), container.image, base)
        return replace(runtime, shell=shell) if runtime and parent else runtime
    return _runtime(_unwrapped(argv), container.image, base)


def _runtime(argv: list[str], image: str, base: str) -> Pid1 | None:
    """The PID-1 runtime ``argv`` starts, if one that does not act on SIGTERM by itself."""
    if not argv:
        return None
    program = argv[0].rsplit("/", 1)[-1]
    shown = " ".join(argv[:3])
    if _NODE.match(program):
        inline = any(a in _NODE_INLINE or a.startswith("--eval=") for a in argv[1:])
        files = [a for a in argv[1:] if not a.startswith("-")]
        return Pid1("node", shown, script=files[0]) if files and not inline else None
    if _PYTHON.match(program):
        return _python(argv, shown)
    if _PHP.match(program) and "-S" in argv[1:]:
        return Pid1("php", shown)
    if program in ("npm", "yarn") and len(argv) > 1 and argv[1] in ("start", "run", "run-script"):
        if program == "npm" and shell_family("sh", image, base) == "ash":
            return None  # npm passes SIGTERM to `sh -c`, and busybox ash execs the app
        return Pid1(program, shown)
    return None


def _unwrapped(argv: list[str]) -> list[str]:
    """The argv after ``exec``, ``env VAR=x``, ``gosu user`` and the like (they exec what
    follows); ``[]`` when an init (tini, dumb-init) is in front."""
    words = list(argv)
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    while words:
        name = words[0].rsplit("/", 1)[-1]
        if name in _INITS:
            return []
        if name in _EXECS:
            words = words[1:]
            while words and (words[0].startswith("-") or ASSIGNMENT.match(words[0])):
                words = words[1:]
        elif name in _EXECS_AS_USER:
            words = words[2:]
        else:
            break
    return words


def _python(argv: list[str], shown: str) -> Pid1 | None:
    """Python running a script or a module (``-m``); not a module that handles SIGTERM, nor
    Django's ``manage.py runserver`` under its autoreloader, whose ``run_with_reloader``
    exits at SIGTERM (django/utils/autoreload.py, since Django 2.2)."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        option = argv[i]
        if option == "-m":
            module = argv[i + 1].split(".", 1)[0] if i + 1 < len(argv) else ""
            return None if not module or module in _HANDLING_MODULES else Pid1("python", shown)
        if option == "-c":
            return None  # inline code: nothing to tell
        i += 2 if option in _PYTHON_OPTION_WITH_VALUE else 1
    script = argv[i : i + 2]
    if script[:1] and script[0].endswith("manage.py") and script[1:] == ["runserver"]:
        return None if "--noreload" not in argv else Pid1("python", shown)  # its reloader exits
    return Pid1("python", shown, script=argv[i]) if i < len(argv) else None


def unhandled_pid1(inventory: Inventory, c: Container) -> Pid1 | None:
    """``pid1_runtime``, unless the app file it runs, found in the image's build context in
    the repository, installs a SIGTERM handler (``HANDLES``: a Flask app run with debug=True
    in kubernetes-engine-samples' docs-embedder; judge231), or is a framework's that does
    (``_HANDLING_SCRIPTS``; Next.js' ``server.js``, ``_NEXT_IMAGES``), or the manifest's own
    script writes the app with one (a heredoc's `signal.signal(signal.SIGTERM, …)`:
    console-operator's downloads server; judge274)."""
    facts = inventory.images.get(c.image)
    found = pid1_runtime(c, inventory.image_base(c.image))
    if found is None or HANDLES.search("\n".join((*c.command, *c.args))):
        return None
    if _HANDLING_SCRIPTS.fullmatch(found.script):
        return None
    next_server = (facts is not None and facts.framework == NEXT_STANDALONE) or bool(
        _NEXT_IMAGES.search(c.image.split("@", 1)[0])
    )
    if next_server and found.script.endswith("server.js") and _NEXT_MANUAL not in dict(c.env):
        return None
    file = facts.file(found.script) if facts is not None and found.script else None
    return None if file is not None and HANDLES.search(file.text) else found


_WHY = {
    "node": "Node installs no SIGTERM handler by default and the kernel gives PID 1 no "
    "default action",
    "python": "Python installs no SIGTERM handler by default and the kernel gives PID 1 no "
    "default action",
    "npm": "npm passes SIGTERM to the `sh -c` it runs the script in, and sh here is dash or "
    "of unknown family, which stays the app's parent and does not pass it on",
    "yarn": "yarn passes SIGTERM on but exits without waiting for the app, and the container "
    "ends with it",
    # sapi/cli/php_cli_server.c installs a handler for SIGINT only (judge171)
    "php": "PHP's built-in server handles SIGINT only and the kernel gives PID 1 no default action",
}
# With an init (or the pause container) as PID 1, SIGTERM ends an app without a handler at
# once, while endpoints are still being removed: the preStop sleep must then come first
_AT_ONCE = (
    "\n# with an init, SIGTERM ends an app without a handler at once: keep a preStop sleep "
    "in front (SVD101)"
)
_FIX = {
    "node": "# unless the app already handles it: process.on('SIGTERM', ...) that closes the "
    "server and exits when\n# in-flight requests are done; or start it under an init in "
    "the image (tini, dumb-init), or set\n# shareProcessNamespace: true (the pause "
    "container is PID 1 and SIGTERM's default action applies)" + _AT_ONCE,
    "python": "# unless the app already handles it: signal.signal(signal.SIGTERM, ...) that "
    "stops accepting and exits\n# when in-flight requests are done, or a server that "
    "handles it (gunicorn, uvicorn); or an init in\n# the image (tini, dumb-init), or "
    "shareProcessNamespace: true" + _AT_ONCE,
    "php": "# php -S is a development server that stops only at SIGINT: start it under an init "
    "in the image\n# (tini, dumb-init) or set shareProcessNamespace: true, or serve with "
    "php-fpm behind a web server" + _AT_ONCE,
}
_RUN_DIRECTLY = (
    "# run what the start script runs directly (command: [node, server.js]) so that the app "
    "gets SIGTERM,\n# or make the script `exec` it; the app still needs its own handler "
    "as PID 1 (see SVD116's doc)"
)


@rule("SVD116", "pid1-runtime-ignores-sigterm", Cause.RACE, Severity.INFO)
def pid1_runtime_ignores_sigterm(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The app runs as PID 1 under a runtime that does not act on SIGTERM by itself.

    ## What it does
    Flags Service-backed containers (metrics-only Services aside, as for SVD101) whose
    `command`/`args`, as written in the manifest, make PID 1 one of: `node app.js`, `python
    app.py` or `python -m module` (not `gunicorn`, `uvicorn`, `celery` or `vllm`, which handle
    SIGTERM, nor Django's `manage.py runserver` without `--noreload`, whose autoreloader exits
    at SIGTERM), `npm start`/`npm run …` in an image whose `sh` is not busybox ash, `yarn
    start`/`yarn run …`, PHP's built-in server (`php -S`, which handles SIGINT only). Looked
    through: `exec`, `env VAR=x`, `gosu`, and a shell `-c` script's
    last command; when the shell stays the app's parent (SVD105), the runtime is told too, since
    it becomes PID 1 as soon as the shell execs it (SVD105's fix). Not flagged: an init in front
    (`tini`, `dumb-init`), `shareProcessNamespace: true` (the pause container is PID 1), a
    framework that installs the handler (Backstage's backend, `node packages/backend`;
    Next.js' standalone `server.js`, in an image whose Dockerfile copies `.next/standalone`
    in, unless `NEXT_MANUAL_SIG_HANDLE` is set), a command the manifest does not show (the
    image's `CMD` is unknown). Severity info: the manifest cannot show whether the app
    installs a handler itself.

    ## Why it matters
    The kernel delivers a signal to a namespace's PID 1 only if PID 1 installed a handler
    for it; the default action (terminate) does not apply. Node and Python install no
    SIGTERM handler by default, so unless the app installs one, SIGTERM is ignored: the pod
    keeps serving until the kubelet SIGKILLs it at the end of the grace period, cutting
    the requests and keep-alive connections it still holds (exit 137), and every rollout
    waits the whole grace period per pod. `npm start` passes SIGTERM to the shell it runs
    the script in; dash (`sh` in Debian-based images) stays the app's parent and does not
    pass it on, so the app's own shutdown never runs and it dies with npm (checked with
    npm 11). yarn forwards the signal but exits without waiting for the app.

    ## Example
    Bad:
    ```yaml
    containers:
      - name: web
        image: node:20
        command: ["node", "server.js"]
    ```
    Good:
    ```yaml
    containers:
      - name: web
        image: node:20
        command: ["tini", "--", "node", "server.js"]   # tini installed in the image
    ```

    ## Fix
    Handle SIGTERM in the app (stop accepting, finish in-flight requests, exit), which is
    also what graceful shutdown needs anywhere; or start it under an init that forwards
    signals (`tini`, `dumb-init`, or `docker run --init` outside Kubernetes), or set
    `shareProcessNamespace: true` on the pod. Run `node` directly instead of `npm start` /
    `yarn start`.

    ## References
    - https://github.com/nodejs/docker-node/blob/main/docs/BestPractices.md#handling-kernel-signals
    - https://docs.python.org/3/library/signal.html
    - https://man7.org/linux/man-pages/man2/kill.2.html
    - https://man7.org/linux/man-pages/man7/pid_namespaces.7.html
    - https://github.com/yarnpkg/yarn/issues/4667
    - https://kubernetes.io/docs/tasks/configure-pod-container/share-process-namespace/
    """
    del settings
    for w, c in racing(inventory):
        if w.template.share_process_namespace:
            continue
        found = unhandled_pid1(inventory, c)
        if found is None:
            continue
        grace = w.template.effective_grace_seconds
        if found.runtime in ("node", "python", "php"):
            unless = "" if found.runtime == "php" else "unless the app installs a handler, "
            what = (
                f"{unless}SIGTERM is ignored: it keeps serving until "
                f"the kubelet SIGKILLs it when the grace period ({grace} s) ends, cutting the "
                "requests and connections it still holds (exit 137)"
            )
            fix = note(_FIX[found.runtime])
        elif found.runtime == "npm":
            what = (
                "unless the start script execs the app, the app's own shutdown does not run and "
                "it is killed with the container, cutting the requests it still holds"
            )
            fix = note(_RUN_DIRECTLY)
        else:
            what = (
                "the app's own shutdown is cut short, it is killed with the container, cutting "
                "the requests it still holds"
            )
            fix = note(_RUN_DIRECTLY)
        runs = (
            f"runs {found.shown!r} under '{found.shell} -c', which stays its parent (SVD105); "
            "once the shell execs it, it is PID 1"
            if found.shell
            else f"runs {found.shown!r} as PID 1"
        )
        yield Hit(
            w,
            f"container {c.name!r} {runs} ({_WHY[found.runtime]}): {what}",
            fix=fix,
            container=c.name,
            line=c.line,
        )
