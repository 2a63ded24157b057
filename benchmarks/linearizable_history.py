"""Generate a linearizable register history of many keys and check it on both engines.

    python benchmarks/linearizable_history.py --ops 1000000 --keys 10000 --out /tmp/h.jsonl

Clients (``--clients``) invoke reads, writes and compare-and-sets on random keys; each
operation takes effect on an atomic register at its completion, so the history is
linearizable, with real-time overlaps between clients. The history is written as JSON
Lines (never committed: it is made here), then checked by the local engine and on
Spark (``--master``, default local[2]: the executors read, pair and check it); the
script prints both times and verdicts. An existing ``--out`` file is checked again.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path


def generate(path: Path, ops: int, keys: int, clients: int, seed: int) -> None:
    """Write ``ops`` rows (invocations and completions) to ``path``."""
    rnd = random.Random(seed)
    values: dict[int, int] = {}
    pending: dict[int, dict[str, object]] = {}
    with path.open("w", encoding="utf-8") as out:
        for n in range(ops):
            p = rnd.randrange(clients)
            if p not in pending and ops - n > len(pending) + 1:
                k, f = rnd.randrange(keys), rnd.choice(("read", "write", "cas"))
                value = None if f == "read" else rnd.randrange(5)
                if f == "cas":
                    value = [rnd.randrange(5), rnd.randrange(5)]
                pending[p] = {"process": p, "f": f, "key": k, "value": value}
                out.write(json.dumps({**pending[p], "type": "invoke", "time": n}) + "\n")
                continue
            p = p if p in pending else next(iter(pending))
            row = pending.pop(p)
            out.write(json.dumps(_complete(row, values, n)) + "\n")


def _complete(row: dict[str, object], values: dict[int, int], n: int) -> dict[str, object]:
    key, f, value = row["key"], row["f"], row["value"]
    assert isinstance(key, int)
    kind = "ok"
    if f == "read":
        value = values.get(key)
    elif f == "write":
        assert isinstance(value, int)
        values[key] = value
    else:
        assert isinstance(value, list)
        if values.get(key) == value[0]:
            values[key] = value[1]
        else:
            kind = "fail"
    return {**row, "type": kind, "value": value, "time": n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-local", action="store_true")
    args = parser.parse_args()
    from mailroom.linearizable import MODELS, check_calls, pair, read_history
    from mailroom.linearizable.spark import check_files_on_spark
    from mailroom.spark import get_session

    start = time.perf_counter()
    if not args.out.exists():
        generate(args.out, args.ops, args.keys, args.clients, args.seed)
    print(f"generated {args.ops} rows in {time.perf_counter() - start:.1f} s")
    if not args.skip_local:
        start = time.perf_counter()
        calls = pair(read_history(args.out, "jsonl"))
        print(f"local: read and paired {len(calls)} calls in {time.perf_counter() - start:.1f} s")
        local = check_calls(calls, MODELS["register"])
        print(f"local engine: {local.verdict} in {time.perf_counter() - start:.1f} s in all")
    spark = get_session(args.master)
    start = time.perf_counter()
    remote = check_files_on_spark(spark, [str(args.out)], MODELS["register"])
    took = time.perf_counter() - start
    print(f"Spark {args.master}: read, paired and checked: {remote.verdict} in {took:.1f} s")
    if not args.skip_local:
        print(f"identical verdicts: {local == remote}")


if __name__ == "__main__":
    main()
