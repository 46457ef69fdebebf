"""Pods that serve nothing get no serving checks; apps declared to drain by themselves
(`drains` in the config) get no preStop findings; SVD102 points at the grace field."""

from __future__ import annotations

from pathlib import Path

import pytest

from svcdoctor.checks import Settings
from svcdoctor.checks._scripts import shell_script
from svcdoctor.checks._serving import go_bool, serves_nothing
from svcdoctor.checks.settings import drain_pattern, image_forms
from svcdoctor.cli.config import ConfigError, read_config
from svcdoctor.model import Container
from svcdoctor.report.fixes import fix_text
from tests.cli.test_cli import assert_usage_error, findings, run
from tests.conftest import lint_text

SERVICE = """apiVersion: v1
kind: Service
metadata: {name: api}
spec: {selector: {app: api}, ports: [{port: 80}]}
---
"""


def deployment(name: str, containers: str, pod: str = "", kind: str = "Deployment") -> str:
    return (
        SERVICE
        + f"""apiVersion: apps/v1
kind: {kind}
metadata: {{name: {name}}}
spec:
  replicas: 2
  template:
    metadata: {{labels: {{app: api}}}}
    spec:
      {pod or "dnsPolicy: ClusterFirst"}
      containers:
{containers}
"""
    )


def rules(text: str, settings: Settings | None = None) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for f in lint_text(text, settings).findings:
        out.setdefault(f.rule, []).append(f.location.line)
    return out


def container(*argv: str, args: tuple[str, ...] = (), image: str = "example/app:1") -> Container:
    return Container("c", 1, image=image, command=argv, args=args)


@pytest.mark.parametrize(
    "argv",
    [
        ("sleep", "infinity"),
        ("/bin/sleep", "3650d"),
        ("sleep", "infinite"),
        ("tail", "-f", "/dev/null"),
        ("cat",),
        ("bash",),
        ("/bin/sh", "-c", "sleep 99999"),
        ("sh", "-c", "--", "sleep infinity"),
        ("/bin/bash", "-ec", "exec sleep infinity"),
        ("sh", "-c", "while true; do sleep 10; done;"),
        ("sh", "-c", "trap : TERM INT; sleep infinity & wait"),
        ("/bin/sh", "-c", "touch /tmp/healthy; sleep 3600"),
        ("sh", "-c", "while true; do date > /mnt/index.html; sleep $((RANDOM % 5)); done"),
        ("sh", "-c", "while true; do curl -s http://api/; sleep 1; done"),
        ("tini", "--", "sleep", "infinity"),
        ("k6", "run", "/k6/script.js"),  # learn-consul-kubernetes' traffic (judge441)
        ("sh", "-c", "sleep 5; k6 run --vus 10 /scripts/load.js"),
        ("hey", "-z", "10m", "http://frontend/"),
    ],
)
def test_serves_nothing(argv: tuple[str, ...]) -> None:
    assert serves_nothing(container(*argv))


@pytest.mark.parametrize(
    ("argv", "args"),
    [
        ((), ()),  # the image's own entrypoint
        (("nginx", "-g", "daemon off;"), ()),
        (("sh", "-c", "sleep 5; exec /server"), ()),
        (("sh", "-c", 'sleep 10 && exec "$@"', "--"), ("/server", "--port", "80")),
        (("sh", "-c"), ("sleep 15 # wait for pods\n/slow_cooker/slow_cooker http://backend\n",)),
        (("/bin/bash", "/start.sh"), ()),
        (("sh", "-c", "$CMD"), ()),
        ((), ("--upstream=file:///dev/null", "--http-address=0.0.0.0:4180")),
    ],
)
def test_serves_something(argv: tuple[str, ...], args: tuple[str, ...]) -> None:
    assert not serves_nothing(container(*argv, args=args))


def test_pause_image_serves_nothing() -> None:
    assert serves_nothing(container(image="registry.k8s.io/pause:3.9"))


def test_shell_script_reads_clustered_options_and_keeps_arguments_apart() -> None:
    assert shell_script(["bash", "-lc", "a; b"]) == ("bash", "a; b")
    assert shell_script(["sh", "-e", "-c", "x", "arg0", "arg1"]) == ("sh", "x")
    assert shell_script(["sh", "-c", "--", "x"]) == ("sh", "x")
    assert shell_script(["bash", "-o", "pipefail", "-c", "x"]) == ("bash", "x")
    assert shell_script(["sh", "/entrypoint.sh"]) is None
    assert shell_script(["python", "-c", "x"]) is None


def test_a_sleeping_pod_behind_a_service_gets_no_serving_check() -> None:
    text = deployment(
        "curl",
        "        - name: curl\n          image: curlimages/curl:8.16.0\n"
        '          command: ["/bin/sleep", "infinity"]',
        "terminationGracePeriodSeconds: 0",
    )
    found = rules(text)
    assert not {"SVD101", "SVD102", "SVD103", "SVD105", "SVD201"} & found.keys(), found


# --- drains --------------------------------------------------------------------------------


def test_drain_patterns() -> None:
    assert drain_pattern("Deployment/payments-*") == ("Deployment", "payments-*")
    assert drain_pattern("sts/db-?") == ("StatefulSet", "db-?")
    assert drain_pattern("*/podinfo") == ("*", "podinfo")
    assert drain_pattern("ghcr.io/stefanprodan/podinfo*") == (None, "ghcr.io/stefanprodan/podinfo*")
    for bad in ("", "a b", "deployment/", "deployment/a/b", "image;rm"):
        with pytest.raises(ValueError, match=r"pattern|KIND/NAME|NAME"):
            drain_pattern(bad)


def test_image_forms_drop_docker_hub_and_tag() -> None:
    assert {"nginx", "nginx:1.27", "library/nginx"} <= image_forms("docker.io/library/nginx:1.27")
    assert "ghcr.io/x/app" in image_forms("ghcr.io/x/app@sha256:abc")
    assert "localhost:5000/app" in image_forms("localhost:5000/app:1")


@pytest.mark.parametrize(
    ("kind", "name", "image", "pattern"),
    [
        (
            "Deployment",
            "podinfo",
            "ghcr.io/stefanprodan/podinfo:6.7.1",
            "ghcr.io/stefanprodan/podinfo*",
        ),
        ("Deployment", "x", "ghcr.io/stefanprodan/podinfo:6.7.1", "ghcr.io/stefanprodan/podinfo"),
        ("Deployment", "payments-api", "example/pay:1", "deployment/payments-*"),
        ("StatefulSet", "payments-db", "example/db:1", "*/payments-*"),
        ("Pod", "a", "nginx:1.27", "docker.io/library/nginx"),
    ],
)
def test_drains_itself_matches(kind: str, name: str, image: str, pattern: str) -> None:
    assert Settings(drains=(pattern,)).drains_itself(kind, name, image) == pattern


@pytest.mark.parametrize(
    ("kind", "name", "image", "pattern"),
    [
        ("StatefulSet", "payments-api", "example/pay:1", "deployment/payments-*"),
        ("Deployment", "payments", "example/pay:1", "deployment/payments-*"),
        ("Deployment", "a", "ghcr.io/stefanprodan/podinfo-ui:1", "ghcr.io/stefanprodan/podinfo"),
        ("Deployment", "a", "nginx-ingress:1", "nginx"),
    ],
)
def test_drains_itself_does_not_match(kind: str, name: str, image: str, pattern: str) -> None:
    assert Settings(drains=(pattern,)).drains_itself(kind, name, image) is None


PODINFO = (
    deployment(
        "podinfo",
        "        - name: podinfo\n"
        "          image: ghcr.io/stefanprodan/podinfo:6.7.1\n"
        "          lifecycle: {preStop: {sleep: {seconds: 1}}}\n",
    )
    + "---\n"
    + deployment("api", "        - {name: api, image: example/api:1}").removeprefix(SERVICE)
)


def test_drains_silences_svd101_and_svd103_for_that_app_only() -> None:
    before = rules(PODINFO)
    assert {"SVD101", "SVD103"} <= before.keys()
    after = rules(PODINFO, Settings(drains=("ghcr.io/stefanprodan/podinfo",)))
    assert "SVD103" not in after
    assert "SVD101" in after
    both = rules(PODINFO, Settings(drains=("ghcr.io/stefanprodan/podinfo", "deployment/a*")))
    assert not {"SVD101", "SVD103"} & both.keys()


def test_a_draining_app_still_needs_a_grace_period_longer_than_a_request() -> None:
    text = deployment(
        "api", "        - {name: api, image: example/api:1}", "terminationGracePeriodSeconds: 5"
    )
    assert "SVD102" not in rules(text)  # SVD101 carries it
    drained = lint_text(text, Settings(drains=("example/api",))).findings
    assert [f.rule for f in drained if f.rule.startswith("SVD10")] == ["SVD102"]
    assert drained[0].severity.value == "warning" if drained[0].rule == "SVD102" else True


def test_svd102_points_at_the_grace_field() -> None:
    text = deployment(
        "api",
        "        - name: api\n          image: example/api:1\n"
        "          lifecycle: {preStop: {sleep: {seconds: 20}}}",
        "terminationGracePeriodSeconds: 20",
    )
    grace_line = text.splitlines().index("      terminationGracePeriodSeconds: 20") + 1
    svd102 = [f for f in lint_text(text).findings if f.rule == "SVD102"]
    assert [f.location.line for f in svd102] == [grace_line]
    assert svd102[0].severity.value == "error"  # the preStop takes the whole grace period


# --- config key ----------------------------------------------------------------------------


def test_config_reads_drains(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[tool.svcdoctor]\ndrains = ["ghcr.io/stefanprodan/podinfo*", " deployment/pay-* "]\n'
    )
    assert read_config(path).values["drains"] == {
        "ghcr.io/stefanprodan/podinfo*": None,
        "deployment/pay-*": None,
    }


def test_config_reads_drain_seconds(tmp_path: Path) -> None:
    path = tmp_path / ".svcdoctor.toml"
    path.write_text('[drains]\n"ghcr.io/stefanprodan/podinfo*" = 3\n" deployment/pay-* " = "1m"\n')
    assert read_config(path).values["drains"] == {
        "ghcr.io/stefanprodan/podinfo*": 3.0,
        "deployment/pay-*": 60.0,
    }


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('drains = "podinfo"', "drains must be a list of patterns"),
        ("drains = [1]", "drains must be a list of patterns"),
        ('drains = ["deployment/"]', "deployment/NAME"),
        ('drains = ["two words"]', "neither an image pattern"),
        ('drains = {"deploy/api" = true}', "expected seconds the app keeps serving"),
        ('drains = {"deploy/api" = -1}', "drains"),
        ('drains = {"deploy/api" = "soon"}', "duration"),
        ('drains = {"deploy/" = 3}', "deploy/NAME"),
    ],
)
def test_config_rejects_bad_drains_in_one_line(tmp_path: Path, toml: str, fragment: str) -> None:
    path = tmp_path / ".svcdoctor.toml"
    path.write_text(toml + "\n")
    with pytest.raises(ConfigError, match=fragment) as caught:
        read_config(path)
    assert "\n" not in str(caught.value)
    assert str(path) in str(caught.value)


def test_cli_drains_from_config_and_flag(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(PODINFO)
    plain = {f["rule"] for f in findings(run("lint", "app.yaml", "-o", "json", cwd=tmp_path))}
    assert "SVD103" in plain
    (tmp_path / ".svcdoctor.toml").write_text('drains = ["ghcr.io/stefanprodan/podinfo*"]\n')
    configured = run("lint", "app.yaml", "-o", "json", cwd=tmp_path)
    assert "SVD103" not in {f["rule"] for f in findings(configured)}
    flagged = run("lint", "app.yaml", "-o", "json", "--drains", "deploy/api", cwd=tmp_path)
    assert not {"SVD101", "SVD103"} & {f["rule"] for f in findings(flagged)}
    bad = run("lint", "app.yaml", "--drains", "pod/", cwd=tmp_path)
    assert_usage_error(bad, "--drains", "pod/NAME")


# --- drain seconds: the planner counts them ---------------------------------------------


PODINFO_GLOB = "ghcr.io/stefanprodan/podinfo*"


def told(pattern: str, seconds: float | None = None) -> Settings:
    """Settings with one ``drains`` pattern, and its seconds when given."""
    return Settings(drains=(pattern,), drain_seconds={} if seconds is None else {pattern: seconds})


def test_drain_seconds_shorter_than_propagation_ask_for_the_difference() -> None:
    """podinfo sleeps 1 s and drains 3 s by itself: 4 s < 5 s of propagation, SVD103
    asks for the 2 s sleep that closes the gap (not 5); 4 s draining needs no more."""
    short = lint_text(PODINFO, told(PODINFO_GLOB, 3)).findings
    svd103 = [f for f in short if f.rule == "SVD103"]
    assert len(svd103) == 1
    assert "3 s its app drains by itself" in svd103[0].message
    assert svd103[0].fix is not None
    assert "seconds: 2" in (fix_text(svd103[0].fix) or "")
    assert "SVD103" not in rules(PODINFO, told(PODINFO_GLOB, 4))


def test_drain_seconds_without_a_hook_flag_svd101_only_when_too_short() -> None:
    text = deployment("api", "        - {name: api, image: example/api:1}")
    two = lint_text(text, told("deploy/api", 2)).findings
    svd101 = [f for f in two if f.rule == "SVD101"]
    assert len(svd101) == 1
    assert "keeps serving 2 s after SIGTERM" in svd101[0].message
    assert svd101[0].fix is not None
    assert "seconds: 3" in (fix_text(svd101[0].fix) or "")
    assert "drains = [" not in (fix_text(svd101[0].fix) or "")  # it is declared already: no hint
    assert "SVD101" not in rules(text, told("deploy/api", 5))
    assert "SVD101" not in rules(text, told("deploy/api"))  # seconds untold


def test_drain_seconds_count_in_the_grace_period() -> None:
    """A 25 s drain and 10 s requests do not fit in the default 30 s: SVD102 asks for
    25 + 10 + 5 = 40; with the drain untold the 30 s are enough."""
    text = deployment("api", "        - {name: api, image: example/api:1}")
    svd102 = [f for f in lint_text(text, told("deploy/api", 25)).findings if f.rule == "SVD102"]
    assert len(svd102) == 1
    assert svd102[0].message.endswith("set 40")
    assert "25 s of its own drain" in svd102[0].message
    assert "SVD102" not in rules(text, told("deploy/api"))


def test_cli_drain_seconds_from_config_and_flag(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(PODINFO)
    (tmp_path / ".svcdoctor.toml").write_text('drains = {"ghcr.io/stefanprodan/podinfo*" = 2}\n')
    configured = run("lint", "app.yaml", "-o", "json", cwd=tmp_path)
    assert "SVD103" in {f["rule"] for f in findings(configured)}  # 1 + 2 < 5
    longer = run(
        "lint", "app.yaml", "-o", "json", "--drains", "ghcr.io/stefanprodan/podinfo*=4s",
        cwd=tmp_path,
    )  # fmt: skip
    assert "SVD103" not in {f["rule"] for f in findings(longer)}  # the flag's seconds win
    bad = run("lint", "app.yaml", "--drains", "deploy/api=later", cwd=tmp_path)
    assert_usage_error(bad, "--drains", "duration")


def test_a_drain_too_short_is_reported_once() -> None:
    """Drains 2 s, grace 5 s: SVD101 asks for the sleep and the grace together; SVD102
    stays quiet as for any container without a delay."""
    text = deployment(
        "api", "        - {name: api, image: example/api:1}", "terminationGracePeriodSeconds: 5"
    )
    found = [f for f in lint_text(text, told("deploy/api", 2)).findings if f.rule < "SVD2"]
    assert [f.rule for f in found] == ["SVD101"]
    assert found[0].fix is not None
    assert "terminationGracePeriodSeconds: 20" in (fix_text(found[0].fix) or "")  # 3 + 2 + 10 + 5
    assert "cuts requests longer than 3 s" in found[0].message  # 5 s minus the 2 s drain


@pytest.mark.parametrize(
    ("image", "argv", "expected"),
    [
        ("gcr.io/knative-releases/knative.dev/serving/cmd/webhook@sha256:0d9c", (), 45.0),
        ("ko://knative.dev/net-istio/cmd/webhook", (), 45.0),
        ("gcr.io/knative-releases/knative.dev/serving/cmd/activator:v1.20", (), 45.0),
        ("gcr.io/knative-releases/knative.dev/serving/cmd/autoscaler:v1.20", (), None),
        ("ko://knative.dev/eventing/cmd/broker/ingress", (), 45.0),
        ("gcr.io/knative-releases/knative.dev/eventing/cmd/in_memory/channel_dispatcher", (), 45.0),
        ("gcr.io/knative-releases/knative.dev/eventing/cmd/controller:v1.20", (), None),
        ("ghcr.io/stefanprodan/podinfo:6.7.1", ("./podinfo", "--level=info"), 3.0),
        ("stefanprodan/podinfo", ("./podinfo", "--level=debug"), None),
        ("stefanprodan/podinfo", ("./podinfo", "-level", "debug"), None),
        ("registry.k8s.io/ingress-nginx/controller:v1.15.1", ("/nginx-ingress-controller",), None),
        ("registry.k8s.io/ingress-nginx/controller:v1.15.1", ("--shutdown-grace-period=10",), 10.0),
        ("registry.k8s.io/ingress-nginx/controller:v1.15.1", ("--shutdown-grace-period", "7"), 7.0),
        ("registry.k8s.io/ingress-nginx/controller:v1", ("--shutdown-grace-period=x",), None),
        ("docker.io/istio/proxyv2:1.28.0", ("proxy", "router"), 5.0),
        ("hjacobs/kube-ops-view:20.4.0", (), 10.0),
        ("us-docker.pkg.dev/agones-images/release/agones-extensions:1.57.0", (), None),
        ("agones-allocator:1.57.0", ("--readiness-shutdown-duration=18s",), 18.0),
        ("traefik:v3.3", (), None),
        ("example/api:1", (), None),
    ],
)
def test_known_drains_read_from_the_apps_code(
    image: str, argv: tuple[str, ...], expected: float | None
) -> None:
    drain = Settings().drain_of("Deployment", "app", image, argv)
    assert (drain.seconds if drain else None) == expected
    if drain is not None:
        assert drain.source.startswith("https://github.com/")


def test_the_users_drains_win_over_the_known_ones() -> None:
    pattern = "*stefanprodan/podinfo*"
    settings = Settings(drains=(pattern,), drain_seconds={pattern: 0})
    drain = settings.drain_of("Deployment", "podinfo", "ghcr.io/stefanprodan/podinfo:6.7.1")
    assert drain is not None
    assert drain.seconds == 0
    assert not drain.source
    text = deployment("podinfo", "        - {name: app, image: 'stefanprodan/podinfo:6.7.1'}")
    (message,) = [f.message for f in lint_text(text, settings).findings if f.rule == "SVD101"]
    assert "known drain" not in message
    # untold, the known drain applies: a 2 s sleep covers the rest of the 5 s
    (message,) = [f.message for f in lint_text(text).findings if f.rule == "SVD101"]
    assert "keeps serving 3 s after SIGTERM (known drain" in message


@pytest.mark.parametrize(
    ("argv", "default", "expected"),
    [
        (["--webhook-failure-policy-fail"], False, True),
        (["--webhook-failure-policy-fail=True"], False, True),
        (["-webhook-failure-policy-fail=1"], False, True),
        (["--webhook-failure-policy-fail=F"], True, False),
        (["--webhook-failure-policy-fail=maybe"], False, False),  # not a bool: the default
        (["--webhook-failure-policy-fail-x"], False, False),
        (["--webhook-failure-policy-fail=false", "--webhook-failure-policy-fail"], False, True),
    ],
)
def test_go_bool_flags_read_as_strconv_parse_bool(
    argv: list[str], default: bool, expected: bool
) -> None:
    assert go_bool(argv, "webhook-failure-policy-fail", default) is expected


def test_a_known_drain_set_by_an_environment_variable() -> None:
    """Agones' extensions and allocator read READINESS_SHUTDOWN_DURATION (viper.BindEnv in
    cmd/extensions/main.go of googleforgames/agones); a flag wins over it."""
    image = "us-docker.pkg.dev/agones-images/release/agones-extensions:1.57.0"
    env = {"READINESS_SHUTDOWN_DURATION": "18s"}
    drain = Settings().drain_of("Deployment", "agones-extensions", image, (), env=env)
    assert drain is not None
    assert drain.seconds == 18.0
    flag = ("--readiness-shutdown-duration=3s",)
    drain = Settings().drain_of("Deployment", "agones-extensions", image, flag, env=env)
    assert drain is not None
    assert drain.seconds == 3.0
