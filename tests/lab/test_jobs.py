"""The lab runs its API clients' Jobs and pods (``svcdoctor.lab.jobs``): the conversions
without processes, then ``lab serve`` for real with the real kubectl v1.35 and the real
agent (``svcdoctor/cluster/agent.py``) as the Job's container, on both datapaths."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.lab import jobs, jobspec
from svcdoctor.lab.datapath import Backend, UserspaceDatapath
from svcdoctor.lab.kernel import available, rules
from tests.kubectl import kubectl_path

KERNEL_MISSING = available()
AGENT = Path(__file__).resolve().parents[2] / "src" / "svcdoctor" / "cluster" / "agent.py"
VIP = "10.96.77.10:80"


# ---- pure conversions ------------------------------------------------------------------------
def _spec(image: str = "python:3.12-slim", command: list[str] | None = None) -> dict[str, Any]:
    return {
        "containers": [
            {
                "name": "agent",
                "image": image,
                "command": command or ["python", "-I", "/svcdoctor/agent.py", "--mode", "service"],
                "args": [f"--service={VIP}", "--endpoints", "api.lab.svc:80,10.233.1.10:8080"],
                "env": [
                    {
                        "name": "NODE_NAME",
                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                    },
                    {"name": "MODE", "value": "x"},
                ],
                "volumeMounts": [{"name": "code", "mountPath": "/svcdoctor"}],
            }
        ],
        "volumes": [
            {"name": "code", "configMap": {"name": "agent-cm"}},
            {"name": "t", "emptyDir": {}},
        ],
        "nodeName": "node-1",
    }


@pytest.mark.parametrize(
    "image", ["python:3.12-slim", "docker.io/library/python:3.9", "python@sha256:abc", "python"]
)
def test_python_images_are_accepted(image: str) -> None:
    jobspec.check_pod_spec(_spec(image))


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        (
            _spec("nginx:1.27"),
            "containers[0].image",
            "the lab runs only python images (the agent); got nginx:1.27",
        ),
        (_spec("mypython:1"), "containers[0].image", "got mypython:1"),
        (_spec(command=["sh", "-c", "sleep 1"]), "containers[0].command", "python commands only"),
        (
            {**_spec(), "volumes": [{"name": "s", "secret": {}}]},
            "volumes[0]",
            "configMap and emptyDir",
        ),
    ],
)
def test_what_the_lab_cannot_run_is_refused(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(jobspec.Refused) as caught:
        jobspec.check_pod_spec(spec)
    assert caught.value.code == 422
    assert caught.value.field == f"spec.{field}"
    assert words in str(caught.value)


def test_plan_writes_the_configmap_and_rewrites_paths_and_service_addresses(tmp_path: Path) -> None:
    pod = {"metadata": {"name": "probe-abcde", "namespace": "lab", "uid": "u1"}, "spec": _spec()}
    addresses = jobspec.service_rewrites("lab", ("127.0.0.1", 41234))
    cms = {"agent-cm": {"data": {"agent.py": "print('hi')\n"}}}
    launch = jobspec.plan(pod, cms.get, addresses, tmp_path)
    assert launch.files == {"volumes/code/agent.py": "print('hi')\n"}
    assert set(launch.dirs) == {"volumes/code", "volumes/t"}
    assert launch.argv[:2] == ("-I", f"{tmp_path}/volumes/code/agent.py")
    # the ClusterIP and the DNS name lead to the node's proxy; pod addresses stay
    assert "--service=127.0.0.1:41234" in launch.argv
    assert "127.0.0.1:41234,10.233.1.10:8080" in launch.argv
    assert launch.env["HOSTNAME"] == "probe-abcde"
    assert launch.env["NODE_NAME"] == "node-1"
    assert launch.env["MODE"] == "x"
    # on the kernel datapath the VIP is real: only the names are rewritten
    kernel = jobspec.service_rewrites("lab", ("10.96.77.10", 80))
    assert jobspec.rewrite("http://api.lab.svc.cluster.local:80/x", {}, kernel) == f"http://{VIP}/x"
    assert jobspec.rewrite("myapi.lab.svc:80", {}, kernel) == "myapi.lab.svc:80"  # another host
    with pytest.raises(jobspec.Waiting, match='configmap "agent-cm" not found'):
        jobspec.plan(pod, {}.get, addresses, tmp_path)


def test_statuses_follow_the_process() -> None:
    pending = jobspec.pod_status(jobspec.PodFacts(100.0, "10.233.255.10"), "agent", "python:3")
    assert pending["phase"] == "Pending"
    assert pending["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    done = jobspec.pod_status(
        jobspec.PodFacts(100.0, "10.233.255.10", 101.0, 105.0, 137, deadline_exceeded=True),
        "agent",
        "python:3",
    )
    assert done["phase"] == "Failed"
    assert done["reason"] == "DeadlineExceeded"
    assert done["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    complete = jobspec.job_status(
        jobspec.JobFacts(100.0, succeeded=1, finished=105.0, outcome="Complete")
    )
    assert [c["type"] for c in complete["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert complete["completionTime"] == "1970-01-01T00:01:45Z"
    failed = jobspec.job_status(
        jobspec.JobFacts(
            100.0, failed=1, finished=105.0, outcome="Failed", reason="DeadlineExceeded"
        )
    )
    assert [(c["type"], c["reason"]) for c in failed["conditions"]] == [
        ("FailureTarget", "DeadlineExceeded"),
        ("Failed", "DeadlineExceeded"),
    ]
    assert "completionTime" not in failed


def test_job_defaults_and_its_pod() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe", "namespace": "lab", "uid": "u-1"},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": _spec()}},
    }
    jobspec.check_job(job)
    full = jobspec.job_defaults(job)
    assert full["spec"]["selector"] == {
        "matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}
    }
    pod = jobspec.job_pod(full, "probe-x2b4z")
    labels = pod["metadata"]["labels"]
    assert labels["a"] == "b"
    assert labels["job-name"] == labels["batch.kubernetes.io/job-name"] == "probe"
    assert labels["controller-uid"] == "u-1"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert jobspec.owned_by(pod, "u-1")
    with pytest.raises(jobspec.Refused, match="one pod"):
        jobspec.check_job({**job, "spec": {**job["spec"], "parallelism": 3}})


def test_broken_node_rules_reject_on_the_original_destination() -> None:
    text = rules([Backend("p", "10.233.1.10", 8080)], broken=0.3)
    line = next(line for line in text.splitlines() if "broken node" in line)
    assert "--ctorigdst 10.96.77.10/32" in line
    assert "--probability 0.30000000000" in line
    assert line.endswith("-j REJECT --reject-with tcp-reset")
    assert "broken" not in rules([Backend("p", "10.233.1.10", 8080)])


def test_broken_userspace_node_resets_its_share() -> None:
    async def main() -> tuple[int, int]:
        async def app(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(app, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        dp = UserspaceDatapath(seed=3)
        dp.break_node(1, 0.5)
        await dp.start(2)
        counts = []
        for node in (0, 1):
            dp.program(node, [Backend("p", "127.0.0.1", port)])
            ok = 0
            for _ in range(60):
                try:
                    r, w = await asyncio.open_connection(*dp.service_address(node))
                    w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    ok += (await r.readline()).startswith(b"HTTP/1.1 200")
                    w.close()
                except OSError:
                    pass
            counts.append(ok)
        await dp.close()
        server.close()
        return counts[0], counts[1]

    healthy, broken = asyncio.run(main())
    assert healthy == 60
    assert 10 < broken < 50  # about half


def test_cleanup_finds_the_job_processes_of_a_dead_lab(tmp_path: Path) -> None:
    from svcdoctor.lab.cleanup import leftovers, lock_dir, remove
    from tests.conftest import deliberate_leftovers

    with deliberate_leftovers():
        folder = jobs.jobs_directory(lock_dir(), "svcd0fdead") / "probe-abcde"
        folder.mkdir(parents=True)
        script = folder / "agent.py"
        script.write_text("import time\ntime.sleep(60)\n")
        proc = subprocess.Popen([sys.executable, "-I", str(script)], cwd=folder)
        try:
            found = leftovers()
            assert proc.pid in found.processes
            assert folder.parent in found.folders
            remove(found)
            assert proc.wait(10) == -signal.SIGKILL
            assert not folder.parent.exists()
        finally:
            if proc.poll() is None:
                proc.kill()


# ---- the runner with a real store and real processes, without a server ----------------------
STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: print("got SIGTERM", flush=True))
print("started", sys.argv[1:], flush=True)
time.sleep(60)
"""


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Path]:
    """A directory the pods' unprivileged user can enter (pytest's tmp_path is root's only,
    as /run/svcdoctor, the lab's, is not)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="svcdoctor-jobs-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_runner_quota_deletion_grace_and_deadline(reachable: Path) -> None:
    """A pod that ignores SIGTERM is killed after its grace period, then leaves the store; the
    quota refuses more pods; activeDeadlineSeconds fails a pod with DeadlineExceeded, one
    whose container never started too."""
    from svcdoctor.lab.apiserver import ObjectStore

    tmp_path = reachable

    def pod(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "lab", "uid": name},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "python:3.12",
                        "command": ["python3", "-I", "/code/main.py", f"--service={VIP}"],
                        "volumeMounts": [{"name": "code", "mountPath": "/code"}],
                    }
                ],
                "volumes": [{"name": "code", "configMap": {"name": "code"}}],
                "terminationGracePeriodSeconds": 1,
                **spec,
            },
        }

    async def main() -> None:
        store = ObjectStore()
        place = jobs.Placement(
            2, lambda n: None, lambda n: "127.0.0.1", lambda n: ("127.0.0.1", 4242)
        )
        runner = jobs.JobRunner(store, place, tmp_path / "svcd000000-jobs", limit=2)
        store.put(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "code", "namespace": "lab"},
                "data": {"main.py": STUBBORN},
            }
        )

        # pods are Python processes started in namespaces: seconds each on a loaded CI
        # machine (10 s timed out twice there, on a's start and on b's deadline)
        async def until(check: Any, timeout: float = 30) -> None:
            end = time.time() + timeout
            while not check():
                assert time.time() < end, "timed out"
                await asyncio.sleep(0.05)

        def phase(name: str) -> str | None:
            found = store.get("v1", "Pod", "lab", name)
            return found["status"]["phase"] if found else None

        # b's deadline leaves its process time to start on a loaded machine (it timed out
        # there at 1 s: killed before it ran); c's below never starts at all
        for name, spec in (("a", {}), ("b", {"activeDeadlineSeconds": 6})):
            store.put(runner.admit_pod(pod(name, **spec), dry_run=False))
        with pytest.raises(jobspec.Refused, match="at most 2 pods"):
            runner.admit_pod(pod("c"), dry_run=False)
        await until(lambda: phase("a") == "Running" and "started" in runner.pods["a"].log.text())
        assert "['--service=127.0.0.1:4242']" in runner.pods["a"].log.text()
        assert store.get("v1", "Pod", "lab", "a")["spec"]["nodeName"] == "node-0"
        assert store.get("v1", "Pod", "lab", "b")["spec"]["nodeName"] == "node-1"
        began = time.time()
        stored = store.get("v1", "Pod", "lab", "a")
        assert runner.delete_pod("a", None, False, stored) is stored  # graceful: kept for now
        await until(lambda: phase("a") is None)
        assert 0.9 < time.time() - began < 5  # SIGTERM ignored: SIGKILL after 1 s
        await until(lambda: phase("b") == "Failed")
        status = store.get("v1", "Pod", "lab", "b")["status"]
        assert status["reason"] == "DeadlineExceeded"
        assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        assert "got SIGTERM" in runner.pods["b"].log.text()
        # past its deadline before its container starts (its ConfigMap never comes): Failed
        # all the same, not Pending for ever
        waiting = pod("c", activeDeadlineSeconds=1)
        waiting["spec"]["volumes"] = [{"name": "code", "configMap": {"name": "missing"}}]
        store.put(runner.admit_pod(waiting, dry_run=False))
        await until(lambda: phase("c") == "Failed")
        status = store.get("v1", "Pod", "lab", "c")["status"]
        assert status["reason"] == "DeadlineExceeded"
        assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        await runner.close()
        assert not (tmp_path / "svcd000000-jobs").exists()
        assert runner.errors == []

    asyncio.run(main())


# ---- lab serve, for real ----------------------------------------------------------------------
@pytest.fixture(scope="session")
def kubectl() -> Path:
    return kubectl_path()


DRIVER = """
import asyncio, json, sys
from dataclasses import replace
from pathlib import Path
from svcdoctor.lab.scenarios import SCENARIOS
from svcdoctor.lab.serve import serve

def announce(info):
    print(json.dumps({"url": info.url, "datapath": info.datapath}), flush=True)

name, datapath, kubeconfig, seconds, load, pause = sys.argv[1:7]
scenario = replace(SCENARIOS[name], pause=float(pause)) if pause else SCENARIOS[name]
asyncio.run(serve(scenario, datapath, Path(kubeconfig), float(seconds), None, 1,
                  announce, None, load_on=load == "load"))
"""


class Lab:
    """A ``lab serve`` process and kubectl pointed at it."""

    def __init__(self, proc: subprocess.Popen[str], kubeconfig: Path, kubectl: Path) -> None:
        self.proc = proc
        self.kubeconfig = kubeconfig
        self.binary = kubectl
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            proc.wait(30)
            raise AssertionError(proc.stderr.read() if proc.stderr else "lab serve ended")
        self.info = json.loads(line)

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), "-n", "lab", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def kubectl(self, *args: str, timeout: float = 30) -> str:
        done = self.run(*args, timeout=timeout)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def follow(self, what: str) -> subprocess.Popen[str]:
        """``kubectl logs -f`` in the background."""
        return subprocess.Popen(
            [
                str(self.binary),
                "--kubeconfig",
                str(self.kubeconfig),
                "-n",
                "lab",
                "logs",
                "-f",
                what,
                "--pod-running-timeout=20s",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def get(self, *args: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", *args, "-o", "json")))

    def create(self, obj: dict[str, Any]) -> None:
        path = self.kubeconfig.parent / f"{obj['kind']}-{obj['metadata']['name']}.json"
        path.write_text(json.dumps(obj))
        self.kubectl("create", "-f", str(path))

    def wait_for(self, what: str, check: Any, timeout: float = 20) -> Any:
        end = time.time() + timeout
        while time.time() < end:
            with contextlib.suppress(AssertionError, json.JSONDecodeError):
                found = check()
                if found:
                    return found
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def _lab(
    tmp_path: Path,
    kubectl: Path,
    datapath: str,
    scenario: str = "race",
    load: bool = False,
    pause: float | None = None,
) -> Iterator[Lab]:
    """``lab serve`` through the CLI (``--no-load``), or a driver calling ``serve`` for
    scenarios the CLI's choices do not list yet and shorter pauses between deletions."""
    kubeconfig = tmp_path / "kubeconfig"
    if scenario == "race" and pause is None:
        command = [
            sys.executable, "-m", "svcdoctor", "lab", "serve", "--scenario", scenario,
            "--datapath", datapath, "--for", "90", "--kubeconfig-out", str(kubeconfig),
            "--format", "json", "--load" if load else "--no-load",
        ]  # fmt: skip
    else:
        command = [
            sys.executable, "-c", DRIVER, scenario, datapath, str(kubeconfig), "90",
            "load" if load else "no-load", "" if pause is None else str(pause),
        ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield Lab(proc, kubeconfig, kubectl)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)


def _configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "svcdoctor"}},
        "data": {"agent.py": AGENT.read_text()},
    }


def _container(args: list[str], image: str = "python:3.12-slim") -> dict[str, Any]:
    return {
        "name": "agent",
        "image": image,
        "command": ["python", "-I", "/svcdoctor/agent.py", *args],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "volumeMounts": [{"name": "agent", "mountPath": "/svcdoctor", "readOnly": True}],
    }


def _job(
    name: str, args: list[str], *, image: str = "python:3.12-slim", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "svcdoctor"}},
        "spec": {
            "backoffLimit": 0,
            **spec,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/managed-by": "svcdoctor"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 3,
                    "containers": [_container(args, image)],
                    "volumes": [{"name": "agent", "configMap": {"name": f"{name}-agent"}}],
                },
            },
        },
    }


def _pod(name: str, node: str, args: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "svcdoctor"}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [_container(args)],
            "volumes": [{"name": "agent", "configMap": {"name": f"{name}-agent"}}],
        },
    }


def _service_load(rate: float, duration: float) -> list[str]:
    # 5 s per request: 1 s timed a request out through the userspace proxy on a loaded CI machine
    return [
        "--mode", "service", "--service", VIP, "--rate", str(rate), "--duration", str(duration),
        "--backend-header", "X-Pod", "--timeout", "5",
    ]  # fmt: skip


def _line_within(proc: subprocess.Popen[str], seconds: float) -> str:
    """The next line ``proc`` writes, or an AssertionError after ``seconds``."""
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(seconds), f"no output within {seconds:g} s"
    return proc.stdout.readline()


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = [c for c in job.get("status", {}).get("conditions", []) if c["type"] == kind]
    return found[0] if found else None


def _rows(log: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    rows = [r for r in lines if "outcome" in r]
    done = [r for r in lines if r.get("agent") == "done"]
    return rows, done[0] if done else None


def _job_processes(pod: str) -> list[int]:
    from svcdoctor.lab.cleanup import job_processes

    return [
        pid
        for pid in job_processes()
        if pod in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    ]


def _agent_job_lifecycle(lab: Lab) -> None:
    # a non-python image is refused at create, nothing stored
    path = lab.kubeconfig.parent / "nginx.json"
    path.write_text(json.dumps(_job("web", ["--mode", "service"], image="nginx:1.27")))
    refused = lab.run("create", "-f", str(path))
    assert refused.returncode != 0
    assert "the lab runs only python images (the agent); got nginx:1.27" in refused.stderr
    assert lab.run("get", "job", "web").returncode != 0
    # a server-side dry run runs nothing; the lab's own pods are not deleted through the API
    path.write_text(json.dumps(_job("dry", ["--mode", "service"])))
    assert "(server dry run)" in lab.kubectl("create", "--dry-run=server", "-f", str(path))
    forbidden = lab.run("delete", "pod", "api-7f6d5c4b3-00")
    assert "the lab deletes its own pods" in forbidden.stderr

    # the agent as a Job: logs followed to the end, Complete
    lab.create(_job("probe", _service_load(40, 2.5), ttlSecondsAfterFinished=600))
    lab.create(_configmap("probe-agent"))  # created after the Job: the pod waits for it
    follower = lab.follow("job/probe")
    try:  # the log streams while the agent runs
        first = _line_within(follower, 20)
        assert json.loads(first)["outcome"] == "ok"
        assert not _condition(lab.get("job", "probe"), "Complete")
    finally:
        follower.kill()
        follower.wait()
    lab.wait_for("Complete", lambda: _condition(lab.get("job", "probe"), "Complete"))
    rows, done = _rows(lab.kubectl("logs", "job/probe"))
    assert done is not None
    assert done["reason"] == "finished"
    assert done["requests"] == len(rows) >= 60
    assert {r["outcome"] for r in rows} == {"ok"}
    assert {r["backend"] for r in rows} <= {f"api-7f6d5c4b3-0{i}" for i in range(4)}
    assert len({r["backend"] for r in rows}) >= 2  # through the Service: several pods
    (pod,) = lab.get("pods", "-l", "job-name=probe")["items"]
    assert {r["client"] for r in rows} == {pod["metadata"]["name"]}
    assert {r["node"] for r in rows} == {pod["spec"]["nodeName"]}
    job = lab.wait_for(
        "Complete", lambda: (j := lab.get("job", "probe")) and _condition(j, "Complete") and j
    )
    assert job["status"]["succeeded"] == 1
    assert job["status"]["completionTime"]
    assert lab.kubectl("get", "job", "probe").splitlines()[1].split()[1:3] == ["Complete", "1/1"]
    pod = lab.wait_for(
        "Succeeded",
        lambda: (
            (p := lab.get("pod", pod["metadata"]["name"]))["status"]["phase"] == "Succeeded" and p
        ),
    )
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]

    # activeDeadlineSeconds ends a long run: Failed, DeadlineExceeded, the process gone
    lab.create(_configmap("slow-agent"))
    lab.create(
        _job("slow", _service_load(10, 60), activeDeadlineSeconds=2, ttlSecondsAfterFinished=1)
    )
    started = time.time()
    job = lab.wait_for(
        "the deadline", lambda: (j := lab.get("job", "slow")) and _condition(j, "Failed") and j
    )
    assert time.time() - started < 10
    assert _condition(job, "Failed")["reason"] == "DeadlineExceeded"  # type: ignore[index]
    lab.wait_for("the slow pods to go", lambda: not lab.get("pods", "-l", "job-name=slow")["items"])
    assert not _job_processes("slow-")
    # ttlSecondsAfterFinished: the finished Job is deleted a second later
    lab.wait_for("the slow Job to go", lambda: lab.run("get", "job", "slow").returncode != 0)

    # kubectl delete job kills the process (SIGTERM: the agent's done line) and the pod goes;
    # the ConfigMap it owns is collected with it
    cm = {**_configmap("long-agent")}
    lab.create(_job("long", _service_load(10, 60)))
    uid = lab.get("job", "long")["metadata"]["uid"]
    cm["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "long", "uid": uid}
    ]
    lab.create(cm)
    owned = _pod("long-node-1", "node-1", _service_load(10, 60))  # a per-node probe's pod
    owned["metadata"]["ownerReferences"] = cm["metadata"]["ownerReferences"]
    owned["spec"]["volumes"][0]["configMap"]["name"] = "long-agent"
    lab.create(owned)
    lab.wait_for("the owned pod to run", lambda: _job_processes("long-node-1"))
    (pod,) = lab.wait_for(
        "the long pod to run",
        lambda: [
            p
            for p in lab.get("pods", "-l", "job-name=long")["items"]
            if p["status"]["phase"] == "Running"
        ],
    )
    name = pod["metadata"]["name"]
    assert _job_processes(name)
    lab.kubectl("delete", "job", "long", "--wait=true", timeout=30)
    lab.wait_for("the long pod to go", lambda: lab.run("get", "pod", name).returncode != 0)
    assert not _job_processes(name)
    lab.wait_for("the owned pod to go", lambda: lab.run("get", "pod", "long-node-1").returncode)
    assert not _job_processes("long-node-1")
    assert lab.run("get", "cm", "long-agent").returncode != 0
    assert lab.run("get", "cm", "probe-agent").returncode == 0  # not owned: kept
    assert lab.run("get", "job", "dry").returncode != 0
    assert not _job_processes("dry-")


def _restart(lab: Lab) -> None:
    """``kubectl rollout restart`` rolls the lab's Deployment: new pods replace the old."""
    old = {p["metadata"]["name"] for p in lab.get("pods", "-l", "app=api")["items"]}
    scaled = lab.run("patch", "deployment", "api", "-p", '{"spec": {"replicas": 3}}')
    assert "changes only by a restart" in scaled.stderr
    lab.kubectl("rollout", "restart", "deployment/api")
    time.sleep(1.1)  # kubectl itself refuses a second restart within the same second
    again = lab.run("rollout", "restart", "deployment/api")
    assert again.returncode != 0
    assert "rolling out now" in again.stderr
    lab.kubectl("rollout", "status", "deployment/api", "--timeout=60s", timeout=70)
    new = lab.wait_for(
        "the old pods to go",
        lambda: (
            (names := {p["metadata"]["name"] for p in lab.get("pods", "-l", "app=api")["items"]})
            and not names & old
            and names
        ),
    )
    assert len(new) == 4
    deploy = lab.get("deployment", "api")
    assert deploy["status"]["observedGeneration"] == deploy["metadata"]["generation"] == 2
    assert (
        "kubectl.kubernetes.io/restartedAt" in deploy["spec"]["template"]["metadata"]["annotations"]
    )
    # once done, another restart rolls again, to a third ReplicaSet
    lab.kubectl("rollout", "restart", "deployment/api")
    lab.kubectl("rollout", "status", "deployment/api", "--timeout=60s", timeout=70)
    third = lab.wait_for(
        "the second rollout's pods",
        lambda: (
            (names := {p["metadata"]["name"] for p in lab.get("pods", "-l", "app=api")["items"]})
            and not names & new
            and names
        ),
    )
    assert len(third) == 4
    assert len(lab.get("replicasets")["items"]) == 3
    assert lab.get("deployment", "api")["metadata"]["generation"] == 3


@pytest.mark.lab
def test_jobs_userspace(tmp_path: Path, kubectl: Path) -> None:
    with _lab(tmp_path, kubectl, "userspace") as lab:
        assert not lab.get("pods", "-l", "app.kubernetes.io/component=load")["items"]
        _agent_job_lifecycle(lab)


@pytest.mark.lab
def test_followed_log_ends_when_the_container_exits(tmp_path: Path, kubectl: Path) -> None:
    """``kubectl logs -f`` of a Job's pod returns once the agent exited, with every line
    (the kubelet closes the stream when the container ends)."""
    with _lab(tmp_path, kubectl, "userspace") as lab:
        lab.create(_configmap("quick-agent"))
        lab.create(_job("quick", _service_load(20, 1.5)))
        follower = lab.follow("job/quick")
        try:
            log, _ = follower.communicate(timeout=20)
        finally:
            follower.kill()
        rows, done = _rows(log)
        assert done is not None
        assert done["requests"] == len(rows) > 0


@pytest.mark.lab
def test_restart_patch_rolls_userspace(tmp_path: Path, kubectl: Path) -> None:
    with _lab(tmp_path, kubectl, "userspace", pause=0.5) as lab:
        _restart(lab)


@pytest.mark.lab
@pytest.mark.skipif(bool(KERNEL_MISSING), reason=KERNEL_MISSING or "")
def test_jobs_kernel_and_cleanup_on_ctrl_c(tmp_path: Path, kubectl: Path) -> None:
    from svcdoctor.lab.cleanup import alive, job_processes, lock_dir
    from svcdoctor.lab.kernel import namespaces_of_runs

    with _lab(tmp_path, kubectl, "kernel") as lab:
        _agent_job_lifecycle(lab)
        lab.create(_configmap("left-agent"))
        lab.create(_job("left", _service_load(10, 60)))
        (pid,) = lab.wait_for("the left pod to run", lambda: _job_processes("left-"))
        prefix = job_processes()[pid]
        lab.proc.send_signal(signal.SIGINT)
        assert lab.proc.wait(30) == 0
    assert not os.path.exists(f"/proc/{pid}")
    assert prefix not in job_processes().values()
    assert not jobs.jobs_directory(lock_dir(), prefix).exists()
    assert not [ns for ns in namespaces_of_runs() if ns.startswith(f"{prefix}-")]
    assert not alive(prefix)


def _node_failures(lab: Lab) -> dict[str, float]:
    for node in ("node-0", "node-1"):
        lab.create(_configmap(f"probe-{node}-agent"))
        lab.create(_pod(f"probe-{node}", node, _service_load(60, 3)))
    shares = {}
    for node in ("node-0", "node-1"):
        lab.wait_for(
            f"probe-{node} to end",
            lambda node=node: lab.get("pod", f"probe-{node}")["status"]["phase"] == "Succeeded",
        )
        rows, done = _rows(lab.kubectl("logs", f"probe-{node}"))
        assert done is not None
        assert {r["node"] for r in rows} == {node}
        shares[node] = sum(r["outcome"] != "ok" for r in rows) / len(rows)
    return shares


@pytest.mark.lab
@pytest.mark.parametrize("datapath", ["userspace", "kernel"])
def test_broken_node_fails_its_agent(tmp_path: Path, kubectl: Path, datapath: str) -> None:
    if datapath == "kernel" and KERNEL_MISSING:
        pytest.skip(KERNEL_MISSING)
    with _lab(tmp_path, kubectl, datapath, scenario="broken-node") as lab:
        shares = _node_failures(lab)
    assert shares["node-0"] < 0.05
    assert shares["node-1"] > 0.15, shares
