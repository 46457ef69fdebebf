"""Which Dockerfile builds a container image (``match_images``).

A Dockerfile is matched to an image only on a strong signal: the image's repository name
(last path component, tag and digest removed: ``mreferre/yelb-ui:0.7`` → ``yelb-ui``)
equals the name of the Dockerfile's directory, or the Dockerfile is named
``yelb-ui.Dockerfile`` (or ``.dockerfile``) or ``Dockerfile.yelb-ui``; failing that, the
image's name is the names of the directory's parent and of the directory, joined by ``-``
(``microservice-kubernetes-demo-apache`` built from ``microservice-kubernetes-demo/apache/``,
docker-build.sh in ewolff/microservice-kubernetes); failing that, an image of a user's
repository whose tag is a word and a version names that word's directory
(``nigelpoulton/k8sbook:shield-01`` built from ``web-app/shield/``); failing that, images
named ``<project>-<folder>`` when three or more of the run, all of that prefix, follow that
convention (``mushop-api`` from ``src/api/``); failing that, in the manifests' app folder
(their folder or its parent, else a folder of it named ``docker`` or for a word of the
image's), the ``Dockerfile.NAME`` whose ``NAME`` is a word of the image's, else the only
plain Dockerfile, for the only user image they run. Of two candidates for one name, the
one nearest the manifests that run the image builds it; two as near match neither, nor
does a Dockerfile whose final ``FROM`` has the image's own name
(``nginx/Dockerfile`` ``FROM nginx`` is not what runs ``nginx:1.27``). Before all of these,
a ``skaffold.yaml`` among them says it: each artifact of its ``build`` that Docker builds
names its image, its context and its Dockerfile (GoogleCloudPlatform/cloud-code-samples:
``python-hello-world`` built from ``src/``; https://skaffold.dev/docs/references/yaml/,
``build.artifacts``), and so does a build command of a shell script, a Makefile or a
Markdown document (``docker build -t NAME DIR``), a GitHub Actions workflow of the repository
(``docker/build-push-action``'s ``file`` and ``tags``, or a ``run:`` step's build command)
and a Dapr Multi-App Run ``dapr.yaml`` (an app's ``containerImage`` built in its
``appDirPath``). Two more spellings of a folder
name match: its last words are the image's (``tools.descartes.teastore.webui`` for
``teastore-webui``), or its first word is the initials of the image's first words
(``sa-logic`` for ``sentiment-analysis-logic``); and in an app folder, ``Dockerfile.server``
builds the image with ``server`` among its words. First of all, a folder named for the
image's tag inside one named like it builds it (``openemr/7.0.2/`` for
``openemr/openemr:7.0.2``). A Dockerfile with no ``CMD`` or ``ENTRYPOINT`` runs what its
base image runs, when that base is built here too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from svcdoctor.manifests.dockerfiles import (
    PLAIN,
    Builds,
    dockerfile_name,
    final_base,
    read_dockerfile,
)
from svcdoctor.model.images import ImageFacts, image_name

_MOST_BASES = 3  # base images followed through Dockerfiles that start nothing of their own


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
    """The Dockerfiles an image's name points at: the one in a folder named for its tag
    inside one named like it (``openemr/7.0.2/`` for ``openemr/openemr:7.0.2``, the layout
    of an image's versions); the one named like it; else one in a
    directory ``D`` inside ``P`` for an image named ``P-D`` (the project's folder and the
    image's, as a build script tags them: ``microservice-kubernetes-demo-apache`` from
    ``microservice-kubernetes-demo/apache/``; a third party's ``kube-rbac-proxy`` is not a
    ``proxy/`` of yours); else, for an image of a user's or organisation's repository
    (``user/name``), one named like its tag's leading word."""
    name = image_name(image)
    ref = image.split("@", 1)[0].rsplit("/", 1)
    tag = ref[-1].partition(":")[2]
    plain = [p for paths in by_name.values() for p in paths if p.name in PLAIN]
    versioned = [p for p in plain if tag and (p.parent.parent.name, p.parent.name) == (name, tag)]
    if versioned:  # an image's releases' layout: openemr/7.0.2/ (openemr-devops; judge449)
        return versioned
    if found := by_name.get(name):
        return found
    if found := [p for p in plain if name == f"{p.parent.parent.name}-{p.parent.name}"]:
        return found
    if found := [p for p in plain if _spelt_otherwise(p.parent.name, name)]:
        return found
    variant = _VARIANT_TAG.match(tag) if len(ref) == 2 and tag else None
    if variant is None or variant.group(1) in _CHANNELS:
        return []
    return by_name.get(variant.group(1), [])


def _nearest(candidates: list[Path], manifests: set[Path]) -> list[Path]:
    """Of several Dockerfiles for one name, the one nearest the folders of the manifests that
    run the image: sharing the most folders with one of them, then the fewest folders below
    what they share (in a repository of examples each with its own api/, the example's:
    garden-io/garden, judge454; apps/ beside a workshop/apps/ copy: judge455); all of them
    when none is the nearest alone."""
    distinct = sorted(set(candidates))
    if len(distinct) < 2 or not manifests:
        return distinct

    def rank(path: Path) -> tuple[int, int]:
        home = path.resolve().parent
        shared = max(len(Path(os.path.commonpath([home, m])).parts) for m in manifests)
        return shared, shared - len(home.parts)

    ranks = {p: rank(p) for p in distinct}
    best = max(ranks.values())
    nearest = [p for p in distinct if ranks[p] == best]
    return nearest if len(nearest) == 1 else distinct


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
    in a folder's (``kube-rbac-proxy``). A folder's name may drop the separators of the
    image's words (easyTravel's ``easytravel-angular-frontend`` from ``angularfrontend/``;
    judge520)."""
    by_prefix: dict[str, dict[str, list[Path]]] = {}
    named: dict[str, set[str]] = {}  # prefix → the image names that carry it
    squashed = {_squash(folder): paths for folder, paths in by_name.items()}
    for image in images:
        name = image_name(image)
        for i, char in enumerate(name):
            if char in "-_":
                named.setdefault(name[:i], set()).add(name)
                if found := by_name.get(name[i + 1 :]) or squashed.get(_squash(name[i + 1 :])):
                    by_prefix.setdefault(name[:i], {})[image] = found
    out: dict[str, list[Path]] = {}
    for prefix, matched in by_prefix.items():
        names = {image_name(image): tuple(paths) for image, paths in matched.items()}
        convention = len(names) >= _CONVENTION and set(names) == named[prefix]
        if convention and len(set(names.values())) == len(names):  # tags of one: one
            for image, paths in matched.items():
                out.setdefault(image, paths)
    return out


def _squash(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "").replace(".", "")


# Images that make a naming convention: each built from its own folder, every image of the
# prefix among them (a third party's family, cert-manager-controller and -webhook beside
# your controller/ and webhook/, has members without a folder: its cainjector)
_CONVENTION = 3


def _user_image(image: str) -> bool:
    """An image of a user's or organisation's repository (``learnk8s/knote-js``, any of
    another registry's), not an official one (``mongo``, ``library/redis``,
    ``docker.io/sonarqube``: redis-microservices-demo; judge503)."""
    ref = image.split("@", 1)[0].rsplit(":", 1)[0]
    parts = ref.split("/")
    if parts[0] in _DOCKER_HUB:
        parts = parts[1:]
    return len(parts) > 1 and not parts[-2].endswith("library")


_DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


def _app_folder(
    dockerfiles: Mapping[Path, Path], image: str, folders: Mapping[str, set[Path]]
) -> list[Path]:
    """The Dockerfile of the app folder the image's manifests are in (their folder or its
    parent): the one there whose own name is a word of the image's (``Dockerfile.server``
    for ``hello-mtls-server-node``, smallstep/autocert's examples); else the only plain
    ``Dockerfile`` there (``03/Dockerfile`` beside ``03/kube/knote.yaml``,
    learnk8s/knote-js), when the image is the only user image those manifests' folders run;
    failing both, the same in a folder of the app folder named ``docker`` or for a word of
    the image's (``grpc-python/docker/``, ``sample-websockets/server/`` for
    ``sample-kyma-websocket-server``: kyma-runtime-extension-samples; judge387).
    ``dockerfiles``: each Dockerfile with its resolved folder; ``folders``: each image's
    manifests' resolved folders."""
    mine = folders.get(image, set())
    others = any(
        other != image and _user_image(other) and theirs & mine for other, theirs in folders.items()
    )
    words = set(_WORDS.split(image_name(image).lower()))
    for below in (False, True):
        near = {
            d
            for d, home in dockerfiles.items()
            for f in mine
            if (
                home.parent == f.parent and home.name.lower() in {*words, "docker"}
                if below
                else home in (f, f.parent)
            )
        }
        # ``Dockerfile.server`` beside ``Dockerfile.client`` builds the image named
        # ``…-server-…`` when the image is yours: of a user's repository, or named for the
        # folder too (``hello-mtls-server-node`` in ``node/``), not a third party's
        named = [
            d
            for d in near
            if (own := dockerfile_name(d.name))
            and own.lower() in words
            and (_user_image(image) or dockerfiles[d].name.lower() in words)
        ]
        if named:
            return named if len(named) == 1 else []
        plain = [d for d in near if d.name in PLAIN]  # a Dockerfile.dev beside it aside
        if plain:
            return plain if len(plain) == 1 and not others and _user_image(image) else []
    return []


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
        own = dockerfile_name(path.name)
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
        if depth == 0:
            candidates = _nearest(candidates, folders.get(image, set()))
        if len(set(candidates)) != 1:
            return None  # none, or ambiguous
        path = candidates[0]
        key = (path, tuple((run or {}).get(image, ())) if depth == 0 else ())
        if key not in read:
            read[key] = read_dockerfile(*key)
        facts = read[key]
        base = facts.base if facts is not None else final_base(path)
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
