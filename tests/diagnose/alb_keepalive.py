"""AWS ALB access logs in front of a Node.js app with its default 5 s keep-alive timeout
(https://nodejs.org/api/http.html#serverkeepalivetimeout), while the ALB keeps idle
connections 60 s (https://docs.aws.amazon.com/elasticloadbalancing/latest/application/
application-load-balancers.html#connection-idle-timeout): a request the ALB sends on a
connection idle longer than 5 s may meet the target closing it, logged as
``-1 -1 -1 502 -`` (the troubleshooting page lists both that and a refused connection for
this shape: https://docs.aws.amazon.com/elasticloadbalancing/latest/application/
load-balancer-troubleshooting.html#http-502-issues). Line shape: tests/realshapes.py
``alb_log``."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from tests.factory import T0

ARN = (
    "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-api/73e2d6bc24d8a067"
)


def alb_keepalive_log(seed: int = 7, n: int = 4000, duration: float = 3600.0) -> str:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.uniform(0, duration, n))
    targets = np.array([f"10.0.3.{17 + i}:3000" for i in range(4)])
    pick = rng.integers(0, 4, n)
    failed = np.zeros(n, dtype=bool)
    for t in range(4):
        idx = np.flatnonzero(pick == t)
        gaps = np.diff(ts[idx], prepend=-np.inf)
        failed[idx[(gaps > 5.0) & (gaps < 60.0) & (rng.random(idx.size) < 0.5)]] = True
    lines = []
    for i in range(n):
        start = T0 + float(ts[i])
        took = 0.0 if failed[i] else float(rng.gamma(2.0, 0.01))
        end = datetime.fromtimestamp(start + took, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        created = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        times, codes = (
            ("-1 -1 -1", "502 -") if failed[i] else (f"0.000 {took:.3f} 0.000", "200 200")
        )
        lines.append(
            f"https {end} app/k8s-shop-api/50dc6c495c0c9188 "
            f"203.0.113.{i % 200}:{40000 + i % 20000} "
            f'{targets[pick[i]]} {times} {codes} 180 277 "GET https://api.example.com:443/v1/items '
            f'HTTP/1.1" "okhttp/4.12.0" TLS_AES_128_GCM_SHA256 TLSv1.3 {ARN} "Root=1-{i:08x}" '
            f'"api.example.com" "-" 0 {created} "forward" "-" "-" "{targets[pick[i]]}" "-" "-" "-"'
        )
    return "\n".join(lines) + "\n"
