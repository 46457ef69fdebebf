"""``svcdoctor scan``: live objects through lint's model and rules, the live-only rules, the
SARIF logical locations and the command, over real-shaped ``kubectl get -o json`` fixtures
(``tests/fixtures/cluster/SVDnnn.{bad,ok}.json``) and, end to end, the lab's API server.

Regenerate the goldens after an intended change: ``SVCDOCTOR_UPDATE_GOLDEN=1 pytest
tests/cluster/test_scan.py``.
"""

from __future__ import annotations

import copy
import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest
from click.testing import CliRunner
from rich.console import Console

from svcdoctor.checks import RULES, Settings
from svcdoctor.cli import cli
from svcdoctor.cluster import ClusterError
from svcdoctor.cluster.inventory import build_live_inventory, go_duration, proxy_config
from svcdoctor.cluster.scan import ScanReport, scan_snapshot
from svcdoctor.cluster.snapshot import Snapshot, read_snapshot
from svcdoctor.model import Severity, is_live
from svcdoctor.report import render_text, to_sarif
from svcdoctor.report.fixes import fix_text
from tests.cluster.test_collect import FakeReader
from tests.conftest import lint_paths

if TYPE_CHECKING:
    from tests.cluster.conftest import Served

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "cluster"
NOW = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC).timestamp()  # the fixtures' "now"
LIVE_RULES = sorted(r.id for r in RULES.values() if r.live)


class Reader(FakeReader):
    """The collect tests' fake, at a chosen server version."""

    def __init__(self, objects: list[dict[str, Any]], version: str = "v1.31.2", **kw: Any):
        super().__init__(objects, **kw)
        self.git_version = version

    def version(self) -> dict[str, str]:
        major, minor = self.git_version.lstrip("v").split(".")[:2]
        return {"gitVersion": self.git_version, "major": major, "minor": minor}


def items(name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text())["items"]
    return found


def snapshot(
    objects: list[dict[str, Any]],
    namespace: str | None = "shop",
    services: tuple[str, ...] = (),
    **kw: Any,
) -> Snapshot:
    return read_snapshot(Reader(objects, **kw), namespace, None, services, clock=lambda: NOW)


def scan(objects: list[dict[str, Any]], settings: Settings | None = None, **kw: Any) -> ScanReport:
    return scan_snapshot(snapshot(objects, **kw), settings or Settings())


def only(rule_id: str) -> Settings:
    return Settings(enabled=frozenset({rule_id}))


def text(report: ScanReport) -> str:
    out = io.StringIO()
    render_text(report.result, Console(file=out, width=200, no_color=True, highlight=False))
    return out.getvalue()


def find(items_: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in items_ if o["kind"] == kind and o["metadata"]["name"] == name)


# --- the live rules: one bad and one good cluster each ---------------------------------


@pytest.mark.parametrize("rule_id", LIVE_RULES)
def test_live_rule_flags_the_bad_cluster(rule_id: str) -> None:
    report = scan(items(f"{rule_id}.bad.json"), only(rule_id))
    found = [f for f in report.result.findings if f.rule == rule_id]
    assert found, f"{rule_id}.bad.json not flagged"
    for f in found:
        assert f.fix, f"{rule_id}: a finding without a fix"
        assert f.cause is RULES[rule_id].cause
        assert is_live(f.location)
        assert f.location.file == "cluster:fake"
    rendered = text(report)
    golden = FIXTURES / f"{rule_id}.golden"
    if os.environ.get("SVCDOCTOR_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(rendered)
    assert rendered == golden.read_text(), f"{golden.name} differs (see module docstring)"


@pytest.mark.parametrize("rule_id", LIVE_RULES)
def test_live_rule_passes_the_good_cluster(rule_id: str) -> None:
    report = scan(items(f"{rule_id}.ok.json"), only(rule_id))
    assert not [f for f in report.result.findings if f.rule == rule_id], text(report)


def test_every_live_rule_has_both_fixtures() -> None:
    for rule_id in LIVE_RULES:
        for case in ("bad", "ok"):
            assert (FIXTURES / f"{rule_id}.{case}.json").is_file(), f"{rule_id}.{case}.json"


def test_live_rules_find_nothing_in_files() -> None:
    result = lint_paths([str(FIXTURES / "SVD108.bad.json"), str(FIXTURES / "SVD107.bad.json")])
    assert not [f for f in result.findings if RULES[f.rule].live]


def test_messages_carry_the_numbers() -> None:
    def message(rule_id: str) -> str:
        (f,) = scan(items(f"{rule_id}.bad.json"), only(rule_id)).result.findings
        return f.message

    assert "every 10 s (minSyncPeriod)" in message("SVD107")
    assert "11 s after the deletion" in message("SVD107")
    killed = message("SVD108")
    assert "2 pod(s) of Deployment shop/api" in killed
    assert "10 s grace period" in killed
    assert "api-7d9f8b6c5-x2x9q at 2026-12-04T11:59:58Z" in killed
    failing = message("SVD109")
    assert "FailedPreStopHook 3 times on 2 pod(s)" in failing
    assert "api-7d9f8b6c5-zq8vd" in failing  # a pod that is gone, matched by its ReplicaSet
    assert "executable file not found" in failing
    assert "failed 14 times on 1 Ready pod(s)" in message("SVD208")
    stale = message("SVD209")
    assert "not ready for 25 min" in stale
    assert "20 min past its grace period" in stale
    missing = message("SVD210")
    assert (
        "hold 0 ready endpoint(s) with a port, but Deployment shop/api has 3 ready pod(s)"
        in missing
    )
    assert "api-7d9f8b6c5-k4mfr" in missing
    assert "targetPort http is not a port of the pods" in missing
    assert "maxPerCore 8192 and min 32768" in message("SVD403")


def test_sigkill_fix_uses_the_computed_grace_period() -> None:
    (f,) = scan(items("SVD108.bad.json"), only("SVD108")).result.findings
    assert f.fix is not None
    assert "terminationGracePeriodSeconds: 20" in (fix_text(f.fix) or "")
    covered = items("SVD108.bad.json")
    for obj in covered:
        if obj["kind"] == "Deployment":
            obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 40
    (f,) = scan(covered, only("SVD108")).result.findings
    assert "did not exit within 35 s of SIGTERM" in f.message
    assert f.fix is not None
    # the remedy plan for requests outliving the 35 s left plus --max-request-seconds:
    # preStop 5 + (35 + 10) + margin 5
    assert "terminationGracePeriodSeconds: 55" in (fix_text(f.fix) or "")


def test_prestop_hook_fix_follows_the_server_version() -> None:
    (new,) = scan(items("SVD109.bad.json"), only("SVD109")).result.findings
    assert new.fix is not None
    assert "sleep:\n" in (fix_text(new.fix) or "")
    assert "seconds: 5" in (fix_text(new.fix) or "")
    (old,) = scan(items("SVD109.bad.json"), only("SVD109"), version="v1.28.9").result.findings
    assert old.fix is not None
    assert "/sleep" in (fix_text(old.fix) or "")
    assert "no native sleep" in (fix_text(old.fix) or "")


# --- lint's rules on live objects ---------------------------------------------------------


def _without_prestop() -> list[dict[str, Any]]:
    objects = items("SVD403.ok.json")
    for obj in objects:
        if obj["kind"] in ("Deployment", "ReplicaSet", "Pod"):
            spec = obj["spec"]["template"]["spec"] if obj["kind"] != "Pod" else obj["spec"]
            spec["containers"][0].pop("lifecycle", None)
    return objects


def test_the_server_version_decides_the_prestop_advice() -> None:
    report = scan(_without_prestop(), only("SVD101"), version="v1.31.2")
    (f,) = report.result.findings
    assert f.object is not None
    assert str(f.object) == "Deployment shop/api"
    assert f.fix is not None
    assert "sleep:\n" in (fix_text(f.fix) or "")
    assert "Kubernetes >= 1.30" not in (fix_text(f.fix) or "")
    (old,) = scan(_without_prestop(), only("SVD101"), version="v1.29.4").result.findings
    assert old.fix is not None
    assert "sleep 5" in (fix_text(old.fix) or "")
    assert "exec" in (fix_text(old.fix) or "")
    assert report.settings.kube_version == (1, 31)


def test_kube_version_flag_wins_over_the_server() -> None:
    snap = snapshot(_without_prestop(), version="v1.31.2")
    report = scan_snapshot(
        snap, Settings(kube_version=(1, 29), enabled=frozenset({"SVD101"})), server_decides=False
    )
    (f,) = report.result.findings
    assert f.fix is not None
    assert "exec" in (fix_text(f.fix) or "")


def test_replicas_come_from_status_and_hpa() -> None:
    objects = items("SVD403.ok.json")
    find(objects, "Deployment", "api")["status"]["replicas"] = 1
    (f,) = scan(objects, only("SVD204")).result.findings
    assert "Deployment shop/api: 1 replica" in f.message
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "minReplicas": 3,
            "maxReplicas": 10,
        },
    }
    assert not scan([*objects, hpa], only("SVD204")).result.findings


def _with_canary(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A second Deployment, another app (a debug shell), whose template labels happen to
    match the Service's selector (a canary of the same image would be deliberate)."""
    canary = copy.deepcopy(find(objects, "Deployment", "api"))
    canary["metadata"]["name"] = "api-canary"
    canary["metadata"]["uid"] = "c0ffee00-0000-0000-0000-000000000001"
    canary["spec"]["template"]["metadata"]["labels"]["component"] = "debug"
    for container in canary["spec"]["template"]["spec"]["containers"]:
        container["image"] = "example/debug-shell:1"
    return [*objects, canary]


def test_backends_are_the_pods_in_the_endpointslices_not_a_label_guess() -> None:
    objects = _with_canary(items("SVD403.ok.json"))
    assert not scan(objects, only("SVD206")).result.findings  # its pods are not endpoints
    inventory, _ = build_live_inventory(snapshot(objects))
    (svc,) = inventory.services
    assert [str(w.ref) for w in inventory.targeted(svc)] == ["Deployment shop/api"]
    no_endpoints = [o for o in objects if o["kind"] != "EndpointSlice"]
    (f,) = scan(no_endpoints, only("SVD206")).result.findings  # selector fallback
    assert "api-canary" in f.message


def test_replicasets_and_pods_of_a_deployment_are_not_workloads_of_their_own() -> None:
    inventory, _ = build_live_inventory(snapshot(items("SVD108.bad.json")))
    assert [str(w.ref) for w in inventory.workloads] == ["Deployment shop/api"]
    assert inventory.live is not None
    assert len(inventory.live.pods) == 3
    assert {str(p.workload) for p in inventory.live.pods} == {"Deployment shop/api"}


def test_suppression_annotations_work_on_live_objects() -> None:
    objects = _without_prestop()
    find(objects, "Deployment", "api")["metadata"]["annotations"]["ignore.svcdoctor.io/SVD101"] = (
        "the app drains itself"
    )
    report = scan(objects, only("SVD101"))
    assert not report.result.findings
    assert report.result.suppressed == 1


def test_service_arguments_limit_the_scan() -> None:
    objects = items("SVD403.ok.json")
    other = copy.deepcopy(find(objects, "Service", "api"))
    other["metadata"]["name"] = "web"
    other["spec"]["selector"] = {"app": "web"}
    report = scan([*objects, other], Settings(), services=("web",))
    assert {str(f.object) for f in report.result.findings} == {"Service shop/web"}
    assert report.result.services == 1
    assert report.result.workloads == 0
    both = scan([*objects, other], Settings(), services=("api", "shop/web"))
    assert both.result.services == 2
    assert both.result.workloads == 1
    with pytest.raises(ClusterError, match="service nope not found in namespace shop"):
        snapshot(objects, services=("nope",))


def test_core_endpoints_when_endpointslices_are_not_served() -> None:
    objects = items("SVD210.bad.json")
    sl = find(objects, "EndpointSlice", "api-x7k2p")
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "api", "namespace": "shop"},
        "subsets": [
            {
                "addresses": [
                    {"ip": e["addresses"][0], "targetRef": e["targetRef"]}
                    for e in sl["endpoints"][:2]  # the controller left one pod out
                ],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            }
        ],
    }
    report = scan([*objects, endpoints], only("SVD210"), unserved={"endpointslices"})
    assert "discovery.k8s.io/v1 not served: read core Endpoints instead" in report.notes
    (f,) = report.result.findings
    assert "hold 2 ready endpoint(s) with a port" in f.message


def test_kube_proxy_configmap_unreadable_or_absent_is_a_note() -> None:
    objects = items("SVD107.bad.json")
    forbidden = scan(objects, forbidden={("get", "configmaps", "kube-system")})
    assert any("forbidden" in n and "kube-proxy" in n for n in forbidden.notes)
    assert not [f for f in forbidden.result.findings if f.rule == "SVD107"]
    absent = scan([o for o in objects if o["kind"] != "ConfigMap"])
    assert any(n.startswith("no ConfigMap kube-system/kube-proxy") for n in absent.notes)


def test_forbidden_lists_are_errors_naming_verb_and_resource() -> None:
    with pytest.raises(ClusterError, match="cannot list pods in namespace shop"):
        snapshot(items("SVD107.ok.json"), forbidden={("list", "pods", "shop")})


def test_kube_proxy_configuration_parsing() -> None:
    assert go_duration("1m0s") == 60
    assert go_duration("500ms") == 0.5
    assert go_duration("0s") == 0
    with pytest.raises(ValueError, match="not a duration"):
        go_duration("soon")
    ipvs = proxy_config("mode: ipvs\nipvs: {minSyncPeriod: 5s, syncPeriod: 1m0s}\n", "c")
    assert (ipvs.mode, ipvs.min_sync_seconds, ipvs.sync_seconds) == ("ipvs", 5.0, 60.0)
    default = proxy_config("kind: KubeProxyConfiguration\nmode: ''\n", "c")
    assert (default.mode, default.min_sync_seconds, default.conntrack_max_per_core) == (
        "iptables",
        1.0,
        None,
    )
    report = scan(
        [
            *items("SVD107.ok.json")[:-1],
            {**items("SVD107.ok.json")[-1], "data": {"config.conf": "mode: [oops"}},
        ]
    )
    assert any("kube-proxy configuration not understood" in n for n in report.notes)


# --- output --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator(sarif_schema: Path) -> jsonschema.Draft4Validator:
    from tests.report.test_sarif import FORMATS

    return jsonschema.Draft4Validator(json.loads(sarif_schema.read_text()), format_checker=FORMATS)


def test_sarif_names_live_objects_by_logical_location(
    validator: jsonschema.Draft4Validator,
) -> None:
    report = scan(
        [*items("SVD108.bad.json"), *items("SVD403.bad.json")[-1:]],
        Settings(severities={"SVD403": Severity.ERROR}),
    )
    log = to_sarif(report.result)
    errors = list(validator.iter_errors(log))
    assert not errors, [e.message for e in errors[:5]]
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"SVD108", "SVD403"}
    for r in results:
        (location,) = r["locations"]
        assert "physicalLocation" not in location
        (logical,) = location["logicalLocations"]
        assert logical["kind"] == "resource"
    killed = next(r for r in results if r["ruleId"] == "SVD108")
    logical = killed["locations"][0]["logicalLocations"][0]
    assert logical["fullyQualifiedName"] == "fake/shop/Deployment/api"
    assert logical["properties"] == {"kind": "Deployment", "namespace": "shop", "context": "fake"}
    proxy = next(r for r in results if r["ruleId"] == "SVD403")
    assert proxy["level"] == "error"
    assert proxy["locations"][0]["logicalLocations"][0]["name"] == "kube-proxy"


# --- the command -------------------------------------------------------------------------


@pytest.fixture
def connected(monkeypatch: pytest.MonkeyPatch) -> Reader:
    reader = Reader([*items("SVD108.bad.json"), *items("SVD107.bad.json")[-1:]])
    monkeypatch.setattr("svcdoctor.cluster.api.connect", lambda **_: reader)
    return reader


def test_cli_text_header_notes_and_groups(connected: Reader) -> None:
    result = CliRunner().invoke(cli, ["scan", "--no-fixes"])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0] == "cluster fake (Kubernetes v1.31.2), namespace shop"
    assert "Deployment shop/api" in lines
    assert "ConfigMap kube-system/kube-proxy" in lines
    assert any("SVD108 killed-at-grace-period [race]  container app" in ln for ln in lines)
    assert "line " not in result.output.split("Deployment shop/api", 1)[1].split("\n\n")[0]
    assert lines[-1] == "10 objects (1 workload, 1 service): 3 findings (2 error, 1 warning)"


def test_cli_json_and_exit_codes(connected: Reader) -> None:
    result = CliRunner().invoke(cli, ["scan", "-o", "json", "--exit-zero"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["cluster"] == {
        "context": "fake",
        "version": "v1.31.2",
        "kube_version": "1.31",
        "namespace": "shop",
        "notes": [],
    }
    rules = {f["rule"] for f in body["findings"]}
    assert {"SVD107", "SVD108"} <= rules
    killed = next(f for f in body["findings"] if f["rule"] == "SVD108")
    assert killed["file"] == "cluster:fake"
    assert killed["line"] == 0
    assert killed["object"] == {"kind": "Deployment", "namespace": "shop", "name": "api"}
    quiet = CliRunner().invoke(cli, ["scan", "--fail-on", "error", "--disable", "SVD108,SVD102"])
    assert quiet.exit_code == 0, quiet.output


def test_cli_all_namespaces_and_sarif(connected: Reader) -> None:
    result = CliRunner().invoke(cli, ["scan", "-A", "-o", "sarif", "--exit-zero"])
    assert result.exit_code == 0
    assert json.loads(result.output)["runs"][0]["results"]


def test_cli_cluster_error_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(**_: Any) -> Reader:
        raise ClusterError("cannot reach https://127.0.0.1:1: connection refused")

    monkeypatch.setattr("svcdoctor.cluster.api.connect", unreachable)
    result = CliRunner().invoke(cli, ["scan"])
    assert result.exit_code == 2
    assert (
        result.output == "svcdoctor: error: cannot reach https://127.0.0.1:1: connection refused\n"
    )


def test_cli_unknown_service_exit_2(connected: Reader) -> None:
    result = CliRunner().invoke(cli, ["scan", "nope"])
    assert result.exit_code == 2
    assert result.output == "svcdoctor: error: service nope not found in namespace shop\n"


# --- end to end through the lab's API server -------------------------------------------


def test_scan_against_a_real_api_server(api: Served) -> None:
    api.put(*items("SVD108.bad.json"))
    result = CliRunner().invoke(
        cli,
        ["scan", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "-o", "json", "--exit-zero"],
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["cluster"]["context"] == "svcdoctor-lab"
    assert body["cluster"]["kube_version"] == "1.31"
    by_rule = {f["rule"]: f for f in body["findings"]}
    assert "SVD108" in by_rule
    assert by_rule["SVD108"]["object"]["name"] == "api"
