"""The Dockerfiles beside the manifests: what an image's PID 1 runs.

A Dockerfile is looked for under the linted directories (for a file, the directory holding
it) and, when a linted path is inside a git repository, under that repository's root
(bounded: ``_MOST_ENTRIES`` directory entries over all roots, the linted ones first; no
``.git``, ``vendor``, ``node_modules`` or hidden directories; no network). It is matched to
a container image only on a strong signal: the image's repository name (last path component,
tag and digest removed: ``mreferre/yelb-ui:0.7`` → ``yelb-ui``) equals the name of the
Dockerfile's directory, or the Dockerfile is named ``yelb-ui.Dockerfile`` (or ``.dockerfile``) or
``Dockerfile.yelb-ui``; failing that, the image's name is the names of the directory's
parent and of the directory, joined by ``-`` (``microservice-kubernetes-demo-apache`` built
from ``microservice-kubernetes-demo/apache/``, docker-build.sh in
ewolff/microservice-kubernetes); failing that, an image of a user's repository whose tag is
a word and a version names that word's directory (``nigelpoulton/k8sbook:shield-01`` built
from ``web-app/shield/``); failing that, images named ``<project>-<folder>`` when three or
more of the run, all of that prefix, follow that convention (``mushop-api`` from
``src/api/``); failing that, in the manifests' app folder (their folder or its parent), the
``Dockerfile.NAME`` whose ``NAME`` is a word of the image's, else the only plain
Dockerfile, for the only user image they run. Two candidates for one
name match neither, nor does a Dockerfile whose final ``FROM`` has the image's own name
(``nginx/Dockerfile`` ``FROM nginx`` is not what runs ``nginx:1.27``). The build context is
taken to be the Dockerfile's directory, or the folder above it (up to three) where the files
it copies are. Before all of these, a ``skaffold.yaml`` among them
says it: each artifact of its ``build`` that Docker builds names its image, its context and
its Dockerfile (GoogleCloudPlatform/cloud-code-samples: ``python-hello-world`` built from
``src/``; https://skaffold.dev/docs/references/yaml/, ``build.artifacts``), and so does a
build command of a shell script or Makefile (``docker build -t NAME DIR``) and a Dapr
Multi-App Run ``dapr.yaml`` (an app's ``containerImage`` built in its ``appDirPath``). Two more
spellings of a folder name match: its last words are the image's
(``tools.descartes.teastore.webui`` for ``teastore-webui``), or its first word is the
initials of the image's first words (``sa-logic`` for ``sentiment-analysis-logic``); and in
an app folder, ``Dockerfile.server`` builds the image with ``server`` among its words. A
Dockerfile with no ``CMD`` or ``ENTRYPOINT`` runs what its base image runs, when that base
is built here too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from svcdoctor.model.images import ContextFile, ImageFacts, flask_file, image_name

_MOST_ENTRIES = 5000  # directory entries looked at, over all roots
_SKIP_DIRS = frozenset({".git", "vendor", "node_modules", "third_party", "__pycache__"})
_MOST_BYTES = 256 * 1024  # a context file larger than this is not read
_UP = 12  # parent directories looked through for a repository's ``.git``
_FLASK_APP = re.compile(r"(?:^|\s)FLASK_APP[= ]\s*\"?([\w.:/-]+)")
_SCRIPT_WORD = re.compile(r"[\w./-]+\.(?:sh|js|mjs|cjs|py)\b")
# A Python server's application, `MODULE:CALLABLE` (gunicorn's "frontend:create_app()",
# uvicorn's main:app): the module's file (https://docs.gunicorn.org/en/stable/run.html)
_APP_SERVERS = frozenset({"gunicorn", "uvicorn", "hypercorn", "waitress-serve", "daphne"})
_APP_SPEC = re.compile(
    r"""(?:^|\s)["']?([A-Za-z_][\w.]*):[A-Za-z_]\w*(?:\([^)\s]*\))?["']?(?=\s|$)"""
)


def _dockerfile_name(name: str) -> str | None:
    """The image name a Dockerfile's own name gives (``""`` for plain ``Dockerfile``);
    Podman's and Buildah's ``Containerfile`` is one too (blixt's build/; judge365)."""
    for kind in _PLAIN:
        if name == kind:
            return ""
        if name.startswith(f"{kind}."):
            return name.removeprefix(f"{kind}.")
        if name.lower().endswith(f".{kind.lower()}"):
            return name[: -len(kind) - 1]
    return None


_PLAIN = ("Dockerfile", "Containerfile")


def _git_root(path: Path) -> Path | None:
    here = path.resolve()
    for candidate in [here, *here.parents][:_UP]:
        try:
            if (candidate / ".git").exists():
                return candidate
        except OSError:  # unreadable: no repository seen there (lint names the directory)
            continue
    return None


@dataclass(frozen=True, slots=True)
class Builds:
    """What builds the images: the Dockerfiles found, and the Dockerfiles ``skaffold.yaml``
    files build named images from (image name → Dockerfiles)."""

    dockerfiles: tuple[Path, ...] = ()
    artifacts: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        return bool(self.dockerfiles or self.artifacts)


_SKAFFOLD = frozenset({"skaffold.yaml", "skaffold.yml"})
# Artifact builders that build no Dockerfile (https://skaffold.dev/docs/builders/); kaniko
# builds one, named by its own `dockerfile` as docker's is
_NOT_DOCKER = frozenset({"jib", "buildpacks", "bazel", "ko", "custom"})


def find_builds(paths: Sequence[str]) -> Builds:
    """Dockerfiles, and the images skaffold artifacts and build scripts build, under the
    linted directories and their git repository's root."""
    found, configs = _walk(paths)
    artifacts: dict[str, tuple[Path, ...]] = {}
    for config in configs:
        read = (
            skaffold_artifacts
            if config.name in _SKAFFOLD
            else dapr_apps
            if config.name in _DAPR_RUN
            else script_builds
        )
        for name, dockerfile in read(config):
            if dockerfile not in artifacts.get(name, ()):
                artifacts[name] = (*artifacts.get(name, ()), dockerfile)
    return Builds(tuple(found), artifacts)


# Shell scripts and Makefiles that build images: ``docker build``, ``docker buildx build``
# or ``podman build`` with ``-t``/``--tag`` and a context directory, ``-f``/``--file`` for
# another Dockerfile (https://docs.docker.com/reference/cli/docker/buildx/build/); paths are
# read from the script's folder, where such scripts are run, or the folder a ``cd`` before
# it moved to (DescartesResearch/TeaStore tools/build_docker.sh: ``-t
# "${registry}teastore-db" ../utilities/...database/``)
_BUILD_SCRIPT = re.compile(r"(\.sh|^Makefile|^makefile|\.mk)$")
# the build command, after any `VAR=value` words, `sudo`/`time`/`exec`, or the keyword that
# opens a branch or loop body (`then docker build …`)
_BUILD = re.compile(
    r"^(?:(?:\w+=\S*|sudo|time|exec|then|do|else)\s+)*(?:docker|podman)\s+(?:buildx\s+)?"
    r"build\s+(?P<rest>.*)"
)
# `cd "$(dirname "$0")"` and its spellings move to the script's own folder (what follows,
# `/..`, from there); read after the shell's quote removal
_OWN_FOLDER = re.compile(
    r"^\$\(dirname\s+\$(?:0|\{0\}|\{?BASH_SOURCE(?:\[0\])?\}?)\)|^\$\{BASH_SOURCE(?:\[0\])?%/\*\}"
)
_COMMANDS = re.compile(r"\s*(?:&&|\|\||;)\s*")
_VARIABLE = re.compile(r"\$(\{[^}]*\}|\([^)]*\)|\w+)")
# `IMAGE=g1g1/app:0.1` in a script, `IMAGE ?= app` or `IMAGE := app` in a Makefile: one word
_SETS = re.compile(r"^(?:export\s+)?([A-Za-z_]\w*)\s*[?:]?=\s*['\"]?([^\s'\"$]+)['\"]?$")
_TAKES_VALUE = frozenset({"--platform", "--build-arg", "--target", "--label", "--cache-from"})


def script_builds(script: Path) -> list[tuple[str, Path]]:
    """(image name, Dockerfile) of each build command of a script or Makefile whose tag,
    context and Dockerfile are known (a variable the script sets to one word before counts
    as that word): a tag that is only another variable names nothing, and after a ``cd`` to
    a place such a variable names, nothing is known of the paths."""
    try:
        if script.stat().st_size > _MOST_BYTES:
            return []
        text = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out: list[tuple[str, Path]] = []
    here: Path | None = script.parent
    pushed: list[Path | None] = []  # pushd's stack
    makefile = not script.name.endswith(".sh")  # its every recipe line is a shell of its own
    known: dict[str, str] = {}  # variables set to one literal word
    for line in text.replace("\\\n", " ").splitlines():
        if line.lstrip().startswith("#"):
            continue  # a comment
        if makefile:
            here, pushed = script.parent, []
        for given in _COMMANDS.split(line.strip().lstrip("@-+").strip()):
            if m := _SETS.match(given):
                known[m.group(1)] = m.group(2)
                continue
            command = _VARIABLE.sub(
                lambda v: known.get(v.group(1).strip("{}()"), v.group(0)), given
            )
            words = command.split(maxsplit=1)
            if words and words[0] == "popd":
                here = pushed.pop() if pushed else None
            elif words and words[0] in ("cd", "pushd"):
                if words[0] == "pushd":
                    pushed.append(here)
                here = _moved(here, script.parent, command)
            elif here is not None and (m := _BUILD.match(command)) is not None:
                out.extend(_built(here, m.group("rest")))
    return out


def _moved(here: Path | None, own: Path, command: str) -> Path | None:
    """Where a ``cd``/``pushd`` command goes from ``here``: its first argument (a redirection
    or comment after it aside), from the script's own folder for ``cd "$(dirname "$0")"``;
    ``None`` (unknown) for a place another variable names, or none given (home)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    target = words[1] if len(words) > 1 else "$HOME"
    if m := _OWN_FOLDER.match(target):
        rest = target[m.end() :].lstrip("/")
        return Path(os.path.normpath(own / rest)) if rest else own
    return None if here is None or "$" in target or target == "-" else here / target


def _built(here: Path, arguments: str) -> list[tuple[str, Path]]:
    """(image name, Dockerfile) of one build command's arguments, read from folder ``here``."""
    try:
        words = shlex.split(arguments, comments=True)
    except ValueError:
        return []
    tags, file, context = [], None, None
    i = 0
    while i < len(words):
        word = words[i]
        value = words[i + 1] if i + 1 < len(words) else ""
        if word in ("-t", "--tag", "-f", "--file") or word in _TAKES_VALUE:
            if word in ("-t", "--tag"):
                tags.append(value)
            elif word in ("-f", "--file"):
                file = value
            i += 2
            continue
        if word.startswith(("-t=", "--tag=")):
            tags.append(word.partition("=")[2])
        elif word.startswith(("-f=", "--file=")):
            file = word.partition("=")[2]
        elif not word.startswith("-"):
            context = word
        i += 1
    if context is None or "$" in context or (file is not None and "$" in file):
        return []  # a place a variable names: not known here
    dockerfile = Path(os.path.normpath(here / file if file else here / context / "Dockerfile"))
    if not dockerfile.is_file():
        return []
    names = {image_name(_VARIABLE.sub("", t)) for t in tags}
    return [(name, dockerfile) for name in sorted(n for n in names if n and "$" not in n)]


def skaffold_artifacts(config: Path) -> list[tuple[str, Path]]:
    """(image name, Dockerfile) of each Docker-built artifact of a ``skaffold.yaml``'s
    ``build`` (a profile's are alternatives: not read); an unreadable file gives none."""
    try:
        documents = list(yaml.safe_load_all(config.read_text(errors="replace")))
    except (OSError, yaml.YAMLError):
        return []
    out: list[tuple[str, Path]] = []
    for doc in documents:
        build = doc.get("build") if isinstance(doc, dict) else None
        listed = build.get("artifacts") if isinstance(build, dict) else None
        for artifact in listed if isinstance(listed, list) else []:
            if not isinstance(artifact, dict) or _NOT_DOCKER & artifact.keys():
                continue
            image, context = artifact.get("image"), artifact.get("context", ".")
            builder = artifact.get("docker") or artifact.get("kaniko")
            name = builder.get("dockerfile", "Dockerfile") if isinstance(builder, dict) else None
            dockerfile = config.parent / str(context) / str(name or "Dockerfile")
            if isinstance(image, str) and image and dockerfile.is_file():
                out.append((image_name(image), dockerfile))
    return out


# Dapr's Multi-App Run template: `apps[].appDirPath` is the folder of the app whose image
# `containerImage` names (https://docs.dapr.io/developing-applications/local-development/
# multi-app-dapr-run/multi-app-template/); its Dockerfile is the folder's
_DAPR_RUN = frozenset({"dapr.yaml", "dapr.yml"})


def dapr_apps(config: Path) -> list[tuple[str, Path]]:
    """(image name, Dockerfile) of each app of a Dapr Multi-App Run template with a
    ``containerImage`` and a Dockerfile in its ``appDirPath``."""
    try:
        doc = yaml.safe_load(config.read_text(errors="replace"))
    except (OSError, yaml.YAMLError):
        return []
    apps = doc.get("apps") if isinstance(doc, dict) else None
    out: list[tuple[str, Path]] = []
    for app in apps if isinstance(apps, list) else []:
        if not isinstance(app, dict):
            continue
        image, folder = app.get("containerImage"), app.get("appDirPath")
        dockerfile = config.parent / str(folder) / "Dockerfile"
        if isinstance(image, str) and image and isinstance(folder, str) and dockerfile.is_file():
            out.append((image_name(image), dockerfile))
    return out


def _walk(paths: Sequence[str]) -> tuple[list[Path], list[Path]]:
    """Dockerfiles, and skaffold configs and build scripts, under the linted directories and
    their git repository's root."""
    roots: list[Path] = []
    for p in paths:
        path = Path(p)
        try:
            if p == "-" or not path.exists():
                continue
            directory = path if path.is_dir() else path.parent  # a file: those beside it
        except OSError:  # unreadable: the loader reports it
            continue
        roots.append(directory)
        if (git := _git_root(directory)) is not None:
            roots.append(git)
    found: dict[Path, None] = {}
    configs: list[Path] = []
    seen: set[Path] = set()
    budget = _MOST_ENTRIES
    stack = [r.resolve() for r in reversed(roots)]  # the linted paths first
    while stack and budget > 0:
        directory = stack.pop()
        if directory in seen:
            continue
        seen.add(directory)
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            budget -= 1
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _SKIP_DIRS and not entry.name.startswith("."):
                    stack.append(Path(entry.path))
            elif _dockerfile_name(entry.name) is not None:
                found[Path(entry.path)] = None
            elif entry.name in _SKAFFOLD | _DAPR_RUN or _BUILD_SCRIPT.search(entry.name):
                configs.append(Path(entry.path))
    return list(found), configs


@dataclass(frozen=True, slots=True)
class _Copy:
    sources: tuple[str, ...]
    dest: str  # absolute in the image


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """``(line, INSTRUCTION, arguments)``, continuation lines joined, comments dropped."""
    out: list[tuple[int, str, str]] = []
    buffer = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if buffer and line.startswith("#"):
            continue
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer += line[:-1].rstrip() + " "
            continue
        buffer += line
        word, _, rest = buffer.partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buffer = ""
    return out


def _argv(arguments: str, shell: tuple[str, ...]) -> tuple[str, ...]:
    """Exec form (a JSON array) as is; shell form as ``SHELL + [text]``."""
    if arguments.startswith("["):
        try:
            value = json.loads(arguments)
        except ValueError:
            value = None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
    return (*shell, arguments)


def _carried(earlier: list[_Copy], sources: tuple[str, ...], dest: str) -> list[_Copy]:
    """The context copies of an earlier stage that ``COPY --from=STAGE SOURCES DEST`` carries
    into this one: those a source folder holds, moved under ``DEST`` (a multi-stage build's
    `COPY --from=builder /usr/src/app ./` of the app its builder stage copied in)."""
    out: list[_Copy] = []
    for source in sources:
        folder = _absolute(source, "/")
        for copy in earlier:
            inner = os.path.relpath(copy.dest, folder)
            if inner == ".." or inner.startswith("../"):
                continue
            moved = os.path.normpath(os.path.join(dest, inner))
            out.append(_Copy(copy.sources, moved + ("/" if copy.dest.endswith("/") else "")))
    return out


def _absolute(path: str, workdir: str) -> str:
    """The image path ``path`` names from ``workdir`` (``/app.py``, never POSIX's ``//app.py``
    that ``normpath`` keeps: ``COPY app.py .`` with no ``WORKDIR``)."""
    return "/" + os.path.normpath(os.path.join(workdir, path)).lstrip("/")


def _context_path(image_path: str, copies: list[_Copy], context: Path) -> Path | None:
    """The context file the final stage copied to ``image_path`` (the last copy wins)."""
    for copy in reversed(copies):
        for source in copy.sources:
            src = context / source
            if src.is_dir():
                base = copy.dest
                if image_path == base or image_path.startswith(base.rstrip("/") + "/"):
                    candidate = src / os.path.relpath(image_path, base)
                    if candidate.is_file():
                        return candidate
            elif image_path in (
                _absolute(Path(source).name, copy.dest),  # into a directory (made before)
                os.path.normpath(copy.dest) if len(copy.sources) == 1 else None,
            ):
                return src
    return None


_UP_CONTEXT = 3  # folders above a Dockerfile that may be its build context


def _context(dockerfile: Path, copies: list[_Copy]) -> Path:
    """The build context: the Dockerfile's folder, or the folder above it where the most of
    the files it copies are (``docker build -f scheduler/Dockerfile.envoy .`` from the
    repository's root: ``COPY scheduler/envoy/start-envoy.sh /``, SeldonIO/seldon-core)."""
    named = [s for c in copies for s in c.sources if s not in (".", "./") and "*" not in s]
    here = dockerfile.parent
    if not named:
        return here
    folders = [here, *here.parents][: _UP_CONTEXT + 1]
    found = [sum((folder / s).exists() for s in named) for folder in folders]
    return folders[found.index(max(found))]  # the most of them, the nearest first


def read_dockerfile(path: Path, run: Sequence[str] = ()) -> ImageFacts | None:
    """The final stage's PID-1 command and the context files it names, or those ``run``
    (the words of a manifest's command that replaces it) names, or ``None``."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    base, workdir, line, flask_app = "", "/", 0, ""
    shell: tuple[str, ...] = ("/bin/sh", "-c")  # Docker's default SHELL on Linux
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    copies: list[_Copy] = []
    stages: dict[str, list[_Copy]] = {}  # an earlier stage's copies, by its name and index
    for number, instruction, arguments in _instructions(text):
        if instruction == "FROM":  # a new stage: only the final one is the image
            words = [w for w in arguments.split() if not w.startswith("--")]
            base = words[0] if words else ""
            if words[1:2] and words[1].upper() == "AS" and len(words) > 2:
                stages[words[2].lower()] = stages[str(len(stages))] = copies = []
            else:
                stages[str(len(stages))] = copies = []
            workdir, entrypoint, cmd, line, flask_app = "/", (), (), 0, ""
            shell = ("/bin/sh", "-c")
        elif instruction == "ENV" and (env := _FLASK_APP.search(arguments)):
            flask_app = env.group(1)
        elif instruction == "WORKDIR":
            workdir = _absolute(arguments, workdir)
        elif instruction == "SHELL":
            shell = _argv(arguments, shell) if arguments.startswith("[") else shell
        elif instruction == "ENTRYPOINT":
            entrypoint, cmd, line = _argv(arguments, shell), (), number  # resets CMD
        elif instruction == "CMD":
            cmd = _argv(arguments, shell)
            line = line if entrypoint else number  # the ENTRYPOINT's line when there is one
        elif instruction in ("COPY", "ADD"):
            parts = _argv(arguments, ())
            if len(parts) == 1:
                try:
                    parts = tuple(shlex.split(parts[0]))
                except ValueError:
                    continue
            stage = next((w[7:].lower() for w in parts if w.startswith("--from=")), None)
            parts = tuple(w for w in parts if not w.startswith("--"))
            if len(parts) >= 2:
                into = parts[-1].endswith("/") or parts[-1] in (".", "..")  # a directory
                dest = _absolute(parts[-1], workdir) + ("/" if into else "")
                if stage is None:  # a context path: `COPY /start.sh /app` is start.sh
                    copies.append(_Copy(tuple(p.lstrip("/") or "." for p in parts[:-1]), dest))
                else:  # what an earlier stage copied from the context, copied on
                    copies.extend(_carried(stages.get(stage, []), parts[:-1], dest))
    if not line:
        return None
    context = _context(path, copies)
    files: dict[str, ContextFile] = {}
    pending = [*entrypoint, *cmd, *run]
    if "flask" in (w.rsplit("/", 1)[-1] for w in pending):  # ``flask run`` serves FLASK_APP
        pending.append(flask_file(flask_app))
    words = [w.rsplit("/", 1)[-1] for part in pending for w in part.split()]
    if _APP_SERVERS.intersection(words):
        text = " ".join(pending)
        pending.extend(m.replace(".", "/") + ".py" for m in _APP_SPEC.findall(text))
    while pending:
        word = pending.pop(0)
        if word in files or word.startswith("-"):
            continue
        if len(split := word.split()) > 1:  # a shell form's or ``-c`` script's text
            pending.extend(_SCRIPT_WORD.findall(word) + split[:1])
            continue
        try:
            found = _context_path(_absolute(word, workdir), copies, context)
            if found is None or not found.is_file() or found.stat().st_size > _MOST_BYTES:
                continue
            body = found.read_text(encoding="utf-8", errors="replace")
        except OSError:  # an unreadable context file: as if absent
            continue
        files[word] = ContextFile(word, _shown(found), body)
        if body.startswith("#!") or word.endswith(".sh"):  # a script: the files it runs
            pending.extend(w for w in _SCRIPT_WORD.findall(body) if w not in files)
    return ImageFacts(
        _shown(path),
        line,
        base,
        entrypoint,
        cmd,
        tuple(files.values()),
        flask_app,
        _embedded_database(path.parent),
    )


# An embedded database a JVM app runs in its own process when nothing configures a
# datasource: Spring Boot starts an in-memory H2, HSQLDB or Derby it finds on the classpath
# (https://docs.spring.io/spring-boot/reference/data/sql.html#data.sql.datasource.embedded;
# ewolff/microservice-kubernetes' order, customer and catalog; judge196). Not a test-scoped
# dependency, nor where src/main/resources' application properties set a datasource URL.
_EMBEDDED_DB = re.compile(
    r"<artifactId>(hsqldb|h2|derby)</artifactId>"
    r"|(\w+)\s*\(?\s*['\"](?:org\.hsqldb:(hsqldb)|com\.h2database:(h2)|org\.apache\.derby:(derby))\b"
)
_DATASOURCE_URL = re.compile(
    r"datasource\.url|^\s*datasource:(?:\s*\n\s+[\w-]+:.*)*?\s*\n\s+url:", re.M
)


def _embedded_database(folder: Path) -> str:
    """The embedded database the app built in ``folder`` runs in memory (``"hsqldb"``...,
    with the build file that names it), or ``""``."""
    for name in ("pom.xml", "build.gradle", "build.gradle.kts"):
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in _EMBEDDED_DB.finditer(text):
            scope = text[m.end() : text.find("</dependency>", m.end())]
            if "<scope>test</scope>" in scope or (m.group(2) or "").startswith("test"):
                continue
            resources = folder / "src" / "main" / "resources"
            for config in sorted(resources.glob("application*.*")) if resources.is_dir() else []:
                try:
                    if _DATASOURCE_URL.search(config.read_text(encoding="utf-8", errors="replace")):
                        return ""
                except OSError:
                    continue
            database = next(g for g in (m.group(1), *m.groups()[2:]) if g)
            return f"{database} ({_shown(folder / name)})"
    return ""


def _shown(path: Path) -> str:
    """A path relative to the working directory when under it, else absolute."""
    shown = os.path.relpath(path)
    return str(path) if shown.startswith("..") else shown


def _repository(image: str) -> str:
    """The repository of an image reference, tag and digest removed, Docker Hub's official
    images' prefixes too (``docker.io/library/nginx:1`` → ``nginx``)."""
    ref = image.split("@", 1)[0]
    head, _, last = ref.rpartition("/")
    repo = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    return repo.removeprefix("docker.io/").removeprefix("library/")


# A tag that names a variant of the repository's image: a word, then a version or flavour
# (``nigelpoulton/k8sbook:shield-01`` built from ``web-app/shield/``); a bare tag
# (``latest``, ``edge``, ``1.0``) names no directory.
_VARIANT_TAG = re.compile(r"^([a-z]{3,})[-_.]\w")
# Words tags use for a release channel or a base flavour, not an app (``latest-alpine``,
# ``stable-slim``: the tags and aliases of Docker's official images,
# https://github.com/docker-library/official-images#tags-and-aliases)
_CHANNELS = frozenset(
    {"latest", "stable", "mainline", "edge", "lts", "current", "nightly", "release", "main"}
    | {"master", "dev", "devel", "test", "canary", "beta", "alpha", "alpine", "slim", "debian"}
    | {"ubuntu", "bookworm", "bullseye", "buster", "jammy", "noble", "focal", "windows"}
)


def _candidates(by_name: dict[str, list[Path]], image: str) -> list[Path]:
    """The Dockerfiles an image's name points at: the one named like it; else one in a
    directory ``D`` inside ``P`` for an image named ``P-D`` (the project's folder and the
    image's, as a build script tags them: ``microservice-kubernetes-demo-apache`` from
    ``microservice-kubernetes-demo/apache/``; a third party's ``kube-rbac-proxy`` is not a
    ``proxy/`` of yours); else, for an image of a user's or organisation's repository
    (``user/name``), one named like its tag's leading word."""
    name = image_name(image)
    if found := by_name.get(name):
        return found
    plain = [p for paths in by_name.values() for p in paths if p.name in _PLAIN]
    if found := [p for p in plain if name == f"{p.parent.parent.name}-{p.parent.name}"]:
        return found
    if found := [p for p in plain if _spelt_otherwise(p.parent.name, name)]:
        return found
    ref = image.split("@", 1)[0].rsplit("/", 1)
    tag = ref[-1].partition(":")[2]
    variant = _VARIANT_TAG.match(tag) if len(ref) == 2 and tag else None
    if variant is None or variant.group(1) in _CHANNELS:
        return []
    return by_name.get(variant.group(1), [])


def _spelt_otherwise(folder: str, name: str) -> bool:
    """Whether a folder is named for the image in another spelling: its last words are the
    image's words (``tools.descartes.teastore.webui`` for ``teastore-webui``, TeaStore), or
    its first word is the initials of the image's first words (``sa-logic`` for
    ``sentiment-analysis-logic``, rinormaloku/k8s-mastery)."""
    f = [w for w in _WORDS.split(folder.lower()) if w]
    n = [w for w in _WORDS.split(name.lower()) if w]
    if len(n) >= 2 and len(f) > len(n) and f[-len(n) :] == n:
        return True
    rest = "".join(f[1:])
    return len(f) >= 2 and any(
        f[0] == "".join(w[0] for w in n[:k]) and rest == "".join(n[k:]) for k in range(2, len(n))
    )


_WORDS = re.compile(r"[._-]")


def _project_prefixed(
    by_name: Mapping[str, list[Path]], images: Iterable[str]
) -> dict[str, list[Path]]:
    """Images named ``<project>-<folder>`` (or ``_``) for a folder's Dockerfile, where three
    or more images of the run, every one with that prefix, share it that way
    (oracle-quickstart/oci-cloudnative: ``mushop-api``, ``mushop-carts``, … built from
    ``src/api/``, ``src/carts/``; example-voting-app's ``examplevotingapp_result`` from
    ``result/``): a naming convention, not one image whose name merely ends
    in a folder's (``kube-rbac-proxy``)."""
    by_prefix: dict[str, dict[str, list[Path]]] = {}
    named: dict[str, set[str]] = {}  # prefix → the image names that carry it
    for image in images:
        name = image_name(image)
        for i, char in enumerate(name):
            if char in "-_":
                named.setdefault(name[:i], set()).add(name)
                if found := by_name.get(name[i + 1 :]):
                    by_prefix.setdefault(name[:i], {})[image] = found
    out: dict[str, list[Path]] = {}
    for prefix, matched in by_prefix.items():
        names = {image_name(image): tuple(paths) for image, paths in matched.items()}
        convention = len(names) >= _CONVENTION and set(names) == named[prefix]
        if convention and len(set(names.values())) == len(names):  # tags of one: one
            for image, paths in matched.items():
                out.setdefault(image, paths)
    return out


# Images that make a naming convention: each built from its own folder, every image of the
# prefix among them (a third party's family, cert-manager-controller and -webhook beside
# your controller/ and webhook/, has members without a folder: its cainjector)
_CONVENTION = 3


def _user_image(image: str) -> bool:
    """An image of a user's or organisation's repository (``learnk8s/knote-js``), not an
    official one (``mongo``, ``library/redis``)."""
    ref = image.split("@", 1)[0].rsplit(":", 1)[0]
    return "/" in ref and not ref.split("/")[-2].endswith("library")


def _app_folder(
    dockerfiles: Mapping[Path, Path], image: str, folders: Mapping[str, set[Path]]
) -> list[Path]:
    """The Dockerfile of the app folder the image's manifests are in (their folder or its
    parent): the one there whose own name is a word of the image's (``Dockerfile.server``
    for ``hello-mtls-server-node``, smallstep/autocert's examples); else the only plain
    ``Dockerfile`` there (``03/Dockerfile`` beside ``03/kube/knote.yaml``,
    learnk8s/knote-js), when the image is the only user image those manifests' folders run.
    ``dockerfiles``: each Dockerfile with its resolved folder; ``folders``: each image's
    manifests' resolved folders."""
    mine = folders.get(image, set())
    near = {d for d, home in dockerfiles.items() for f in mine if home in (f, f.parent)}
    others = any(
        other != image and _user_image(other) and theirs & mine for other, theirs in folders.items()
    )
    # ``Dockerfile.server`` beside ``Dockerfile.client`` builds the image named ``…-server-…``
    # when the image is yours: of a user's repository, or named for the folder too
    # (``hello-mtls-server-node`` in ``node/``), not a third party's (``mongo-express``)
    words = set(_WORDS.split(image_name(image).lower()))
    named = [
        d
        for d in near
        if (own := _dockerfile_name(d.name))
        and own.lower() in words
        and (_user_image(image) or dockerfiles[d].name.lower() in words)
    ]
    if named:
        return named if len(named) == 1 else []
    plain = [d for d in near if d.name in _PLAIN]  # a Dockerfile.dev beside it aside
    return plain if len(plain) == 1 and not others and _user_image(image) else []


def match_images(
    builds: Builds,
    images: Mapping[str, Iterable[str]],
    run: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, ImageFacts]:
    """Container image → the facts of the one Dockerfile a skaffold artifact or a build
    script builds it from; failing that, the one its name matches; failing that, the one of
    its manifests' app folder (``_app_folder``). A Dockerfile that starts nothing (no
    ``CMD`` or ``ENTRYPOINT``) runs what its base image does, when that base is built here
    too (TeaStore's services ``FROM descartesresearch/teastore-base``). ``images``: each image
    with the files of the manifests that run it; ``run``: the words of the commands those
    manifests give it (their app files are read too: SVD116 looks for a SIGTERM handler)."""
    listed = list(builds.dockerfiles)
    by_name: dict[str, list[Path]] = {}
    for path in listed:
        own = _dockerfile_name(path.name)
        name = own or path.parent.name
        by_name.setdefault(name, []).append(path)
    homes = {d: d.resolve().parent for d in listed}
    resolved: dict[str, Path] = {}  # each manifest file's folder, resolved once

    def folder(file: str) -> Path:
        if file not in resolved:
            resolved[file] = Path(file).resolve().parent
        return resolved[file]

    folders = {image: {folder(f) for f in files if f != "-"} for image, files in images.items()}
    read: dict[tuple[Path, tuple[str, ...]], ImageFacts | None] = {}
    prefixed = _project_prefixed(by_name, images)
    # `<parent><folder>` without a separator (``_candidates`` takes `<parent>-<folder>`):
    # dapr/quickstarts' docker.mk builds `$(DOCKER_IMAGE_PREFIX)$(1)` from tutorials/
    # secretstore/node/, secretstorenode (judge235)
    by_folders: dict[str, list[Path]] = {}
    for path in listed:
        by_folders.setdefault(path.parent.parent.name + path.parent.name, []).append(path)

    def dockerfile(image: str, depth: int) -> tuple[ImageFacts | None, str] | None:
        """The facts and the FROM of the one Dockerfile that builds ``image``, or ``None``."""
        candidates = (
            list(builds.artifacts.get(image_name(image), ()))
            or _candidates(by_name, image)
            or prefixed.get(image, [])
            or by_folders.get(image_name(image), [])
            or (_app_folder(homes, image, folders) if depth == 0 else [])
        )
        if len(set(candidates)) != 1:
            return None  # none, or ambiguous
        path = candidates[0]
        key = (path, tuple((run or {}).get(image, ())) if depth == 0 else ())
        if key not in read:
            read[key] = read_dockerfile(*key)
        facts = read[key]
        base = facts.base if facts is not None else _final_base(path)
        # ``nginx/Dockerfile`` FROM nginx does not build the ``nginx:1.27`` a manifest runs
        return None if _repository(base) == _repository(image) else (facts, base)

    def root(base: str, depth: int) -> str:
        """The image a base built here starts FROM, through such bases (its OS: which
        shell ``sh`` is)."""
        found = dockerfile(base, depth) if depth < _MOST_BASES else None
        return root(found[1], depth + 1) if found and found[1] else base

    def built(image: str, depth: int = 0) -> ImageFacts | None:
        if (found := dockerfile(image, depth)) is None:
            return None
        facts, base = found
        if facts is None and base and depth < _MOST_BASES:
            return built(base, depth + 1)  # it runs what its base, built here, runs
        if facts is not None and base and (under := root(base, depth + 1)) != base:
            facts = replace(facts, base=under)  # its base is built here too
        return facts

    return {image: facts for image in images if (facts := built(image)) is not None}


_MOST_BASES = 3  # base images followed through Dockerfiles that start nothing of their own


def _final_base(path: Path) -> str:
    """The final stage's ``FROM`` image of a Dockerfile, ``""`` when unreadable."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    stages = [
        [w for w in arguments.split() if not w.startswith("--")]
        for _, instruction, arguments in _instructions(text)
        if instruction == "FROM"
    ]
    names = {words[2].lower() for words in stages if len(words) == 3 and words[1].upper() == "AS"}
    base = stages[-1][0] if stages and stages[-1] else ""
    return "" if base.lower() in names else base  # an earlier stage is not an image built here
