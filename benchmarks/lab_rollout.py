"""Benchmark: lab start-up time and the wall time of a full 8-pod rolling update, per
datapath, side by side in one run.

* start-up: from nothing to 8 Ready pods behind the Service (namespaces, veths, bridge and
  iptables for the kernel datapath; proxies for the userspace one);
* rollout: a rolling update of the 8 pods (maxSurge 1, maxUnavailable 0, preStop 0) until
  every old pod has exited, under 100 requests/s;
* the race figure: failed requests against what the model predicts from the propagation
  each node actually applied (the lab's fidelity ratio), and against ``svcdoctor
  simulate`` with the same parameters (the mean of 40 simulated windows).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from svcdoctor.lab.cluster import Cluster, PodSpec, rolling_update, wait_ready
from svcdoctor.lab.kernel import available
from svcdoctor.lab.load import Load, LoadSpec
from svcdoctor.lab.run import make_datapath, run
from svcdoctor.lab.scenarios import SCENARIOS, as_simulation
from svcdoctor.simulate import simulate


async def rollout(datapath: str, replicas: int) -> tuple[float, float]:
    dp = make_datapath(datapath, f"svcd{int(time.time() * 1000) % 0xFFFFFF:06x}", 1)
    cluster = Cluster(dp, 2, SCENARIOS["race"].propagation, 1)
    load = Load(LoadSpec(rate=100.0, clients=8), dp, 2, 1)
    spec = PodSpec(shutdown="naive")
    try:
        begin = time.perf_counter()
        await dp.start(2)
        old = [f"api-old-{i:02d}" for i in range(replicas)]
        for name in old:
            await cluster.create(name, spec)
        await wait_ready(cluster, old)
        startup = time.perf_counter() - begin
        stop = asyncio.Event()
        traffic = asyncio.create_task(load.run(stop, time.time() + 120))
        begin = time.perf_counter()
        await rolling_update(cluster, old, lambda i: f"api-new-{i:02d}", spec, 1, 0)
        await cluster.drain()
        wall = time.perf_counter() - begin
        stop.set()
        await traffic
    finally:
        await cluster.stop_all()
        await dp.close()
    return startup, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=8)
    args = parser.parse_args()
    datapaths = ["userspace"] + ([] if available() else ["kernel"])
    print(
        f"{'datapath':<11}{'start-up s':>11}{'rollout s':>11}{'race failed':>13}"
        f"{'model':>8}{'ratio':>7}{'simulate':>10}{'ratio':>7}"
    )
    fidelity = {}
    for datapath in datapaths:
        startup, wall = asyncio.run(rollout(datapath, args.replicas))
        scenario = replace(SCENARIOS["race"], replicas=args.replicas)
        result = asyncio.run(run(scenario, datapath, Path(tempfile.mkdtemp())))
        expected = float(result.truth.expected_race_failures)
        simulated = simulate(as_simulation(scenario), runs=40).failed
        fidelity[datapath] = result.failed / expected if expected else float("nan")
        print(
            f"{datapath:<11}{startup:>11.2f}{wall:>11.2f}{result.failed:>13}{expected:>8.0f}"
            f"{fidelity[datapath]:>7.2f}{simulated:>10.0f}{result.failed / simulated:>7.2f}"
        )
    if len(fidelity) == 2:
        print(
            "the datapaths agree: kernel/userspace ratio of failed/model "
            f"{fidelity['kernel'] / fidelity['userspace']:.2f} (tests assert 0.6-1.6)"
        )
    if available():
        print(f"kernel datapath skipped: {available()}")


if __name__ == "__main__":
    main()
