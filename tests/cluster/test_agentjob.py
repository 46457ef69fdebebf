"""The agent's objects: what they hold (pure builders), the agent's argument check run
locally, and that a run creates nothing ownerless and deletes everything it created whatever
ends it, with exactly the verbs of the active role; a clean-up that cannot list says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cluster.agentjob import (
    DEFAULT_IMAGE,
    MANAGED_SELECTOR,
    SLACK_SECONDS,
    START_SECONDS,
    AgentArgsError,
    AgentSpec,
    Cleanup,
    Egress,
    agent_source,
    check_args,
    cleanup,
    configmap,
    deployed,
    job,
    manifests,
    network_policy,
    node_jobs,
    parse_output,
    remaining,
    to_yaml,
)
from svcdoctor.cluster.api import ACTIVE_RBAC_FILE, WriteForbidden, connect_active
from tests.cluster.conftest import Served

ROOT = Path(__file__).resolve().parents[2]
SPEC = AgentSpec(
    "shop",
    "probe",
    ("--mode", "direct", "--endpoints", "10.0.0.1:8080", "--count", "5"),
    bound_seconds=30,
    run_id="abc12345",
    node_args=(("node-1", ("--mode", "service", "--service", "10.96.0.1:80", "--node", "node-1")),),
)
DIRECT = ("--mode", "direct", "--endpoints", "10.0.0.1:8080")


def test_the_job_is_labelled_bounded_and_locked_down() -> None:
    body = job(SPEC)
    labels = body["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "svcdoctor"
    assert labels["svcdoctor.io/run"] == "abc12345"
    spec = body["spec"]
    # the deadline counts from the pod's start: image pull, then the agent's bound, then slack
    assert spec["activeDeadlineSeconds"] == START_SECONDS + 30 + SLACK_SECONDS
    assert START_SECONDS >= 60
    assert spec["ttlSecondsAfterFinished"] > 0
    assert spec["backoffLimit"] == 0
    pod = spec["template"]["spec"]
    assert spec["template"]["metadata"]["labels"] == labels  # the pods are found by them
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["image"].startswith("python")
    assert container["command"][:3] == ["python", "-I", "/svcdoctor/agent.py"]
    assert container["command"][3:] == list(SPEC.args)
    safety = container["securityContext"]
    assert safety["runAsNonRoot"]
    assert safety["runAsUser"] != 0
    assert safety["readOnlyRootFilesystem"] is True
    assert safety["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"NODE_NAME": "spec.nodeName", "HOSTNAME": "metadata.name"}
    assert pod["volumes"][0]["configMap"]["name"] == configmap(SPEC, "x")["metadata"]["name"]
    assert container["volumeMounts"][0]["mountPath"] == "/svcdoctor"


def test_a_job_per_node_is_pinned_and_bounded() -> None:
    (node_job,) = node_jobs(SPEC)
    assert node_job["kind"] == "Job"  # no bare Pod: the roles grant no pod creation
    assert node_job["metadata"]["name"] == "svcdoctor-probe-abc12345-node-0"
    assert node_job["spec"]["activeDeadlineSeconds"] == SPEC.deadline_seconds
    assert node_job["spec"]["backoffLimit"] == 0
    pod = node_job["spec"]["template"]["spec"]
    assert pod["nodeName"] == "node-1"
    assert node_job["metadata"]["labels"]["svcdoctor.io/run"] == "abc12345"
    assert pod["containers"][0]["command"][3:] == list(SPEC.node_args[0][1])


def test_the_image_is_pinned_by_digest_and_overridable() -> None:
    from svcdoctor.lab.jobspec import image_name

    name, _, digest = DEFAULT_IMAGE.partition("@")
    assert name == "python:3.12-slim"
    assert digest.startswith("sha256:")
    assert len(digest.removeprefix("sha256:")) == 64
    assert int(digest.removeprefix("sha256:"), 16) >= 0  # hex
    assert image_name(DEFAULT_IMAGE) == "python"  # the lab runs it
    assert job(SPEC)["spec"]["template"]["spec"]["containers"][0]["image"] == DEFAULT_IMAGE
    mine = AgentSpec("shop", "probe", DIRECT, 10, image="registry.example/python:3.12")
    for obj in (job(mine), *node_jobs(mine)):
        assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == mine.image


EGRESS = Egress((("app", "api"),), (8080,))


def test_the_network_policy_allows_only_the_targets_and_dns() -> None:
    assert network_policy(SPEC) is None
    spec = AgentSpec("shop", "probe", DIRECT, 10, run_id="abc12345", egress=EGRESS)
    policy = network_policy(spec, {"kind": "Job", "uid": "u"})
    assert policy is not None
    assert policy["metadata"]["ownerReferences"] == [{"kind": "Job", "uid": "u"}]
    body = policy["spec"]
    assert body["podSelector"] == {"matchLabels": {"svcdoctor.io/run": "abc12345"}}
    assert body["policyTypes"] == ["Egress"]  # ingress untouched
    to_pods, to_dns = body["egress"]
    assert to_pods == {
        "to": [{"podSelector": {"matchLabels": {"app": "api"}}}],
        "ports": [{"protocol": "TCP", "port": 8080}],
    }
    assert {p["port"] for p in to_dns["ports"]} == {53}
    assert to_dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    # printed first without --yes: it exists before the agent's pods start
    assert [o["kind"] for o in manifests(spec, "x")] == ["NetworkPolicy", "ConfigMap", "Job"]


def test_a_network_policy_the_server_does_not_serve_fails_cleanly(api: Served) -> None:
    """The lab's API server serves no NetworkPolicies: --network-policy there is one error
    and nothing is left behind (a policy is never silently skipped)."""
    from svcdoctor.cluster import ClusterError

    writer = connect_active(kubeconfig=str(_active_token(api, "shop")), namespace="shop")
    spec = AgentSpec("shop", "probe", DIRECT, 10, egress=EGRESS)
    with pytest.raises(ClusterError), deployed(writer, spec, source="x"):
        pytest.fail("the block ran")
    assert remaining(writer, "shop", MANAGED_SELECTOR) == []
    assert ("create", "configmaps") not in writer.used  # the policy comes before the agent


def test_the_printed_yaml_is_what_would_be_created() -> None:
    source = agent_source()
    assert "def main" in source or "argparse" in source  # the real agent, not a stand-in
    objects = manifests(SPEC, source)
    text = to_yaml(objects)
    assert list(yaml.safe_load_all(text)) == objects
    assert "agent.py: |" in text  # readable, not one escaped line
    assert [o["kind"] for o in objects] == ["ConfigMap", "Job", "Job"]


def test_the_agent_output_is_parsed_into_rows_and_its_done_line() -> None:
    lines = [
        json.dumps({"ts": 1.0, "outcome": "ok", "backend": "a"}),
        "Traceback (most recent call last):",
        "",
        json.dumps({"ts": 2.0, "outcome": "reset", "backend": "a"}),
        json.dumps({"agent": "done", "requests": 2, "reason": "signal"}),
    ]
    out = parse_output(lines)
    assert [r["outcome"] for r in out.rows] == ["ok", "reset"]
    assert out.done == {"agent": "done", "requests": 2, "reason": "signal"}
    assert out.other == ("Traceback (most recent call last):",)
    assert parse_output(lines[:2]).done is None


def _active_token(api: Served, namespace: str) -> Path:
    """A kubeconfig whose token has exactly the active role in ``namespace``."""
    from svcdoctor.lab.apiserver import rbac_rules

    rules = rbac_rules((ROOT / ACTIVE_RBAC_FILE).read_text(), namespace)
    token = api.server.add_user("system:serviceaccount:shop:svcdoctor", rules)
    path = api.kubeconfig.with_name("active-kubeconfig")
    api.server.write_kubeconfig(path, "svcdoctor-lab", namespace, token=token)
    return path


def test_the_agents_own_argument_check_runs_locally() -> None:
    check_args(SPEC)
    grpc = AgentSpec("shop", "probe", (*DIRECT, "--protocol", "grpc"), 10)
    check_args(grpc)  # grpcio is the image's business, not this machine's
    for bad, words in (
        (("--path", "no-slash"), "--path must start with /"),
        (("--timeout", "700"), "--timeout must be in (0, 600]"),
        (("--mode", "service"), "needs --service"),
    ):
        with pytest.raises(AgentArgsError, match="agent would refuse") as caught:
            check_args(AgentSpec("shop", "probe", (*DIRECT, *bad), 10))
        assert words in str(caught.value)
        assert "\n" not in str(caught.value)
    node = AgentSpec("shop", "probe", DIRECT, 10, node_args=(("n", ("--mode", "service")),))
    with pytest.raises(AgentArgsError, match="needs --service"):
        check_args(node)


def test_bad_agent_arguments_create_nothing(api: Served) -> None:
    writer = connect_active(kubeconfig=str(_active_token(api, "shop")), namespace="shop")
    spec = AgentSpec("shop", "probe", (*DIRECT, "--timeout", "0"), 10)
    with pytest.raises(AgentArgsError, match="--timeout"), deployed(writer, spec, source="x"):
        pytest.fail("the block ran")
    assert remaining(writer, "shop", MANAGED_SELECTOR) == []
    assert not {verb for verb, _ in writer.used} & {"create", "deletecollection"}


@pytest.mark.parametrize("ending", ["normal", "error", "interrupt"])
def test_a_run_leaves_nothing_behind(api: Served, ending: str) -> None:
    kubeconfig = _active_token(api, "shop")
    writer = connect_active(kubeconfig=str(kubeconfig), namespace="shop")
    spec = AgentSpec("shop", "probe", DIRECT, 10, node_args=SPEC.node_args)
    ended: list[Any] = []
    seen: dict[str, Any] = {}
    created: list[dict[str, Any]] = []  # ConfigMaps as the server received their creation

    def admit(admission: Any) -> None:
        if admission.verb == "create":
            created.append(admission.obj)

    api.server.admit("configmaps", admit)

    def body() -> None:
        with deployed(writer, spec, source="print('hi')\n", on_cleanup=ended.append) as run:
            seen["left"] = remaining(writer, "shop", spec.selector)
            (seen["cm"],) = writer.list("configmaps", "shop", labels=spec.selector)
            seen["job"] = run.job
            if ending == "error":
                raise RuntimeError("boom")
            if ending == "interrupt":
                raise KeyboardInterrupt

    if ending == "normal":
        body()
    else:
        with pytest.raises(RuntimeError if ending == "error" else KeyboardInterrupt):
            body()
    assert sorted(seen["left"]) == sorted(
        [f"job/{spec.name}", f"configmap/{spec.name}", f"job/{spec.name}-node-0"]
    )
    owner = seen["cm"]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("Job", seen["job"]["metadata"]["uid"])
    (cm,) = created  # owned from its creation on: no window without an owner
    assert cm["metadata"]["ownerReferences"] == [owner]
    assert seen["cm"]["data"] == {"agent.py": "print('hi')\n"}
    (done,) = ended
    assert done.deleted
    assert done.left == ()
    assert done.errors == ()
    assert remaining(writer, "shop", MANAGED_SELECTOR) == []
    assert {("create", "configmaps"), ("create", "jobs")} <= writer.used
    assert ("patch", "configmaps") not in writer.used
    assert ("create", "pods") not in writer.used


def test_the_read_role_is_told_which_role_to_use(api: Served) -> None:
    from svcdoctor.lab.apiserver import rbac_rules

    rules = rbac_rules((ROOT / "deploy/rbac/svcdoctor-read-namespace.yaml").read_text(), "shop")
    token = api.server.add_user("reader", rules)
    path = api.kubeconfig.with_name("read-kubeconfig")
    api.server.write_kubeconfig(path, "svcdoctor-lab", "shop", token=token)
    writer = connect_active(kubeconfig=str(path), namespace="shop")
    with pytest.raises(WriteForbidden) as caught, deployed(writer, SPEC, source="x"):
        pass
    message = str(caught.value)
    assert "cannot create jobs in namespace shop" in message  # the Job comes first
    assert ACTIVE_RBAC_FILE in message
    assert "\n" not in message


def test_cleanup_removes_leftovers_of_killed_runs(api: Served) -> None:
    kubeconfig = _active_token(api, "shop")
    writer = connect_active(kubeconfig=str(kubeconfig), namespace="shop")
    for run_id in ("aaaa0001", "bbbb0002"):
        spec = AgentSpec("shop", "probe", (), 10, run_id=run_id)
        writer.create("configmaps", "shop", configmap(spec, "x"))
        writer.create("jobs", "shop", job(spec))
    other = {"metadata": {"name": "keep-me", "labels": {"app": "x"}}, "data": {}}
    writer.create("configmaps", "shop", other)
    runner = CliRunner()
    args = ["cleanup", "--kubeconfig", str(kubeconfig), "-n", "shop", "-o", "json"]
    dry = runner.invoke(cli, [*args, "--dry-run"])
    assert dry.exit_code == 1, dry.output  # something to delete, as a finding
    assert len(json.loads(dry.output)["found"]) == 4
    assert len(remaining(writer, "shop", MANAGED_SELECTOR)) == 4
    one = runner.invoke(cli, [*args, "--run", "aaaa0001"])
    assert one.exit_code == 0, one.output
    assert sorted(remaining(writer, "shop", MANAGED_SELECTOR)) == [
        "configmap/svcdoctor-probe-bbbb0002",
        "job/svcdoctor-probe-bbbb0002",
    ]
    rest = runner.invoke(cli, args)
    assert rest.exit_code == 0, rest.output
    assert remaining(writer, "shop", MANAGED_SELECTOR) == []
    assert [c["metadata"]["name"] for c in writer.list("configmaps", "shop")] == ["keep-me"]
    again = runner.invoke(cli, args[:-2])
    assert again.exit_code == 0
    assert "nothing of svcdoctor's" in again.output
    clean = runner.invoke(cli, [*args[:-2], "--dry-run"])
    assert clean.exit_code == 0, clean.output
    assert cleanup(writer, "shop", MANAGED_SELECTOR).left == ()


NO_LIST = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: delete-only, namespace: NAMESPACE}
rules:
  - apiGroups: ["", batch]
    resources: [pods, configmaps, jobs]
    verbs: [create, deletecollection]
"""


def test_a_cleanup_that_cannot_list_says_so(api: Served) -> None:
    from svcdoctor.cluster import ClusterError
    from svcdoctor.lab.apiserver import rbac_rules

    token = api.server.add_user("delete-only", rbac_rules(NO_LIST, "shop"))
    path = api.kubeconfig.with_name("delete-only-kubeconfig")
    api.server.write_kubeconfig(path, "svcdoctor-lab", "shop", token=token)
    writer = connect_active(kubeconfig=str(path), namespace="shop")
    spec = AgentSpec("shop", "probe", (), 10, run_id="cccc0003")
    writer.create("jobs", "shop", job(spec))
    with pytest.raises(ClusterError, match=r"forbidden|cannot list"):
        remaining(writer, "shop", MANAGED_SELECTOR)  # never an empty answer
    done = cleanup(writer, "shop", MANAGED_SELECTOR, wait_seconds=0)
    assert done.left is None
    assert not done.clean
    assert any(e.startswith("listing what is left") for e in done.errors)
    assert "unknown" in (done.describe_left() or "")
    assert Cleanup(True, ("job/x",), ()).describe_left() == (
        "still present: job/x (svcdoctor cleanup removes them)"
    )
    assert Cleanup(True, (), ()).describe_left() is None
    result = CliRunner().invoke(cli, ["cleanup", "--kubeconfig", str(path), "-n", "shop"])
    assert result.exit_code == 2, result.output
    assert "nothing of svcdoctor's" not in result.output
    (line,) = result.output.strip().splitlines()
    assert "cannot list" in line or "forbidden" in line


def test_probe_network_policy_is_printed_first_for_the_services_pods(api: Served) -> None:
    from tests.cluster.test_probe import _service

    _service(api)
    args = ["probe", "api", "--kubeconfig", str(api.kubeconfig), "-n", "shop"]
    done = CliRunner().invoke(cli, [*args, "--network-policy", "--show-agent"])
    assert done.exit_code == 0, done.output
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert [d["kind"] for d in docs] == ["NetworkPolicy", "ConfigMap", "Job"]
    to_pods = docs[0]["spec"]["egress"][0]
    assert to_pods["to"] == [{"podSelector": {"matchLabels": {"app": "api"}}}]
    assert to_pods["ports"] == [{"protocol": "TCP", "port": 8080}]  # the pods' port
    image = docs[2]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == DEFAULT_IMAGE
    mine = CliRunner().invoke(cli, [*args, "--image", "python:3.13-slim", "--show-agent"])
    assert mine.exit_code == 0, mine.output
    assert "image: python:3.13-slim\n" in mine.stdout
