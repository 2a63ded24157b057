"""Every figure that README.md and docs/benchmarks.md quote, from one command.

On an idle machine (nothing else running; the run refuses to start above a
1-minute load of ``--max-load``, 1.0 by default)::

    pip install -e '.[bench]'   # redis-py, hiredis, pysyncobj
    apt-get install -y redis-server
    python benchmarks/figures.py --out results/

runs, one after the other, with the discipline of ``rounds.py`` (alternating
rounds, medians and ranges, ratios per round, the load printed every round):

1. ``bench_delivery.py`` with its defaults: per-delivery CPU of no-op, Unordered,
   Fifo, CBCAST, KS and RST at n = 3, 8 and 32 (a few minutes);
2. ``net_throughput.py`` with its defaults: n = 3, 5 and 8 processes on loopback,
   mailroom's rows (one ``broadcast`` per message and ``broadcast_many`` of 64)
   against Redis Streams and PySyncObj, peak, CPU, memory and latency (about
   half an hour on a 2-core machine);
3. ``replicated_throughput.py`` with its defaults: replicated objects (a
   ``ReplCounter`` over a safe Sequencer group, checkpoints off and ``sync``)
   against PySyncObj's ``ReplCounter`` at n = 3, 5 and 7: operations per second
   with 1, 200 and 2000 calls in flight per member, p50/p99, CPU, memory and
   fail-over time (the figures of docs/replicated.md; about an hour).

Each writes its table to ``OUT/<name>.txt`` (and the screen) and every figure,
per round, to ``OUT/<name>.json``. Between them it waits for the load of the
previous one to die down (``--load-policy wait``), so each starts on an idle
machine. ``--smoke`` runs each with tiny settings, to check that everything works
(its figures mean nothing).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import peer_pysyncobj
import rounds

HERE = os.path.dirname(os.path.abspath(__file__))
SMOKE = {
    "bench_delivery": ["--burst", "200", "--sizes", "3", "--rounds", "1"],
    "net_throughput": [
        "--n",
        "3",
        "--seconds",
        "0.2",
        "--warmup",
        "0.1",
        "--rounds",
        "1",
        "--latency-rounds",
        "1",
        "--latency-seconds",
        "0.3",
        "--systems",
        "plain,CBCAST",
    ],
    "replicated_throughput": ["--smoke"],
}


def run(name: str, out: str, extra: list[str]) -> int:
    """Run one benchmark, its output to the screen and to OUT/<name>.txt."""
    cmd = [
        sys.executable,
        os.path.join(HERE, f"{name}.py"),
        "--json",
        os.path.join(out, f"{name}.json"),
        *extra,
    ]
    print(f"$ {' '.join(cmd)}", flush=True)
    with open(os.path.join(out, f"{name}.txt"), "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            log.write(line)
        return proc.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="results", help="directory for the tables and JSON")
    p.add_argument("--smoke", action="store_true", help="tiny settings: a check, not figures")
    p.add_argument("--max-load", default="1.0")
    p.add_argument("--load-policy", choices=("refuse", "flag", "wait"), default="refuse")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    load = ["--max-load", args.max_load]
    first = run(
        "bench_delivery",
        args.out,
        [*load, "--load-policy", args.load_policy, *SMOKE["bench_delivery"] * args.smoke],
    )
    if first:
        raise SystemExit(first)
    policy = "flag" if args.load_policy == "flag" else "wait"  # the first one's own load
    for name in ("net_throughput", "replicated_throughput"):
        if name == "replicated_throughput" and (why := peer_pysyncobj.missing()):
            line = f"replicated_throughput skipped: {why}; {peer_pysyncobj.INSTALL}.\n"
            print(line, end="", flush=True)  # its peer is missing: a line, as for a row
            with open(os.path.join(args.out, f"{name}.txt"), "w") as log:
                log.write(line)
            continue
        code = run(name, args.out, [*load, "--load-policy", policy, *SMOKE[name] * args.smoke])
        if code:
            raise SystemExit(code)
    print(f"{rounds.load_text()} at the end; tables and JSON in {args.out}/")


if __name__ == "__main__":
    main()
