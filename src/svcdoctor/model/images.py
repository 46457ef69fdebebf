"""What the repository's Dockerfile says an image runs (``manifests.dockerfiles`` reads it),
and the name an image reference gives its repository."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The OpenTelemetry demo publishes every service under one repository, naming the service
# after the version in the tag (`ghcr.io/open-telemetry/demo:1.8.0-kafka`, `otel/demo` before;
# `image: ${IMAGE_NAME}:${DEMO_VERSION}-kafka` in docker-compose.yml of
# open-telemetry/opentelemetry-demo): the service is the image's name. Its feature-flag
# store `ffspostgres` is PostgreSQL, its `loadgenerator` Locust (src/loadgenerator/Dockerfile).
_SERVICE_IN_TAG = re.compile(r"(?:^|/)(?:open-telemetry|otel)/demo:[^-@/]+-(?P<service>[\w.-]+)")
_DEMO_SERVICES = {"ffspostgres": "postgres", "loadgenerator": "locust"}


def image_name(image: str) -> str:
    """The repository name of an image reference: ``reg:5000/a/b:1.0@sha256:…`` → ``b``; the
    service for the OpenTelemetry demo's (``ghcr.io/open-telemetry/demo:1.8.0-kafka`` →
    ``kafka``)."""
    if found := _SERVICE_IN_TAG.search(image.split("@", 1)[0]):
        return _DEMO_SERVICES.get(found["service"], found["service"])
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def split_image(image: str) -> tuple[str, str, str]:
    """An image reference's name, tag and digest (``reg:5000/a:1@sha256:…`` → ``reg:5000/a``,
    ``1``, ``sha256:…``; a registry's port is no tag)."""
    rest, _, digest = image.partition("@")
    name, colon, tag = rest.rpartition(":")
    if not colon or "/" in tag:
        return rest, "", digest
    return name, tag, digest


def without_host(image: str) -> str:
    """The reference without its registry host, which Docker tells by a first component
    with a `.` or `:` or named `localhost` (``registry:5000/capk-manager:dev`` →
    ``capk-manager:dev``; ``registry:2`` is the image)."""
    first, slash, rest = image.partition("/")
    return rest if slash and ("." in first or ":" in first or first == "localhost") else image


# The image runs Next.js' standalone server (`node server.js`)
NEXT_STANDALONE = "Next.js standalone"


@dataclass(frozen=True, slots=True)
class ContextFile:
    """A file of the build context the image runs, named by a word of its command."""

    word: str  # as the command (or the entrypoint script) writes it
    path: str  # the file read, as shown in findings
    text: str


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """The final stage of the Dockerfile an image was matched to (by its name: see
    ``manifests.dockerfiles``): what PID 1 runs, and the files of the build context it runs."""

    dockerfile: str  # path, as shown in findings
    line: int  # the line of the ENTRYPOINT or CMD that starts PID 1
    base: str  # the final stage's FROM image (tells which shell ``sh`` is)
    entrypoint: tuple[str, ...] = ()  # shell form as [SHELL..., "-c", text]
    cmd: tuple[str, ...] = ()
    files: tuple[ContextFile, ...] = ()
    flask_app: str = ""  # the final stage's ENV FLASK_APP (what ``flask run`` serves)
    embedded_database: str = ""  # an in-memory database its build file adds: "h2 (pom.xml)"
    framework: str = ""  # the server framework its final stage copies in (``NEXT_STANDALONE``)

    def file(self, word: str) -> ContextFile | None:
        """The context file a command word names (``./startup.sh``, ``app.js``)."""
        key = word.removeprefix("./")
        for f in self.files:
            if f.word.removeprefix("./") == key:
                return f
        return None


def flask_file(flask_app: str) -> str:
    """The file ``flask run`` imports: FLASK_APP's module (``rng`` → ``rng.py``), else
    ``app.py`` (https://flask.palletsprojects.com/en/stable/cli/#application-discovery)."""
    module = flask_app.split(":", 1)[0].split("(", 1)[0].strip()
    if not module:
        return "app.py"
    return module if module.endswith(".py") else module.replace(".", "/") + ".py"
