"""The Jobs and pods that clients of ``lab serve`` create, run for real (issue 18).

A client (``svcdoctor probe``, ``rollout-test``, kubectl) creates a ConfigMap and a
``batch/v1`` Job, or a ``v1`` Pod with ``spec.nodeName``; the lab runs the container's
command as a process on the pod's node, so its traffic crosses the lab's datapath:

* images are not pulled: only images named ``python…`` are accepted (422 otherwise), and
  the command (``python -I /svcdoctor/agent.py …``) runs with the lab's interpreter
  (``sys.executable``); paths under a volume's ``mountPath`` point at a directory the lab
  wrote the ConfigMap's keys to (``configMap`` and ``emptyDir`` volumes only);
* the process runs in the node's network namespace on the kernel datapath (``ip netns
  exec``, as the lab's own pods), on the host on the userspace one, where a node's Service
  address is its proxy: the Service's ``ClusterIP:port`` (and its DNS names) in the
  arguments become that node's proxy address (the one rule the lab adds);
* env: ``HOSTNAME`` = the pod's name, plain ``value`` entries and ``fieldRef`` to the pod's
  name, namespace, uid, node, IPs; resources are recorded, not enforced;
* the process runs as the user its securityContext names (``runAsUser``/``runAsGroup``, the
  container's over the pod's), else as ``nobody`` (65534): never as root unless
  ``runAsUser: 0`` asks for it (``setpriv``, with supplementary groups cleared); its
  directory is its user's; ``runAsNonRoot`` with user 0 does not start
  (``CreateContainerConfigError``, as the kubelet refuses it). When the lab's interpreter is
  not executable by that user (installed under a private home), the system's ``python3``
  runs the pod;
* stdout and stderr are the container's log (``pods/log``, followed while it runs); the pod
  goes Pending → Running → Succeeded | Failed with its container's exit code, the Job's
  status (active/succeeded/failed, startTime, completionTime, conditions) follows its pod;
  ``activeDeadlineSeconds`` (Job and Pod) ends it (Failed, ``DeadlineExceeded``),
  ``ttlSecondsAfterFinished`` deletes a finished Job, ``backoffLimit`` retries a failed pod
  (after 1 s, 2 s, 4 s … at most 10 s: the lab's shorter backoff);
* DELETE sends SIGTERM and SIGKILL after the grace period, the pod leaves the store when its
  process is gone; a Job deleted with propagation Background or Foreground takes its pods,
  and ConfigMaps owned by it (``ownerReferences``) are garbage-collected with it;
* at most ``MAX_PROCESSES`` pods run at once (more: 403, as an exceeded quota), every process
  is killed when the serve ends, and dies with the lab (``PDEATHSIG``); ``cleanup`` finds
  those of a lab that was killed by their working directory (``JOBS_SUFFIX``).

The conversions (objects → a ``Launch``, facts → statuses) are pure, in ``jobspec``;
``JobRunner`` owns the processes and writes the statuses into the API server's store.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svcdoctor.lab.apiserver import Admission, ObjectStore, StatusError, Verb, invalid
from svcdoctor.lab.jobspec import (
    JobFacts,
    Launch,
    Obj,
    PodFacts,
    Refused,
    Waiting,
    check_job,
    check_pod_spec,
    invalid_field,
    job_defaults,
    job_pod,
    job_status,
    owned_by,
    plan,
    pod_status,
    random_suffix,
    service_rewrites,
)
from svcdoctor.lab.logs import log_time
from svcdoctor.lab.names import NAMESPACE

MAX_PROCESSES = 20  # pods running at once (a quota: more are refused)
NOBODY = 65534  # the user (and group) of pods that name none: Debian base-passwd's nobody
# what an interpreter must import to run the agent (svcdoctor.cluster's stdlib-only program)
INTERPRETER_CHECK = "import asyncio, json, ssl, http.client"
SYSTEM_PYTHONS = ("/usr/local/bin/python3", "/usr/bin/python3")
MAX_LOG_BYTES = 64 << 20  # per pod; later lines are dropped (a note says so)
MAX_BACKOFF = 10.0  # seconds before a failed Job pod is replaced, at most
CONFIGMAP_POLL = 0.25  # seconds between looks for a ConfigMap a pod waits for
JOBS_SUFFIX = "-jobs"  # the lab's working directory: LOCK_DIR/<prefix>-jobs/<pod>/


# ---- the processes -----------------------------------------------------------------------
class _Log:
    """A container's log: timestamped lines, read whole from the API server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chunks: list[str] = []
        self._text = ""
        self._size = 0
        self._full = False

    def add(self, line: str) -> None:
        entry = f"{log_time(time.time())} {line if line.endswith(chr(10)) else line + chr(10)}"
        with self._lock:
            if self._full:
                return
            if self._size + len(entry) > MAX_LOG_BYTES:
                self._full = True
                entry = f"{log_time(time.time())} [lab: log truncated at {MAX_LOG_BYTES} bytes]\n"
            self._chunks.append(entry)
            self._size += len(entry)

    def text(self, container: str | None = None) -> str:
        with self._lock:
            if self._chunks:
                self._text += "".join(self._chunks)
                self._chunks.clear()
            return self._text


@dataclass(frozen=True, slots=True)
class RunAs:
    """Who a pod's process is: user and group, and why the kubelet would not start it."""

    uid: int
    gid: int
    refused: str = ""

    def prefix(self, setpriv: str) -> list[str]:
        """The command that switches to this user before the interpreter (none for root)."""
        if (self.uid, self.gid) == (0, 0):
            return []
        ids = [f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]
        return [setpriv, *ids, "--pdeathsig=KILL", "--"]  # PDEATHSIG is reset by setuid


def run_as(spec: Obj) -> RunAs:
    """The user ``spec``'s first container runs as: ``runAsUser``/``runAsGroup`` of its
    securityContext, else the pod's, else ``NOBODY``; a group not given is the user's
    ``NOBODY`` group (root's: 0)."""
    pod = spec.get("securityContext") or {}
    own = spec["containers"][0].get("securityContext") or {}

    def pick(key: str) -> Any:
        return own[key] if own.get(key) is not None else pod.get(key)

    uid = NOBODY if pick("runAsUser") is None else int(pick("runAsUser"))
    gid = pick("runAsGroup")
    gid = (0 if uid == 0 else NOBODY) if gid is None else int(gid)
    refused = ""
    if uid == 0 and pick("runAsNonRoot"):  # kubelet's verifyRunAsNonRoot wording
        refused = "container's runAsUser breaks non-root policy"
    return RunAs(uid, gid, refused)


@dataclass
class _Pod:
    name: str
    node: int
    image: str
    container: str
    grace: float
    job: str | None  # the owning Job's name
    directory: Path
    run_as: RunAs
    created: float = field(default_factory=time.time)
    log: _Log = field(default_factory=_Log)
    process: asyncio.subprocess.Process | None = None
    started: float | None = None
    finished: float | None = None
    exit_code: int | None = None
    waiting: str = "ContainerCreating"
    waiting_message: str = ""
    deadline_exceeded: bool = False
    deleting: bool = False
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Job:
    name: str
    uid: str
    backoff_limit: int
    facts: JobFacts
    pods: list[str] = field(default_factory=list)
    timers: list[asyncio.TimerHandle] = field(default_factory=list)
    deleted: bool = False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass(frozen=True, slots=True)
class Placement:
    """The lab's nodes as the runner needs them: the network namespace of node i (None: the
    host's), its InternalIP, where the Service leads from it, and whether it is cordoned
    (a pod without ``nodeName`` is not placed there)."""

    nodes: int
    netns: Callable[[int], str | None]
    node_ip: Callable[[int], str]
    service: Callable[[int], tuple[str, int]]
    cordoned: Callable[[int], bool] = lambda node: False


class JobRunner:
    """Runs the Jobs and pods of one lab's API clients; statuses go to ``store``."""

    def __init__(
        self,
        store: ObjectStore,
        placement: Placement,
        directory: Path,
        namespace: str = "lab",
        limit: int = MAX_PROCESSES,
    ) -> None:
        self.store = store
        self.placement = placement
        self.directory = directory
        self.namespace = namespace
        self.limit = limit
        self.pods: dict[str, _Pod] = {}
        self.jobs: dict[str, _Job] = {}
        self._next_node = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._admitted = 0  # pods and Jobs admitted, their pod not yet made
        self._interpreters: dict[tuple[int, int], str] = {}  # by user: one it can run
        self.errors: list[str] = []  # what failed in the runner itself (a bug: serve reports it)

    # -- admission (B1's hooks) ------------------------------------------------------------
    def running(self) -> int:
        """Pods counted against the limit: not finished, or admitted and not yet started."""
        return self._admitted + sum(1 for p in self.pods.values() if p.finished is None)

    def _node_index(self, name: str | None) -> int:
        if name is None:  # in turn, over the schedulable nodes (all, when none is)
            turns = [
                (self._next_node + k) % self.placement.nodes for k in range(self.placement.nodes)
            ]
            node = next((n for n in turns if not self.placement.cordoned(n)), turns[0])
            self._next_node = node + 1
            return node
        nodes = [f"node-{i}" for i in range(self.placement.nodes)]
        if name not in nodes:
            raise invalid_field("spec.nodeName", name, f"the lab's nodes are {', '.join(nodes)}")
        return nodes.index(name)

    def _quota(self) -> None:
        if self.running() >= self.limit:
            raise Refused(
                403,
                "Forbidden",
                f"exceeded quota: the lab runs at most {self.limit} pods at once",
            )

    @staticmethod
    def _exists(kind: str, name: str) -> Refused:
        plural = {"Pod": "pods", "Job": "jobs.batch"}[kind]
        return Refused(409, "AlreadyExists", f'{plural} "{name}" already exists')

    def admit_pod(self, pod: Obj, dry_run: bool) -> Obj:
        """A client's Pod: checked, placed, Pending; started once stored."""
        check_pod_spec(pod.get("spec") or {})
        if pod["metadata"]["name"] in self.pods:
            raise self._exists("Pod", pod["metadata"]["name"])
        self._quota()
        spec = dict(pod["spec"])
        node = self._node_index(spec.get("nodeName"))
        spec["nodeName"] = f"node-{node}"
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        out = {**pod, "spec": spec}
        out["status"] = pod_status(
            PodFacts(time.time(), self.placement.node_ip(node)),
            spec["containers"][0].get("name", "main"),
            spec["containers"][0]["image"],
        )
        if not dry_run:
            self._admitted += 1
            self._soon(lambda: self._start_pod(out, node, None, admitted=True))
        return out

    def admit_job(self, job: Obj, dry_run: bool) -> Obj:
        """A client's Job: checked, defaults filled; its pod created once it is stored."""
        check_job(job)
        if job["metadata"]["name"] in self.jobs:
            raise self._exists("Job", job["metadata"]["name"])
        self._quota()
        out = job_defaults(job)
        started = time.time()
        facts = JobFacts(started)
        out["status"] = job_status(facts)
        if not dry_run:
            record = _Job(
                out["metadata"]["name"],
                out["metadata"]["uid"],
                int(out["spec"]["backoffLimit"]),
                facts,
            )
            self.jobs[record.name] = record
            self._admitted += 1
            self._soon(lambda: self._job_stored(record, out))
        return out

    def delete_pod(self, name: str, grace: int | None, dry_run: bool, stored: Obj) -> Obj | None:
        """DELETE of one of our pods: a running one gets SIGTERM, then SIGKILL after the
        grace period, and leaves the store when its process is gone (the stored object,
        with its deletionTimestamp, is returned meanwhile); others go at once."""
        pod = self.pods.get(name)
        if pod is None:
            return None
        if dry_run:
            return stored if pod.process and pod.finished is None else None
        seconds = float(grace) if grace is not None else pod.grace
        if pod.finished is None and (pod.process is not None or pod.task is not None):
            self._soon(lambda: self._terminate(pod, seconds, remove=True))
            return stored
        self._forget(pod)
        return None

    def delete_job(
        self, name: str, propagation: str | None, dry_run: bool, stored: Obj
    ) -> Obj | None:
        """DELETE of a Job: its pods go too unless the propagation is Orphan (the default
        for batch/v1 when none is asked, as in Kubernetes); its ConfigMaps are collected.
        Foreground: the Job stays (``foregroundDeletion`` finalizer) until its pods are gone."""
        job = self.jobs.get(name)
        policy = propagation or "Orphan"
        foreground = policy == "Foreground" and job is not None and job.pods
        kept = (
            {**stored, "metadata": {**stored["metadata"], "finalizers": ["foregroundDeletion"]}}
            if foreground
            else None
        )
        if job is None or dry_run:
            return kept
        job.deleted = True
        for timer in job.timers:
            timer.cancel()
        self._soon(lambda: self._collect(job, orphan=policy == "Orphan", remove=bool(kept)))
        return kept

    # -- lifecycle ---------------------------------------------------------------------------
    def _soon(self, action: Callable[[], Any]) -> None:
        """Act once the API server stored the object (it stores before yielding)."""

        def run() -> None:
            try:
                result = action()
            except Exception as exc:  # kept: the serve reports it
                self.errors.append(f"{type(exc).__name__}: {exc}")
                return
            if asyncio.iscoroutine(result):
                task = asyncio.create_task(result)
                self._tasks.add(task)
                task.add_done_callback(self._done)

        asyncio.get_running_loop().call_soon(run)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _stored(self, kind: str, obj: Obj) -> bool:
        """Whether the API server stored ``obj`` (not refused after the hook)."""
        api_version = "batch/v1" if kind == "Job" else "v1"
        found = self.store.get(api_version, kind, self.namespace, obj["metadata"]["name"])
        return found is not None and found["metadata"].get("uid") == obj["metadata"]["uid"]

    def _job_stored(self, job: _Job, obj: Obj) -> None:
        self._admitted -= 1
        if not self._stored("Job", obj):
            self.jobs.pop(job.name, None)
            return
        if job.deleted or self._closed:
            return
        self._job_pod(job, obj)
        deadline = obj["spec"].get("activeDeadlineSeconds")
        if deadline is not None:
            loop = asyncio.get_running_loop()
            job.timers.append(loop.call_later(float(deadline), self._job_deadline, job))

    def _job_pod(self, job: _Job, obj: Obj | None = None) -> None:
        obj = obj or self.store.get("batch/v1", "Job", self.namespace, job.name)
        if obj is None or job.deleted or self._closed:
            return
        name = f"{job.name}-{random_suffix()}"
        while name in self.pods:
            name = f"{job.name}-{random_suffix()}"
        pod = job_pod(obj, name)
        node = self._node_index(pod["spec"].get("nodeName"))
        pod["spec"]["nodeName"] = f"node-{node}"
        job.pods.append(name)
        self._set_job(job, active=job.facts.active + 1)
        self._start_pod(pod, node, job.name)

    def _start_pod(self, obj: Obj, node: int, job: str | None, admitted: bool = False) -> None:
        self._admitted -= admitted
        if self._closed or (job is None and not self._stored("Pod", obj)):
            return
        container = obj["spec"]["containers"][0]
        name = obj["metadata"]["name"]
        pod = _Pod(
            name,
            node,
            container["image"],
            container.get("name", "main"),
            float(obj["spec"].get("terminationGracePeriodSeconds", 30)),
            job,
            self.directory / name,
            run_as(obj["spec"]),
        )
        self.pods[name] = pod
        if job is not None:  # the Job controller's pod: we put it in the store
            self.store.put({**obj, "status": self._pod_status(pod)})
        self.store.set_logs(self.namespace, name, pod.log.text, timestamped=True)
        pod.task = asyncio.create_task(self._run(pod))
        pod.task.add_done_callback(self._done)
        deadline = obj["spec"].get("activeDeadlineSeconds")
        if deadline is not None:
            asyncio.get_running_loop().call_later(float(deadline), self._pod_deadline, pod)

    def _pod_status(self, pod: _Pod) -> Obj:
        facts = PodFacts(
            pod.created,
            self.placement.node_ip(pod.node),
            pod.started,
            pod.finished,
            pod.exit_code,
            pod.waiting,
            pod.waiting_message,
            pod.deadline_exceeded,
        )
        return pod_status(facts, pod.container, pod.image)

    def _update_pod(self, pod: _Pod) -> None:
        stored = self.store.get("v1", "Pod", self.namespace, pod.name)
        if stored is not None:
            self.store.put({**stored, "status": self._pod_status(pod)})

    async def _run(self, pod: _Pod) -> None:
        """Wait for the pod's ConfigMaps, write them, run the process to its end."""
        try:
            launch = await self._launch(pod)
            if launch is None:
                return
            if pod.run_as.refused:  # the kubelet does not start it: it stays Pending
                pod.waiting, pod.waiting_message = "CreateContainerConfigError", pod.run_as.refused
                self._update_pod(pod)
                return
            await asyncio.to_thread(self._write, pod.directory, launch, pod.run_as)
            netns = self.placement.netns(pod.node)
            ip = shutil.which("ip") or "ip"
            prefix = [ip, "netns", "exec", netns] if netns else []
            user = pod.run_as.prefix(_setpriv(pod.run_as))
            python = await self._interpreter(pod.run_as, user)
            pod.process = await asyncio.create_subprocess_exec(
                *prefix,
                *user,
                python,
                *launch.argv,
                cwd=launch.cwd,
                env=dict(launch.env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            pod.started = time.time()
            self._update_pod(pod)
            assert pod.process.stdout is not None
            assert pod.process.stderr is not None
            await asyncio.gather(
                self._read(pod.process.stdout, pod.log), self._read(pod.process.stderr, pod.log)
            )
            code = await pod.process.wait()
            pod.exit_code = code if code >= 0 else 128 - code
        except OSError as exc:  # the interpreter could not start: the container errs
            pod.log.add(f"lab: could not start the process: {exc}")
            pod.exit_code = 128
            pod.started = pod.started or time.time()
        finally:
            if pod.started is not None and pod.finished is None:
                pod.finished = time.time()
            pod.done.set()
        self._update_pod(pod)
        if pod.deleting:
            self._forget(pod)
        if pod.job is not None and pod.job in self.jobs:
            self._pod_finished(self.jobs[pod.job], pod)

    async def _launch(self, pod: _Pod) -> Launch | None:
        addresses = service_rewrites(NAMESPACE, self.placement.service(pod.node))
        while not pod.deleting and not self._closed:
            obj = self.store.get("v1", "Pod", self.namespace, pod.name)
            if obj is None:
                return None
            try:
                return plan(obj, self._configmap, addresses, pod.directory)
            except Waiting as why:
                if pod.waiting_message != str(why):
                    pod.waiting_message = str(why)
                    self._update_pod(pod)
            await asyncio.sleep(CONFIGMAP_POLL)
        return None

    def _configmap(self, name: str) -> Obj | None:
        return self.store.get("v1", "ConfigMap", self.namespace, name)

    async def _interpreter(self, who: RunAs, user: list[str]) -> str:
        """An interpreter ``who`` can run: the lab's, else the system's ``python3`` (the
        lab's may live in a home directory others cannot enter); raises OSError."""
        known = self._interpreters.get((who.uid, who.gid))
        if known is not None:
            return known
        for python in dict.fromkeys((sys.executable, *SYSTEM_PYTHONS)):
            if not user or (os.path.exists(python) and await _runs(user, python)):
                self._interpreters[(who.uid, who.gid)] = python
                return python
        raise OSError(
            f"no Python interpreter that uid {who.uid} may run (the lab's is "
            f"{sys.executable}); runAsUser: 0 runs the pod as root"
        )

    @staticmethod
    def _write(directory: Path, launch: Launch, who: RunAs) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for folder in launch.dirs:
            (directory / folder).mkdir(parents=True, exist_ok=True)
        for path, text in launch.files.items():
            target = directory / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        for entry in (directory, *directory.rglob("*")):  # the pod's files are its user's
            os.chown(entry, who.uid, who.gid, follow_symlinks=False)

    @staticmethod
    async def _read(stream: asyncio.StreamReader, log: _Log) -> None:
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line over the stream's limit: take what is there
                line = await stream.read(1 << 16)
            if not line:
                return
            log.add(line.decode(errors="replace"))

    async def _terminate(self, pod: _Pod, grace: float, remove: bool) -> None:
        """SIGTERM, SIGKILL after ``grace`` seconds; ``remove``: then out of the store."""
        pod.deleting = pod.deleting or remove
        process = pod.process
        if process is None or process.returncode is not None:
            if pod.task is not None and pod.started is None:
                pod.task.cancel()  # still waiting for its ConfigMaps
                with contextlib.suppress(asyncio.CancelledError):
                    await pod.task
            if remove:
                self._forget(pod)
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(pod.done.wait()), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await pod.done.wait()

    def _forget(self, pod: _Pod) -> None:
        """The pod is gone: out of the store, its log and directory removed."""
        self.store.delete("v1", "Pod", self.namespace, pod.name)
        drop = getattr(self.store, "drop_logs", None)
        if drop is not None:
            drop(self.namespace, pod.name)
        self.pods.pop(pod.name, None)
        shutil.rmtree(pod.directory, ignore_errors=True)

    def _pod_deadline(self, pod: _Pod) -> None:
        if pod.finished is not None or pod.name not in self.pods:
            return
        pod.deadline_exceeded = True
        self._soon(lambda: self._end_at_deadline(pod))

    async def _end_at_deadline(self, pod: _Pod) -> None:
        """Kill the pod past its ``activeDeadlineSeconds``: SIGTERM, SIGKILL after its grace;
        one whose container has not started yet (its ConfigMaps missing, a slow start) is
        Failed all the same, its container killed before it ran (exit 137, as the kubelet
        reports a container it killed without a status)."""
        await self._terminate(pod, pod.grace, remove=False)
        if pod.started is None and pod.finished is None:
            pod.finished, pod.exit_code = time.time(), 137
            pod.done.set()
            self._update_pod(pod)
            if pod.job is not None and pod.job in self.jobs:
                self._pod_finished(self.jobs[pod.job], pod)

    # -- the Job controller --------------------------------------------------------------------
    def _set_job(self, job: _Job, **changes: Any) -> None:
        from dataclasses import replace

        job.facts = replace(job.facts, **changes)
        stored = self.store.get("batch/v1", "Job", self.namespace, job.name)
        if stored is not None and not job.deleted:
            self.store.put({**stored, "status": job_status(job.facts)})

    def _pod_finished(self, job: _Job, pod: _Pod) -> None:
        facts = job.facts
        active = max(facts.active - 1, 0)
        if facts.outcome is not None:
            self._set_job(job, active=active)
            return
        if pod.exit_code == 0:
            self._finish(job, "Complete", active=active, succeeded=facts.succeeded + 1)
            return
        failed = facts.failed + 1
        if failed > job.backoff_limit:
            self._finish(
                job,
                "Failed",
                active=active,
                failed=failed,
                reason="BackoffLimitExceeded",
                message="Job has reached the specified backoff limit",
            )
            return
        self._set_job(job, active=active, failed=failed)
        delay = min(2 ** (failed - 1), MAX_BACKOFF)
        job.timers.append(asyncio.get_running_loop().call_later(delay, self._job_pod, job))

    def _finish(self, job: _Job, outcome: str, **changes: Any) -> None:
        self._set_job(job, outcome=outcome, finished=time.time(), **changes)
        stored = self.store.get("batch/v1", "Job", self.namespace, job.name)
        ttl = (stored or {}).get("spec", {}).get("ttlSecondsAfterFinished")
        if ttl is not None:
            loop = asyncio.get_running_loop()
            job.timers.append(loop.call_later(float(ttl), self._expire, job))

    def _job_deadline(self, job: _Job) -> None:
        if job.facts.outcome is not None or job.deleted:
            return
        self._finish(
            job,
            "Failed",
            reason="DeadlineExceeded",
            message="Job was active longer than specified deadline",
        )
        for name in list(job.pods):  # the Job controller deletes its active pods
            pod = self.pods.get(name)
            if pod is not None and pod.finished is None:
                self._soon(functools.partial(self._terminate, pod, pod.grace, remove=True))

    def _expire(self, job: _Job) -> None:
        """ttlSecondsAfterFinished: the TTL controller deletes the Job (in the foreground)."""
        if job.deleted:
            return
        job.deleted = True
        self.store.delete("batch/v1", "Job", self.namespace, job.name)
        self._soon(lambda: self._collect(job, orphan=False))

    async def _collect(self, job: _Job, orphan: bool, remove: bool = False) -> None:
        """The garbage collector after a Job is deleted: its pods and the pods it owns
        (unless orphaned), then (``remove``: a foreground deletion) the Job, and the
        ConfigMaps it owns."""
        self.jobs.pop(job.name, None)
        if not orphan:
            owned = {p["metadata"]["name"] for p in self._list("v1", "Pod") if owned_by(p, job.uid)}
            pods = [p for n, p in self.pods.items() if n in owned or n in job.pods]
            await asyncio.gather(*(self._terminate(p, p.grace, remove=True) for p in pods))
        if remove:
            self.store.delete("batch/v1", "Job", self.namespace, job.name)
        for cm in self._list("v1", "ConfigMap"):
            if owned_by(cm, job.uid):
                self.store.delete("v1", "ConfigMap", self.namespace, cm["metadata"]["name"])

    def _list(self, api_version: str, kind: str) -> Sequence[Obj]:
        return self.store.select(api_version, kind, self.namespace)

    # -- the end -------------------------------------------------------------------------------
    async def close(self) -> None:
        """Kill every process at once (the serve ends), remove the pods' directories."""
        self._closed = True
        for job in self.jobs.values():
            for timer in job.timers:
                timer.cancel()
        for pod in self.pods.values():
            if pod.process is not None and pod.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pod.process.pid, signal.SIGKILL)
        tasks = [p.task for p in self.pods.values() if p.task is not None] + list(self._tasks)
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for pod in self.pods.values():
            if pod.process is not None and pod.process.returncode is None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pod.process.wait(), 5)
        shutil.rmtree(self.directory, ignore_errors=True)


def _setpriv(who: RunAs) -> str:
    """util-linux's setpriv, which switches users (needed for any user but root)."""
    found = shutil.which("setpriv")
    if found is None and (who.uid, who.gid) != (0, 0):
        raise OSError(f"setpriv (util-linux) is needed to run the pod as uid {who.uid}")
    return found or "setpriv"


async def _runs(user: list[str], python: str) -> bool:
    """Whether ``python`` starts (and imports what the agent needs) as ``user``."""
    try:
        process = await asyncio.create_subprocess_exec(
            *user,
            python,
            "-I",
            "-c",
            INTERPRETER_CHECK,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return False
    try:
        return await asyncio.wait_for(process.wait(), 20) == 0
    except TimeoutError:
        process.kill()
        await process.wait()
        return False


def jobs_directory(lock_dir: Path, prefix: str) -> Path:
    """Where a lab keeps its pods' files: found by ``cleanup`` when the lab is gone."""
    return lock_dir / f"{prefix}{JOBS_SUFFIX}"


def handler_for(runner: JobRunner, resource: str) -> Callable[[Admission], Obj | None]:
    """The API server's hook for ``resource`` (pods, jobs), mapping refusals to Status."""

    def handle(adm: Admission) -> Obj | None:
        try:
            if resource == "pods":
                if adm.verb == Verb.CREATE:
                    return runner.admit_pod(adm.obj, adm.dry_run)
                if adm.verb == Verb.DELETE:
                    if adm.name not in runner.pods:
                        raise Refused(
                            403,
                            "Forbidden",
                            f'pods "{adm.name}" is forbidden: the lab deletes its own pods '
                            "(the Deployment's, the load's) only by a rollout",
                        )
                    return runner.delete_pod(adm.name, adm.grace_seconds, adm.dry_run, adm.obj)
                return None
            if resource == "jobs":
                if adm.verb == Verb.CREATE:
                    return runner.admit_job(adm.obj, adm.dry_run)
                if adm.verb == Verb.DELETE:
                    return runner.delete_job(adm.name, adm.propagation, adm.dry_run, adm.obj)
                return None
            return None
        except Refused as refused:
            if refused.code == 422:
                raise invalid(adm.obj, refused.field, refused.value, str(refused)) from None
            raise StatusError(refused.code, refused.reason, str(refused)) from None

    return handle
