"""A real Kubernetes-shaped API server (the lab's) on loopback, for the live commands."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

pytest.importorskip("aiohttp", reason="the live extra (aiohttp) is not installed")

from svcdoctor.lab.apiserver import ApiServer, ObjectStore

if TYPE_CHECKING:
    from tests.cluster.shared_labs import BadBackend, RaceWatched, RolloutsWatched

T = TypeVar("T")


@dataclass
class Served:
    """A running server, its store, and a kubeconfig for it; ``call`` runs a function in
    the server's event loop (stores are not thread-safe)."""

    server: ApiServer
    store: ObjectStore
    kubeconfig: Path
    token: str
    loop: asyncio.AbstractEventLoop

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        done: Future[T] = Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # handed back to the test thread
                done.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return done.result(timeout=10)

    def put(self, *objects: dict[str, Any]) -> None:
        for obj in objects:
            self.call(self.store.put, obj)


def serve(tmp_path: Path, log_size: int = 10_000, **options: Any) -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    token = secrets.token_hex(16)
    store = ObjectStore(log_size=log_size)
    server = ApiServer(store, token, **options)
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=20)
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    try:
        yield Served(server, store, kubeconfig, token, loop)
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout=20)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Served]:
    yield from serve(tmp_path)


# ---- lab serves several modules check (tests/cluster/shared_labs.py), once per session --


@pytest.fixture(scope="session")
def race_watched(tmp_path_factory: pytest.TempPathFactory) -> RaceWatched:
    from tests.cluster.shared_labs import race_watched

    return race_watched(tmp_path_factory.mktemp("race-watched"))


@pytest.fixture(scope="session")
def bad_backend(tmp_path_factory: pytest.TempPathFactory) -> BadBackend:
    from tests.cluster.shared_labs import bad_backend

    return bad_backend(tmp_path_factory.mktemp("bad-backend"))


@pytest.fixture(scope="session")
def rollouts_watched(tmp_path_factory: pytest.TempPathFactory) -> RolloutsWatched:
    from tests.cluster.shared_labs import rollouts_watched

    return rollouts_watched(tmp_path_factory.mktemp("rollouts-watched"))
