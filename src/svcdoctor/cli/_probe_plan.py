"""What ``svcdoctor probe`` without ``--yes`` shows: a short plan of what it would create
(the objects, the image, the targets, the bounds on time and traffic), not the agent's
source; ``--show-agent`` prints the whole objects as YAML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from svcdoctor.cluster.probe import ProbePlan


def plan_dict(chosen: ProbePlan, source: str) -> dict[str, Any]:
    """The plan as ``-o json`` prints it (``"created": false``)."""
    from svcdoctor.cluster.agentjob import TTL_SECONDS, node_job_name

    spec = chosen.spec
    args = dict(zip(spec.args[::2], spec.args[1::2], strict=False))  # the agent's --flag value
    count = int(args["--count"])
    rate, seconds = float(args["--rate"]), float(args["--duration"])
    objects: list[dict[str, Any]] = [
        {"kind": "ConfigMap", "name": spec.name, "holds": "agent.py",
         "bytes": len(source.encode()), "lines": source.count("\n")},
        {"kind": "Job", "name": spec.name, "image": spec.image,
         "active_deadline_seconds": spec.deadline_seconds,
         "ttl_seconds_after_finished": TTL_SECONDS},
    ]  # fmt: skip
    objects += [
        {"kind": "Job", "name": node_job_name(spec, i), "image": spec.image, "node": node}
        for i, node in enumerate(chosen.nodes)
    ]
    if spec.egress is not None:
        objects.insert(0, {"kind": "NetworkPolicy", "name": spec.name})
    return {
        "created": False,
        "namespace": spec.namespace,
        "run": spec.run_id,
        "labels": spec.selector,
        "objects": objects,
        "protocol": args["--protocol"],
        "path": args["--path"],
        "endpoints": list(chosen.endpoints),
        "requests_per_endpoint": count,
        "service": chosen.address,
        "service_rate": rate,
        "service_seconds": seconds,
        "service_requests": round(rate * seconds),
        "nodes": list(chosen.nodes),
        "request_timeout_seconds": float(args["--timeout"]),
        "bound_seconds": spec.bound_seconds,
        "notes": list(chosen.notes),
    }


def plan_lines(plan: dict[str, Any]) -> list[str]:
    """The plan in a dozen lines, and how to see or create the objects."""
    lines = [f"svcdoctor probe would create, in namespace {plan['namespace']} (nothing created):"]
    for o in plan["objects"]:
        if o["kind"] == "NetworkPolicy":
            what = "the agent may reach only the Service's pods on their ports, and DNS"
        elif o["kind"] == "ConfigMap":
            what = f"the agent ({o['holds']}: {o['lines']} lines, {o['bytes'] / 1000:.1f} kB)"
        elif o["kind"] == "Job" and "node" not in o:
            what = (
                f"runs it: image {o['image']}, one pod, ended after "
                f"{o['active_deadline_seconds']} s at the latest, removed "
                f"{o['ttl_seconds_after_finished']} s after it ends"
            )
        else:
            what = f"on node {o['node']} (--per-node): image {o['image']}"
        lines.append(f"  {o['kind']:<9} {o['name']}  {what}")
    n = len(plan["endpoints"])
    shown = ", ".join(plan["endpoints"][:4]) + (", …" if n > 4 else "")
    method = f"GET {plan['path']}" if plan["protocol"] == "http" else plan["protocol"]
    lines += [
        f"targets: {n} endpoint(s) directly ({shown}), {plan['requests_per_endpoint']} "
        f"{method} each; the Service {plan['service']}: {plan['service_requests']} at "
        f"{plan['service_rate']:g}/s over {plan['service_seconds']:g} s"
        + (f", from each of {len(plan['nodes'])} node(s) too" if plan["nodes"] else ""),
        f"bounds: each request ≤ {plan['request_timeout_seconds']:g} s; the agent ends within "
        f"{plan['bound_seconds']:.0f} s of its start",
        f"labels: {plan['labels']} (deleted at the end; svcdoctor cleanup removes leftovers)",
        *(f"note: {note}" for note in plan["notes"]),
        "--show-agent prints the objects in full (YAML, kubectl apply -f reads it); "
        "--yes creates them and probes",
    ]
    return lines
