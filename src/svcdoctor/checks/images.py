"""Image checks (``SVD117``): the repository's Dockerfile shows that the image's PID 1
ignores SIGTERM (``manifests.dockerfiles`` matched it to the container's image); and what
the image's build context shows other rules: Socket.IO sessions, a constant health handler,
an embedded database (SVD204, SVD302, SVD202)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from svcdoctor.checks._carrying import racing
from svcdoctor.checks._scripts import ASSIGNMENT, SHELLS, parse_script, shell_script
from svcdoctor.checks._serving import argv_of
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings, image_matches
from svcdoctor.checks.shells import BLOCK_ENDS, branches_exec, shell_family, stays_parent
from svcdoctor.checks.signals import HANDLES, pid1_runtime
from svcdoctor.model import Cause, Container, Inventory, Severity, Workload
from svcdoctor.model.images import ContextFile, ImageFacts, flask_file
from svcdoctor.model.patch import note

# Inits that forward signals (https://github.com/krallin/tini, https://github.com/Yelp/dumb-init)
_INITS = frozenset({"tini", "tini-static", "dumb-init", "catatonit"})
# Flask's app.run in debug mode (debug=True, or FLASK_DEBUG=1 in its environment) serves
# under Werkzeug's reloader, which exits at SIGTERM (run_with_reloader's
# signal.signal(SIGTERM, …) in werkzeug/_reloader.py; Flask.run reads FLASK_DEBUG)
_FLASK_RUN = re.compile(r"\bapp\.run\(")
_DEBUG_ON = frozenset({"FLASK_DEBUG=1", "FLASK_DEBUG=true", "FLASK_DEBUG=True"})


@dataclass(frozen=True, slots=True)
class ImagePid1:
    """Why the image's PID 1 ignores SIGTERM, and where the Dockerfile says what it runs."""

    why: str
    where: str  # dockerfile:line
    fix: str


def _script_file(argv: list[str], facts: ImageFacts) -> ContextFile | None:
    """The context file when ``argv`` runs a script of the build context (by its shebang,
    or as ``sh script.sh``)."""
    if not argv:
        return None
    first = facts.file(argv[0])
    if first is not None and first.text.startswith("#!"):
        return first
    shell = argv[0].rsplit("/", 1)[-1] in SHELLS
    if shell and len(argv) > 1 and (second := facts.file(argv[1])) is not None:
        return second
    return None


# Published images whose PID 1 ignores SIGTERM, read from their own Dockerfiles: the image
# pattern, what PID 1 runs, and the source (wavefronthq/proxy: `CMD ["/bin/bash", run.sh]`,
# whose last command starts java without exec; spring-petclinic-cloud, judge182. Sock Shop's
# Java services: ENTRYPOINT msd-java's java.sh, `java $JAVA_OPTS $*` without exec under
# Alpine's sh; argocd-example-apps, judge207)
_SOCK_SHOP_JAVA = (
    "/bin/sh, running msd-java's java.sh, which starts java without exec",
    "https://github.com/microservices-demo/msd-java/blob/master/java.sh, the services' "
    "docker/*/Dockerfile",
)
# With an init as PID 1, SIGTERM ends an app without a handler at once, while endpoints are
# still being removed: a preStop sleep must then come first
_UNDER_INIT = (
    "or start the image under tini/dumb-init with a preStop sleep in front\n# (SIGTERM then "
    "ends it at once: SVD101)"
)
_EXEC_FIX = (
    "# give the container a command that execs the server as PID 1 (or under "
    "tini/dumb-init),\n# or let it serve until SIGKILLed: a preStop sleep then "
    "changes nothing"
)
_INIT_FIX = (
    "# run the server under an init that forwards SIGTERM (tini, dumb-init), or set the pod's "
    "shareProcessNamespace: true\n# (then SIGTERM's default action ends it at once: keep a "
    "preStop sleep in front, SVD101); else a\n# preStop sleep changes nothing"
)
# Online Boutique's Python and Node services run their interpreter as PID 1 on an app that
# installs no SIGTERM handler (src/emailservice/Dockerfile `ENTRYPOINT ["python",
# "email_server.py"]`, which then sleeps in a loop; recommendationservice alike;
# currencyservice's and paymentservice's `ENTRYPOINT ["node", ...]` in
# GoogleCloudPlatform/microservices-demo, read at 34ffea9; anthos-service-mesh-samples runs
# their published images, judge275)
_BOUTIQUE = "https://github.com/GoogleCloudPlatform/microservices-demo/blob/main/src/{}/Dockerfile"
_BOUTIQUE_PID1 = {
    "emailservice": "python, running email_server.py, which installs no SIGTERM handler",
    "recommendationservice": "python, running recommendation_server.py, which installs no "
    "SIGTERM handler",
    "currencyservice": "node, running server.js, which installs no SIGTERM handler",
    "paymentservice": "node, running index.js, which installs no SIGTERM handler",
}
# ...and SignalFx's fork, published as signalfuse/microservices-demo-<service>, keeps those
# entrypoints and installs no handler either (signalfx/microservices-demo at 433c23881a, the
# images' tag; kubernetes-sigs/scheduler-plugins' examples, judge316)
_BOUTIQUE_FORK = "https://github.com/signalfx/microservices-demo/blob/433c23881a/src/{}/Dockerfile"

# ... and OPEA's GenAIComps microservices (opea/llm-*, opea/retriever-*, ...), whose HTTPService
# runs uvicorn through its own UviServer, calling startup() and main_loop() but never uvicorn's
# install_signal_handlers (comps/cores/mega/http_service.py in opea-project/GenAIComps), under
# python or `bash entrypoint.sh` as PID 1 (GenAIInfra's microservices-connector; judge466);
# and TensorFlow Serving's image, whose entrypoint script starts tensorflow_model_server
# without exec under bash (tensorflow_serving/tools/docker/Dockerfile writes
# /usr/bin/tf_serving_entrypoint.sh; ai-on-gke's TPU examples, judge466, judge430), a server
# that installs no SIGTERM handler either (tensorflow/serving#356)
_GENAICOMPS = (
    "agent",
    "asr",
    "chathistory",
    "dataprep",
    "embedding",
    "feedbackmanagement",
    "guardrails",
    "llm",
    "lvm",
    "promptregistry",
    "reranking",
    "retriever",
    "tts",
    "web-retriever",
)
_GENAICOMPS_PID1 = (
    "python (or bash running entrypoint.sh), a GenAIComps microservice whose uvicorn server "
    "installs no SIGTERM handler",
    "https://github.com/opea-project/GenAIComps/blob/main/comps/cores/mega/http_service.py",
)
# ... and ML Metadata's gRPC server, PID 1 itself, which installs no signal handler: main()
# builds the server and waits (ml_metadata/metadata_store/metadata_store_server_main.cc in
# google/ml-metadata), and the kernel applies no default action to PID 1 (kubeflow/pipelines'
# metadata-grpc-deployment runs /bin/metadata_store_server; judge233). ``binary``: the
# manifest's command that runs the same PID 1 ("": only the image's own command does).
_KNOWN_PID1 = (
    (
        "*wavefronthq/proxy*",
        "bash, running run.sh, which starts java without exec",
        "https://github.com/wavefrontHQ/wavefront-proxy/blob/master/docker/Dockerfile, "
        "docker/run.sh",
        "",
        _EXEC_FIX,
    ),
    (  # the same proxy under VMware's registry (wavefrontHQ/observability-for-kubernetes)
        "*tanzu_observability/proxy:*",
        "bash, running run.sh, which starts java without exec",
        "https://github.com/wavefrontHQ/wavefront-proxy/blob/master/docker/Dockerfile, "
        "docker/run.sh",
        "",
        _EXEC_FIX,
    ),
    *(
        (f"*weaveworksdemos/{name}:*", *_SOCK_SHOP_JAVA, "", _EXEC_FIX)
        for name in ("carts", "orders", "shipping")
    ),
    (  # the Kubernetes guestbook's Redis follower (citrix-k8s-ingress-controller's docs; judge494)
        "*google_samples/gb-redisslave:*",
        "/bin/sh, running run.sh, which starts redis-server in an if/else without exec",
        "https://github.com/kubernetes/examples/blob/master/guestbook/redis-slave/Dockerfile "
        "(CMD /run.sh), run.sh",
        "",
        _EXEC_FIX,
    ),
    *(
        (f"*microservices-demo/{name}", runs, _BOUTIQUE.format(name), "", _INIT_FIX)
        for name, runs in _BOUTIQUE_PID1.items()
    ),
    *(
        (f"*signalfuse/microservices-demo-{name}", runs, _BOUTIQUE_FORK.format(name), "", _INIT_FIX)
        for name, runs in _BOUTIQUE_PID1.items()
    ),
    *(
        (glob, *_GENAICOMPS_PID1, "", _INIT_FIX)
        for name in _GENAICOMPS
        for glob in (f"*opea/{name}", f"*opea/{name}[:-]*")
    ),
    (
        "*tensorflow/serving*",
        "bash, running tf_serving_entrypoint.sh, which starts tensorflow_model_server without exec",
        "https://github.com/tensorflow/serving/blob/master/tensorflow_serving/tools/docker/"
        "Dockerfile",
        "",
        _INIT_FIX,
    ),
    (
        "*ml_metadata_store_server*",
        "metadata_store_server, ML Metadata's gRPC server, which installs no SIGTERM handler",
        "https://github.com/google/ml-metadata/blob/master/ml_metadata/metadata_store/"
        "metadata_store_server_main.cc",
        "metadata_store_server",
        _INIT_FIX,
    ),
)


def image_pid1(inventory: Inventory, w: Workload, c: Container) -> ImagePid1 | None:
    """What the matched Dockerfile makes PID 1, when it ignores SIGTERM: a shell that stays
    the app's parent, or ``node``/``python`` running an app file that installs no handler;
    or a published image's known PID 1 (``_KNOWN_PID1``)."""
    if w.template.share_process_namespace:
        return None
    command = c.command[0].rsplit("/", 1)[-1] if c.command else ""
    for glob, runs, origin, binary, fix in _KNOWN_PID1:
        if image_matches(c.image, glob) and command in ("", binary):
            return ImagePid1(f"its image's PID 1 is {runs} ({origin})", origin, fix)
    if c.command:
        return None  # the manifest's command replaces the image's
    facts = inventory.images.get(c.image)
    if facts is None:
        return None  # no Dockerfile
    image_cmd = list(c.args or facts.cmd)
    argv = [*facts.entrypoint, *image_cmd]
    where = f"{facts.dockerfile}:{facts.line}"
    debug = False  # FLASK_DEBUG=1 set on the command
    for _ in range(3):  # a shell -c, then a script it runs, then what that execs
        if argv and argv[0].rsplit("/", 1)[-1] in _INITS:
            return None
        if (found := shell_script(argv)) is not None:
            shell, text = found
            script = parse_script(text)
            family = shell_family(shell.rsplit("/", 1)[-1], facts.base)
            if not script.commands or any(x.program == "trap" for x in script.commands):
                return None
            last = script.last
            assert last is not None
            if stays_parent(family, script):
                fix = (
                    f"# in {facts.dockerfile}: the exec form (CMD [...]) makes the app PID 1, or "
                    "`exec` the last command (a pipeline cannot be exec'd: log to stdout)"
                )
                # exec'd, the app is PID 1: one that installs no handler ignores SIGTERM too
                # (Kubernetes for Developers' timeserver, `CMD python3 server.py`; judge509)
                exec_d = None
                if not facts.entrypoint and not c.args:
                    exec_d = image_pid1(inventory, w, replace(c, args=tuple(last.words)))
                if exec_d is not None:
                    fix += (
                        "\n# but as PID 1 the app ignores SIGTERM too, as it installs no "
                        f"handler:\n{exec_d.fix}"
                    )
                return ImagePid1(
                    f"its image runs `{text.strip()}` under the shell form's '{shell} -c' "
                    f"({where}), and the shell stays the parent of "
                    f"{last.program or last.words[0]!r}",
                    where,
                    fix,
                )
            debug = debug or bool(_DEBUG_ON & set(last.words))
            argv = _exec_words(list(last.words), image_cmd)
            continue
        if (file := _script_file(argv, facts)) is not None:
            name, text = file.path, file.text
            by_kernel = facts.file(argv[0]) is file  # run as a file, not as `sh script`
            if by_kernel and (interpreter := _shebang(text)) is not None:
                if interpreter not in ("node", "python") or HANDLES.search(text):
                    return None  # another language, or it handles SIGTERM
                if _HANDS_OVER.search(text):
                    return None  # it execs another program (os.execvp): that is PID 1 then
                return ImagePid1(
                    f"its image runs {name} as PID 1 ({where}), a {interpreter} script (its #! "
                    f"line) that installs no SIGTERM handler ({interpreter.capitalize()} "
                    "installs none by default and the kernel gives PID 1 no default action)",
                    where,
                    f"# in {name}: handle SIGTERM (stop accepting, finish in-flight requests, "
                    "exit), " + _UNDER_INIT,
                )
            script = parse_script(text)
            if not script.commands or any(x.program == "trap" for x in script.commands):
                return None
            last = script.last
            assert last is not None
            piped = last.before in ("|", "|&") or last.after in ("|", "|&", "&")
            shown = text[last.start :].split("\n", 1)[0].strip()
            if not last.execs or piped:
                if last.words and last.words[0] in BLOCK_ENDS:  # an if/case/loop ends it
                    if branches_exec(script):
                        return None
                    what, exec_it = f"commands end in a `{last.words[0]}` block", "the app"
                else:
                    what, exec_it = f"last command `{shown}` is", f"the last command (exec {shown})"
                return ImagePid1(
                    f"its image runs the script {name} ({where}), whose {what} not exec'd: "
                    "a shell running a script file forks it and stays PID 1",
                    where,
                    f"# in {name}: `exec` {exec_it}, " + _UNDER_INIT,
                )
            argv = _exec_words(list(last.words), image_cmd)
            continue
        break
    # `flask run`: werkzeug's development server in Python as PID 1; run_simple installs
    # no SIGTERM handler (pallets/werkzeug src/werkzeug/serving.py), only Python's SIGINT one
    if argv[:2] == ["flask", "run"]:
        shown, runtime_name = "flask run", "python"
        source = facts.file(flask_file(facts.flask_app))
    else:
        runtime = pid1_runtime(replace(c, command=tuple(argv), args=(), image=facts.base))
        if runtime is None or runtime.runtime not in ("node", "python", "php") or runtime.shell:
            return None
        shown, runtime_name = runtime.shown, runtime.runtime
        if runtime_name == "php":  # no script of the app's changes it (judge171)
            return ImagePid1(
                f"its image runs {shown!r} as PID 1 ({where}): PHP's built-in server handles "
                "SIGINT only and the kernel gives PID 1 no default action",
                where,
                "# start the image under tini/dumb-init, or serve with php-fpm behind a web server",
            )
        if runtime_name == "python" and _module(argv) in _STDLIB_SERVERS:
            return ImagePid1(
                f"its image runs {shown!r} as PID 1 ({where}): the standard library's server "
                "installs no SIGTERM handler (Python installs none by default and the kernel "
                "gives PID 1 no default action)",
                where,
                "# start the image under tini/dumb-init, or serve the files with a server that "
                "stops at SIGTERM",
            )
        source = facts.file(next((a for a in argv[1:] if not a.startswith("-")), ""))
    if source is None or HANDLES.search(source.text):
        return None  # the app file is not in the build context, or it handles SIGTERM
    if debug and _FLASK_RUN.search(source.text):
        return None  # Werkzeug's reloader exits at SIGTERM
    return ImagePid1(
        f"its image runs {shown!r} as PID 1 ({where}), and {source.path} installs no "
        f"SIGTERM handler ({runtime_name.capitalize()} installs none by default and the "
        "kernel gives PID 1 no default action)",
        where,
        f"# in {source.path}: handle SIGTERM (stop accepting, finish in-flight requests, "
        "exit), " + _UNDER_INIT,
    )


# The standard library's servers run with `python -m`: they catch KeyboardInterrupt and
# install no signal handler (Lib/http/server.py's test(); Python 2's SimpleHTTPServer and
# CGIHTTPServer: https://docs.python.org/3/library/http.server.html,
# https://docs.python.org/2/library/simplehttpserver.html)
_STDLIB_SERVERS = frozenset(
    {"http.server", "SimpleHTTPServer", "CGIHTTPServer", "xmlrpc.server", "SimpleXMLRPCServer"}
)


def _module(argv: list[str]) -> str | None:
    """The module of `python -m MODULE …`, or ``None``."""
    if "-m" in argv[:-1]:
        return argv[argv.index("-m") + 1]
    return None


# A Python script that replaces itself with another program (os.execvp and its kin)
_HANDS_OVER = re.compile(r"\bos\.exec[lv]p?e?\(")


def _shebang(text: str) -> str | None:
    """The interpreter a script's ``#!`` line names when it is no shell: ``python`` (any
    ``python3.x``), ``node``, or another program's name; ``None`` for a shell, for a wrapper
    that runs one (``env -S LC_ALL=C bash``, s6-overlay's ``with-contenv bash``), or no
    line."""
    if not text.startswith("#!"):
        return None
    words = text[2:].split("\n", 1)[0].split()
    programs = [w.rsplit("/", 1)[-1] for w in words if "=" not in w and not w.startswith("-")]
    if not programs or any(p in SHELLS or p == "busybox" for p in programs):
        return None
    program = next((p for p in programs if p not in ("env", "with-contenv")), programs[-1])
    return "python" if program.startswith("python") else program


def _exec_words(words: list[str], image_cmd: list[str]) -> list[str]:
    """The argv an ``exec`` runs (past ``VAR=x`` assignments): ``exec "$@"`` runs the
    image's CMD (or the args)."""
    words = words[1:] if words[:1] == ["exec"] else words
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    return image_cmd if words in (["$@"], ["${@}"]) else words


@rule("SVD117", "image-pid1-ignores-sigterm", Cause.RACE, Severity.WARNING)
def image_pid1_ignores_sigterm(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """The image's Dockerfile, in the same repository, starts a PID 1 that ignores SIGTERM.

    ## What it does
    Lint looks for Dockerfiles (`Dockerfile`, `Dockerfile.NAME`, `NAME.Dockerfile`, and the same
    with `Containerfile`) under the linted directories (a linted file's own directory included) and,
    inside a git repository, under its root (at most 5000 directory entries; `.git`, `vendor`,
    `node_modules` and hidden directories skipped). A Dockerfile builds a container's image when a
    `skaffold.yaml` there builds the image from it (`build.artifacts[]`: `image`, `context`,
    `docker.dockerfile`) or a shell script, Makefile or GitHub Actions workflow does (`docker build
    -t NAME DIR`, `docker buildx build`, `podman build`, `docker/build-push-action`), or when the
    image's repository name (`mreferre/yelb-ui:0.7` → `yelb-ui`) equals the Dockerfile's directory
    name or its `NAME` (a few weaker signals after that: `manifests/imagebuilds.py`); two candidates
    match neither, nor does a Dockerfile whose final `FROM` is the image itself (`nginx/Dockerfile`
    `FROM nginx`). A Dockerfile with no `CMD` or `ENTRYPOINT` of its own runs its base image's, when
    that base is built in the repository too. Without a `command` in the manifest, the final stage's
    `ENTRYPOINT` and `CMD` (or the manifest's `args`) are PID 1. Flags Service-backed containers (as
    SVD101) whose PID 1 is a shell that stays the app's parent: a shell-form `CMD` whose shell keeps
    the last command (as SVD105 decides), or a script of the build context whose last command is not
    `exec`'d (a shell running a script file forks every command); or `node`/`python` running an app
    file of the build context (or `flask run` serving `FLASK_APP`'s, or a script whose `#!` line
    names them) that installs no SIGTERM handler (no `SIGTERM`, `uvicorn.run`, `gunicorn`, aiohttp's
    `run_app`, Quart, terminus, http-terminator or lightship in it; nor Flask's `app.run` in debug
    mode, `debug=True` or `FLASK_DEBUG=1` on the command: Werkzeug's reloader exits at SIGTERM), or
    `python -m` running a server of the standard library (`http.server`, `SimpleHTTPServer`), which
    installs none. Not flagged: an init in front (`tini`, `dumb-init`), `shareProcessNamespace:
    true`, a `trap` in the script, an app file not in the context. Published images whose own
    Dockerfile starts such a PID 1 are flagged without one in the repository: `wavefronthq/proxy`
    (also as `tanzu_observability/proxy`) and Sock Shop's Java services (`weaveworksdemos/carts`,
    `orders`, `shipping`): a shell running a script that starts java without `exec`; Online
    Boutique's `microservices-demo/emailservice`, `recommendationservice` (python),
    `currencyservice` and `paymentservice` (node), an interpreter running an app without a handler;
    ML Metadata's `ml_metadata_store_server`, a gRPC server that is PID 1 and installs no handler
    (also when the manifest's command names its binary). SVD101 does not fire for such a container:
    it does not stop at SIGTERM.

    ## Why it matters
    The kernel delivers a signal to a PID namespace's init only if it installed a handler;
    a shell without a `trap`, Node and Python install none for SIGTERM. The app never hears
    the kubelet's SIGTERM, keeps serving until the grace period ends and is SIGKILLed with
    requests in flight (exit 137); every rollout waits the whole grace period per pod.

    ## Example
    Bad (`web/Dockerfile` has `CMD ["./startup.sh"]`, and `web/startup.sh` ends with
    `nginx -g "daemon off;"`):
    ```yaml
    containers:
      - name: web
        image: example/web:1.0
    ```
    Good (`web/startup.sh` ends with `exec nginx -g "daemon off;"`, or the Dockerfile
    starts it under `tini`):
    ```yaml
    containers:
      - name: web
        image: example/web:1.1
    ```

    ## Fix
    `exec` the last command of the entrypoint script, use the exec form of `CMD`, handle
    SIGTERM in the app, or start it under `tini`/`dumb-init`.

    ## References
    - https://docs.docker.com/reference/dockerfile/#entrypoint
    - https://docs.docker.com/reference/dockerfile/#shell-and-exec-form
    - https://github.com/nodejs/docker-node/blob/main/docs/BestPractices.md#handling-kernel-signals
    - https://docs.python.org/3/library/signal.html
    - https://man7.org/linux/man-pages/man7/pid_namespaces.7.html
    """
    del settings
    for w, c in racing(inventory):
        found = image_pid1(inventory, w, c)
        if found is None:
            continue
        grace = w.template.effective_grace_seconds
        yield Hit(
            w,
            f"container {c.name!r}: {found.why}: SIGTERM is ignored, it keeps serving until "
            f"the kubelet SIGKILLs it when the grace period ({grace} s) ends, cutting the "
            "requests it still holds (exit 137)",
            fix=note(found.fix),
            container=c.name,
            line=c.line,
        )


# Apps that keep each session in the server process that opened it, by an app file of the
# image's build context: Socket.IO (its clients start with HTTP long-polling, and a request
# that reaches another replica fails, "Session ID unknown", unless the load balancer is sticky
# or an adapter shares the sessions: https://socket.io/docs/v4/using-multiple-nodes/;
# example-voting-app's result, judge180), Streamlit (a session is its WebSocket's, and the media
# it shows are fetched over HTTP from the same server: "Streamlit requires session affinity",
# streamlit/streamlit#13773, docs.streamlit.io/develop/concepts/architecture/architecture),
# Gradio (a session's queue and events: "404 Session Not Found" with more than one replica,
# gradio-app/gradio#6920), Chainlit (Socket.IO: docs.chainlit.io/deploy/overview)
# (kube-agentic-networking's quickstart agents; judge500)
_SOCKET_IO = re.compile(r"""require\(\s*['"]socket\.io['"]\s*\)|from\s+['"]socket\.io['"]""")
_SOCKET_IO_SHARED = re.compile(r"socket\.io-redis|@socket\.io/\w+-adapter|createAdapter\(")
_SESSION_APPS = re.compile(r"^[ \t]*(?:import|from)[ \t]+(streamlit|gradio|chainlit)\b", re.M)
_SESSION_APP_NAMES = {"streamlit": "Streamlit", "gradio": "Gradio", "chainlit": "Chainlit"}
# MCP's reference server-everything over Streamable HTTP or SSE keeps each session's transport
# in a map of its process (src/everything/streamableHttp.ts of modelcontextprotocol/servers):
# a session's next request on another replica is refused (judge500, judge392)
_MCP_EVERYTHING = re.compile(r"@modelcontextprotocol/server-everything(@[\w.-]+)?$")


def process_sessions(inventory: Inventory, c: Container) -> str | None:
    """Why the container's app keeps its clients' sessions in its process (an app file of
    its image's build context serves Socket.IO with no adapter, or a Streamlit, Gradio or
    Chainlit app; MCP's server-everything over HTTP), or ``None``."""
    facts = inventory.images.get(c.image)
    for f in facts.files if facts is not None else ():
        if _SOCKET_IO.search(f.text) and not _SOCKET_IO_SHARED.search(f.text):
            return f"{f.path} serves Socket.IO, whose sessions live in the process that opened them"
        if m := _SESSION_APPS.search(f.text):
            return (
                f"{f.path} is a {_SESSION_APP_NAMES[m.group(1)]} app, whose sessions live in "
                "the process that opened them"
            )
    argv = argv_of(c) or ([*facts.entrypoint, *facts.cmd] if facts is not None else [])
    for i, word in enumerate(argv):
        if _MCP_EVERYTHING.search(word) and {"streamableHttp", "sse"} & set(argv[i + 1 :]):
            return "MCP's server-everything keeps each session's transport in its process"
    return None


# A route of the app file whose handler only returns a constant answers by itself: a Flask
# or FastAPI decorator and a body of one `return` of a literal, after its docstring
# (bank-of-anthos' frontend `/ready`: `return 'ok', 200`; judge179), or an Express route
# that sends one (`app.get('/ready', (req, res) => res.send('ok'))`)
_PY_ROUTE = (
    r"@\w+\.(?:route|get|api_route)\(\s*['\"]{path}['\"][^\n]*\n(?:[ \t]*@[^\n]*\n)*"
    r"([ \t]*)(?:async[ \t]+)?def[ \t]+\w+\([^)]*\)[^\n]*:[ \t]*\n"
)
_JS_ROUTE = (
    r"\.get\(\s*['\"`]{path}['\"`]\s*,\s*(?:async\s*)?(?:function\s*)?\(?\s*\w+\s*,\s*(\w+)\s*\)?"
    r"\s*(?:=>)?\s*\{{?\s*\1(?:\.status\(\d+\))?\.(?:send|json|end|sendStatus)\("
    r"\s*(?:(['\"`])[^'\"`\n]*\2|\{{[^{{}}()\n]*\}}|\d+)?\s*\)"
)
_CONSTANT = re.compile(
    r"""return\s+(?:(['"])[^'"\n]*\1|\{[^{}()\n]*\}|\d+|None|True)(?:\s*,\s*\d{3})?\s*"""
)
_DOCSTRING = re.compile(r'^\s*(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\')\s*')


def constant_route(inventory: Inventory, c: Container, path: str) -> str | None:
    """The app file of the container's image (its build context) whose handler of ``path``
    only returns a constant, or ``None``."""
    facts = inventory.images.get(c.image)
    for f in facts.files if facts is not None else ():
        if path not in f.text:
            continue
        if re.search(_JS_ROUTE.format(path=re.escape(path)), f.text):
            return f.path
        for m in re.finditer(_PY_ROUTE.format(path=re.escape(path)), f.text):
            body = []
            for line in f.text[m.end() :].split("\n"):
                if line.strip() and len(line) - len(line.lstrip()) <= len(m.group(1)):
                    break
                body.append(line)
            code = [x.strip() for x in _DOCSTRING.sub("", "\n".join(body)).split("\n")]
            code = [x for x in code if x and not x.startswith("#")]
            if len(code) == 1 and _CONSTANT.fullmatch(code[0]):
                return f.path
    return None


# What points a Spring Boot app at a datasource of its own choosing, past its build's defaults
_SPRING_DATASOURCE = re.compile(
    r"SPRING_DATASOURCE_URL|SPRING_PROFILES_ACTIVE|spring\.(datasource\.url|profiles\.active)"
)

# ...or a setting of the app's own that names a database server for its data
# (`RETAIL_ORDERS_PERSISTENCE_PROVIDER=postgres`, from the ConfigMap its envFrom reads, turns on
# retail-store-sample-app's orders datasource; judge538)
_DATA_SETTING = re.compile(r"PERSISTENCE|DATABASE|(^|_)DB(_|$)|DATASOURCE|REPOSITORY|STORAGE")
_DATABASE_SERVER = re.compile(
    r"postgres(ql)?|pg|mysql|mariadb|mongo(db)?|oracle|sqlserver|mssql|cockroach(db)?|dynamodb"
)


def embedded_database(inventory: Inventory, c: Container) -> str | None:
    """Why the container's app keeps its data in an in-memory database of its own process
    (``ImageFacts.embedded_database``), unless its environment or arguments set a datasource
    or a profile (which may set one); or ``None``."""
    facts = inventory.images.get(c.image)
    if facts is None or not facts.embedded_database:
        return None
    said = " ".join([*(f"{k}={v}" for k, v in c.env), *c.env_refs, *c.command, *c.args])
    if _SPRING_DATASOURCE.search(said) or any(
        _DATA_SETTING.search(name.upper()) and _DATABASE_SERVER.fullmatch(value.lower())
        for name, value in c.env
    ):
        return None
    return (
        f"its build adds the embedded database {facts.embedded_database}, which Spring Boot "
        "runs in memory in each process when no datasource URL is set"
    )
