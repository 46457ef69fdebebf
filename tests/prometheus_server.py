"""A real Prometheus for tests: OpenMetrics history backfilled with promtool, served on
127.0.0.1 with a temporary storage path, stopped after the test (also when it fails).

Use::

    from tests.prometheus_server import prometheus_with  # noqa: F401  (the fixture)

    def test_x(prometheus_with, tmp_path):
        url = prometheus_with(path_to_openmetrics_file)

The fixture skips the test (with a reason) when ``prometheus`` or ``promtool`` is not on
PATH. ``prometheus_with.start(...)`` returns the :class:`PromServer` (to stop it early or
read its log); ``extra_args`` pass flags such as ``--query.max-samples=1000``.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
MISSING = "needs prometheus and promtool on PATH (Debian: apt-get install prometheus)"
requires_prometheus = pytest.mark.skipif(not (PROMETHEUS and PROMTOOL), reason=MISSING)

READY_TIMEOUT = 60.0  # seconds; two loaded cores can make a start slow
# an empty scrape configuration: the server only serves what was backfilled
CONFIG = "global:\n  scrape_interval: 15s\nscrape_configs: []\n"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _label_text(labels: Mapping[str, str]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{esc(v)}"' for k, v in labels.items())


def _number(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x)) if x != int(x) else str(int(x))


Samples = Sequence[tuple[float, float]]


def write_openmetrics(
    path: Path,
    families: Mapping[str, Iterable[tuple[Mapping[str, str], Samples]]],
    types: Mapping[str, str] | None = None,
) -> Path:
    """Write ``{family: [(labels, [(unix_s, value), ...]), ...]}`` as OpenMetrics text with
    timestamps (seconds), ending in ``# EOF``. ``types``: ``family -> counter|gauge|…``
    (default ``unknown``, whose sample name is the family name; a counter's samples are
    ``family_total``)."""
    types = types or {}
    out: list[str] = []
    for family, series in families.items():
        kind = types.get(family, "unknown")
        out.append(f"# TYPE {family} {kind}")
        name = f"{family}_total" if kind == "counter" else family
        for labels, samples in series:
            lab = _label_text(labels)
            head = f"{name}{{{lab}}}" if lab else name
            out.extend(f"{head} {_number(v)} {_number(t)}" for t, v in samples)
    out.append("# EOF")
    path.write_text("\n".join(out) + "\n")
    return path


def backfill(openmetrics: Path, data: Path) -> None:
    """``promtool tsdb create-blocks-from openmetrics FILE DIR``; one clear failure."""
    if not PROMTOOL:
        pytest.skip(MISSING)
    data.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            PROMTOOL,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "-q",
            # blocks of up to a week, not 2 h: a week of history backfills in seconds (a
            # flag promtool 2.42 takes without listing it in --help)
            "--max-block-duration=168h",
            str(openmetrics),
            str(data),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"promtool failed on {openmetrics} ({done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-2000:]}"
        )


@dataclass
class PromServer:
    """One running Prometheus."""

    url: str
    process: subprocess.Popen[bytes]
    data: Path
    log: Path

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s; idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def scraped(url: str, promql: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Wait until the instant query ``promql`` has a result at ``url``; return it (empty
    after ``timeout`` seconds)."""
    query = urllib.parse.urlencode({"query": promql})
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as r:
                result: list[dict[str, Any]] = json.loads(r.read())["data"]["result"]
        except (urllib.error.URLError, OSError, KeyError, ValueError):
            result = []
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.5)


def _wait_ready(server: PromServer, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if not server.running:
            return False
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    return False


def start_prometheus(
    data: Path, *, extra_args: Sequence[str] = (), attempts: int = 3, config_text: str = CONFIG
) -> PromServer:
    """Serve the blocks in ``data`` (may be empty) on a free loopback port; wait ready.
    ``config_text``: the ``prometheus.yml`` (default: no scrape targets)."""
    if not PROMETHEUS:
        pytest.skip(MISSING)
    data.mkdir(parents=True, exist_ok=True)
    config = data.parent / f"{data.name}.yml"
    config.write_text(config_text)
    log = data.parent / f"{data.name}.log"
    last = ""
    for _ in range(attempts):
        port = _free_port()
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--config.file={config}",
                    "--storage.tsdb.retention.time=100y",
                    *extra_args,
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        server = PromServer(f"http://127.0.0.1:{port}", process, data, log)
        if _wait_ready(server, time.monotonic() + READY_TIMEOUT):
            return server
        server.stop()
        last = server.log_tail()
        if "address already in use" not in last:
            break
    raise RuntimeError(f"prometheus did not become ready: {last}")


@dataclass
class PrometheusFactory:
    """The ``prometheus_with`` fixture's value: call it with an OpenMetrics file (or None
    for an empty server) to get the base URL of a ready Prometheus serving it."""

    root: Path
    servers: list[PromServer] = field(default_factory=list)

    def start(
        self, openmetrics: Path | None = None, *, extra_args: Sequence[str] = ()
    ) -> PromServer:
        data = self.root / f"prometheus-{len(self.servers)}"
        if openmetrics is not None:
            backfill(Path(openmetrics), data)
        server = start_prometheus(data, extra_args=extra_args)
        self.servers.append(server)
        return server

    def scraping(self, config_text: str, *, extra_args: Sequence[str] = ()) -> PromServer:
        """A Prometheus scraping what ``config_text`` (a ``prometheus.yml``) names."""
        data = self.root / f"prometheus-{len(self.servers)}"
        server = start_prometheus(data, extra_args=extra_args, config_text=config_text)
        self.servers.append(server)
        return server

    def __call__(self, openmetrics: Path | None = None, *, extra_args: Sequence[str] = ()) -> str:
        return self.start(openmetrics, extra_args=extra_args).url

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture
def prometheus_with(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusFactory]:
    """Start real Prometheus servers on backfilled OpenMetrics; stop them afterwards."""
    if not (PROMETHEUS and PROMTOOL):
        pytest.skip(MISSING)
    factory = PrometheusFactory(tmp_path_factory.mktemp("prometheus"))
    try:
        yield factory
    finally:
        factory.stop_all()


Handler = Callable[[Any], Awaitable[Any]]


@contextmanager
def http_server(handler: Handler) -> Iterator[str]:
    """A real aiohttp server on 127.0.0.1 answering every path with ``handler(request)``
    (for what a real Prometheus will not do: 401/403 from a proxy, a slow or broken
    answer); yields its base URL. Runs in a thread with its own event loop."""
    web = pytest.importorskip("aiohttp.web", reason="aiohttp (the live extra) is missing")
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state: dict[str, Any] = {}

    async def serve() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"] = runner
        state["port"] = runner.addresses[0][1]
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(timeout=30)
    started.wait(30)
    try:
        yield f"http://127.0.0.1:{state['port']}"
    finally:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


__all__ = [
    "MISSING",
    "PromServer",
    "PrometheusFactory",
    "backfill",
    "http_server",
    "prometheus_with",
    "requires_prometheus",
    "scraped",
    "start_prometheus",
    "write_openmetrics",
]
