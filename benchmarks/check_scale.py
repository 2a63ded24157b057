"""Scale benchmark: check large synthetic traces on Spark, against baselines in the same run.

One command measures, each Spark configuration in a fresh process and JVM:

1. Spark ``local[2]`` on every size of ``--sizes`` (default 1M and 10M events;
   summary mode, all five properties plus ``clock``);
2. Spark ``local[1]`` on the smallest size: the baseline for the speed-up of
   ``local[2]`` (goal: at least 1.6x);
3. the pure-Python reference checkers on the smallest size (sort-based FIFO,
   causal and total order), with a time limit (``--ref-limit``).

Traces are Parquet files written by ``gen_trace.py`` into ``--data`` (default
/tmp/mrbench) if absent, with the injected violations beside them in a .json
file; they are never committed. Each row of the table says whether the
violations found are exactly the injected ones, the peak RSS of the Python
driver and of the JVM (driver and executors in local mode), and the load
average, since a shared machine slows every figure down.

With ``--cluster``, instead: a standalone master and one, then two worker
processes on this machine (``mailroom.spark.cluster``, 1 core and
``--worker-memory`` each), ``mailroom check`` and ``mailroom sweep`` run through
``--master`` on each, and the scaling from one worker to two with the rate per
executor.

Usage:
    python benchmarks/check_scale.py                      # 1M and 10M (about 30 min)
    python benchmarks/check_scale.py --cluster --sizes 1000000  # 1 vs 2 workers
    python benchmarks/check_scale.py --skip-10m           # 1M only
    python benchmarks/check_scale.py --sizes 20000,100000 # a quick try
    python benchmarks/check_scale.py --baseline-sizes 1000000,10000000  # local[1] on both
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROPS = ("integrity", "fifo", "causal", "total", "liveness", "clock")


def expected(info: dict[str, int]) -> dict[str, int]:
    """The violation counts the injected faults cause (summary mode and reference alike)."""
    swaps = info["swap"]
    return {
        "integrity": info["dup"],
        "fifo": swaps,
        "causal": swaps,
        "total": 0,  # swaps are unicasts: one process delivers them, no pair disagrees
        "liveness": info["drop"],
        "clock": 0,
    }


def _jvm_peak_rss_mb(spark: object) -> int | None:
    """VmHWM of the JVM (Linux only), read before it stops."""
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[attr-defined]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except (OSError, AttributeError, ValueError):
        pass
    return None


def spark_profile(spark: object) -> dict[str, int]:
    """Jobs, stages run and tasks run so far in this SparkContext (from its status tracker)."""
    tracker = spark.sparkContext.statusTracker()  # type: ignore[attr-defined]
    jobs = tracker.getJobIdsForGroup(None)
    stages: set[int] = set()
    tasks = 0
    for job in jobs:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else []:
            s = tracker.getStageInfo(stage)
            if s is not None and s.numCompletedTasks and stage not in stages:
                stages.add(stage)
                tasks += s.numCompletedTasks
    return {"jobs": len(jobs), "stages": len(stages), "tasks": tasks}


def spark_check(path: str, master: str, driver_memory: str | None) -> dict[str, object]:
    """``mailroom check`` exactly as a user runs it (the CLI's defaults), timed end to end."""
    import contextlib
    import io
    import tempfile

    sys.path.insert(0, str(HERE.parent / "src"))
    from pyspark.sql import SparkSession

    from mailroom.cli import main as cli

    load = os.getloadavg()[0]
    out = tempfile.mkdtemp(prefix="mrbench-report-")
    argv = ["check", path, "--master", master, "--out", out, "--properties", ",".join(PROPS)]
    if driver_memory:  # the CLI's own default otherwise
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {driver_memory} pyspark-shell"
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as text:
        code = cli(argv)
    seconds = time.perf_counter() - t0
    spark = SparkSession.getActiveSession()
    summary = json.loads((Path(out) / "summary.json").read_text())
    first = text.getvalue().splitlines()[0].split()
    result: dict[str, object] = {
        "events": int(first[1]) if first[:1] == ["checked"] else None,
        "seconds": round(seconds, 1),
        "exit": code,
        "violations": summary["violations"],
        "invalid": summary["invalid"],
        "driver_python_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "jvm_peak_rss_mb": _jvm_peak_rss_mb(spark),
        "partitions": int(spark.conf.get("spark.sql.shuffle.partitions")) if spark else None,
        **(spark_profile(spark) if spark else {}),
        "load": [round(load, 1), round(os.getloadavg()[0], 1)],
    }
    if spark is not None:
        spark.stop()
    return result


def cluster_scaling(path: Path, size: int, worker_memory: str) -> None:
    """``mailroom check`` and ``mailroom sweep`` on 1, then 2 standalone workers."""
    sys.path.insert(0, str(HERE.parent / "src"))
    from mailroom.spark.cluster import standalone_cluster

    sweep = ["--protocol", "rst,cbcast,ks", "--n", "4,8", "--seeds", "4", "--messages", "100"]
    rows = []
    for workers in (1, 2):
        with standalone_cluster(workers=workers, cores=1, memory=worker_memory) as url:
            for what, argv in (
                ("check", ["check", str(path), "--properties", ",".join(PROPS)]),
                ("sweep", ["sweep", *sweep, "--quiet"]),
            ):
                out = Path(f"/tmp/mrbench-cluster-{what}-{workers}")
                cmd = [sys.executable, "-m", "mailroom", *argv, "--master", url, "--out", str(out)]
                t0 = time.perf_counter()
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                seconds = time.perf_counter() - t0
                print(f"  {what} on {workers} worker(s): {seconds:.1f} s, exit {done.returncode}")
                if done.returncode not in (0, 1):
                    print(done.stderr.strip().splitlines()[-1:])
                rows.append((what, workers, seconds))
    print(f"\n{'run':8s} {'workers':>7s} {'seconds':>8s} {'events/s per executor':>22s}")
    for what, workers, seconds in rows:
        rate = f"{size / seconds / workers:22,.0f}" if what == "check" else f"{'':>22s}"
        print(f"{what:8s} {workers:7d} {seconds:8.1f} {rate}")
    for what in ("check", "sweep"):
        one, two = (sec for w, _, sec in rows if w == what)
        print(f"{what}: 2 workers vs 1: {one / two:.2f}x")


def reference_check(path: str) -> dict[str, object]:
    sys.path.insert(0, str(HERE.parent / "src"))
    from mailroom.trace.checkers import CHECKERS, by_run
    from mailroom.trace.parquet import read_parquet

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    events = read_parquet(path)
    runs = by_run(events)
    out: dict[str, object] = {
        "events": len(events),
        "read_seconds": round(time.perf_counter() - t0, 1),
    }
    counts: dict[str, int] = {}
    for prop in ("integrity", "liveness", "fifo", "causal", "total"):
        t = time.perf_counter()
        counts[prop] = sum(len(CHECKERS[prop](evs, run)) for run, evs in runs.items())
        out[f"{prop}_seconds"] = round(time.perf_counter() - t, 1)
        print(json.dumps({"partial": out}), flush=True)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["violations"] = counts
    out["invalid"] = 0  # the reference reader stops at the first bad row
    out["driver_python_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    out["load"] = [round(load, 1), round(os.getloadavg()[0], 1)]
    return out


def _child(args: list[str], limit: float | None) -> dict[str, object]:
    cmd = [sys.executable, __file__, *args]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, check=False)
    except subprocess.TimeoutExpired as exc:
        partial = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout
        last = [line for line in (partial or "").splitlines() if line.startswith("{")]
        return {
            "timed_out_after_seconds": round(time.perf_counter() - t0),
            "partial": json.loads(last[-1])["partial"] if last else None,
        }
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
    result: dict[str, object] = json.loads(lines[-1])
    return result


def _label(count: int) -> str:
    if count % 1_000_000 == 0:
        return f"{count // 1_000_000}M"
    return f"{count // 1000}k" if count % 1000 == 0 else str(count)


def trace(data: Path, count: int) -> tuple[Path, dict[str, int]]:
    """The trace of ``count`` events in ``data`` (generated once) and what was injected."""
    path = data / f"t{_label(count).lower()}.parquet"
    meta = path.with_suffix(".json")
    if not (path.exists() and meta.exists()):
        print(f"generating {path} ...", flush=True)
        out = subprocess.run(
            [sys.executable, str(HERE / "gen_trace.py"), str(path), "--events", str(count)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        info = json.loads(out.strip().splitlines()[-1].replace("'", '"'))
        meta.write_text(json.dumps(info))
        print(f"  {info}", flush=True)
    info = json.loads(meta.read_text())
    return path, info


def report(
    plan: list[tuple[str, int, list[str]]],
    results: dict[str, dict[str, object]],
    traces: dict[int, tuple[Path, dict[str, int]]],
    sizes: list[int],
) -> None:
    """Print the table and the ratios (all from this run)."""
    base = sizes[0]
    print(
        f"\n{'run':24s} {'events':>11s} {'seconds':>8s} {'events/s':>9s}  found = injected  "
        f"{'py MB':>6s} {'JVM MB':>6s} {'jobs':>4s} {'stages':>6s} {'tasks':>6s}  load"
    )
    for label, size, _ in plan:
        r = results[label]
        want = expected(traces[size][1])
        found = r.get("violations")
        if isinstance(found, dict):
            props = [p for p in want if p in found]
            same = all(found[p] == want[p] for p in props) and r.get("invalid") == 0
            verdict = f"{'yes' if same else 'NO'} ({sum(found.values())})"
        else:
            verdict = "error" if "error" in r else "n/a"
        secs = r.get("seconds")
        events = r.get("events")
        rate = (
            f"{float(events) / float(secs):9,.0f}"
            if isinstance(secs, int | float) and isinstance(events, int) and secs
            else f"{'n/a':>9s}"
        )
        shown = secs if secs is not None else f">{r.get('timed_out_after_seconds', '?')}"
        print(
            f"{label:24s} {events if events is not None else 'n/a':>11} {shown!s:>8s} {rate}  "
            f"{verdict:16s} {r.get('driver_python_peak_rss_mb', ''):>6} "
            f"{r.get('jvm_peak_rss_mb', '') or '':>6} {r.get('jobs', ''):>4} "
            f"{r.get('stages', ''):>6} {r.get('tasks', ''):>6}  {r.get('load', '')}"
        )

    def seconds_of(label: str) -> float | None:
        value = results.get(label, {}).get("seconds")
        return float(value) if isinstance(value, int | float) else None

    for size in sizes:
        two = seconds_of(f"spark local[2] {_label(size)}")
        one = seconds_of(f"spark local[1] {_label(size)}")
        if two and one:
            ratio = one / two
            print(f"speed-up local[2] vs local[1] on {_label(size)}: {ratio:.2f}x (goal >= 1.6x)")
    two = seconds_of(f"spark local[2] {_label(base)}")
    ref_label = f"reference {_label(base)}"
    if two and ref_label in results:
        ref = results[ref_label]
        ref_s = seconds_of(ref_label) or ref.get("timed_out_after_seconds")
        if isinstance(ref_s, int | float):
            bound = "" if "seconds" in ref else ">= "
            print(
                f"reference / spark local[2] on {_label(base)}: {bound}{float(ref_s) / two:.2f}x"
                " (goal >= 1: Spark at most the reference's time)"
            )
    for size in sizes[1:]:
        took = seconds_of(f"spark local[2] {_label(size)}")
        if took:
            print(
                f"{_label(size)} events on local[2]: {took:.0f} s ({size / took:,.0f} events/s); "
                "goal for 10M: <= 180 s"
            )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default="/tmp/mrbench", help="where traces are generated and kept")
    ap.add_argument(
        "--sizes",
        default="1000000,10000000",
        help="comma-separated event counts; local[1] and the reference run on the smallest",
    )
    ap.add_argument("--skip-10m", action="store_true", help="leave out sizes of 10M and more")
    ap.add_argument("--ref-limit", type=float, default=900.0, help="seconds for the reference")
    ap.add_argument("--no-reference", action="store_true", help="skip the reference checkers")
    ap.add_argument("--no-local1", action="store_true", help="skip the local[1] baseline")
    ap.add_argument(
        "--baseline-sizes",
        default="",
        help="sizes to also run on local[1] for the speed-up (default: the smallest); "
        "fixed JVM costs weigh on small traces, so the largest gives the truest ratio",
    )
    ap.add_argument(
        "--driver-memory", default=None, help="Spark driver heap (default: the CLI's own)"
    )
    ap.add_argument("--cluster", action="store_true", help="1 vs 2 standalone workers instead")
    ap.add_argument("--worker-memory", default="1g", help="--cluster: memory of each worker")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "spark":
            print(json.dumps(spark_check(rest[0], rest[1], args.driver_memory)))
        else:
            print(json.dumps(reference_check(rest[0])))
        return
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if args.skip_10m:
        sizes = [s for s in sizes if s < 10_000_000] or sizes[:1]
    traces = {s: trace(data, s) for s in sizes}
    base = sizes[0]
    if args.cluster:
        cluster_scaling(traces[base][0], base, args.worker_memory)
        return
    mem = ["--driver-memory", args.driver_memory] if args.driver_memory else []
    baselines = [int(s) for s in args.baseline_sizes.split(",") if s] or [base]
    plan = []
    for s in sizes:
        plan.append((f"spark local[2] {_label(s)}", s, ["spark", "local[2]"]))
        if s in baselines and not args.no_local1:
            plan.append((f"spark local[1] {_label(s)}", s, ["spark", "local[1]"]))
    results: dict[str, dict[str, object]] = {}
    for label, size, (kind, master) in plan:
        print(f"running {label} ...", flush=True)
        results[label] = _child([*mem, "--child", kind, str(traces[size][0]), master], None)
        print(f"  {json.dumps(results[label])}", flush=True)
    if not args.no_reference:
        label = f"reference {_label(base)}"
        print(f"running {label} (limit {args.ref_limit:.0f} s) ...", flush=True)
        results[label] = _child(["--child", "reference", str(traces[base][0])], args.ref_limit)
        print(f"  {json.dumps(results[label])}", flush=True)
        plan.append((label, base, ["reference", ""]))

    report(plan, results, traces, sizes)
    (data / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
