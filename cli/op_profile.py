"""`edgelite benchmark --op-profile`: each step of edgelite's plan timed alone, and
benchmark_model's three tables of it (run order, top by computation time, summary by node type).
A delegate's partition is one step, shown as "<delegate> partition"."""
from __future__ import annotations

import statistics
import time

from .benchmark import count_line, stats_us
from .progress import Progress

TOP_OPS = 10           # rows of the "Top by Computation Time" table

def op_profile(plan, threads: int | None, runs: int, quiet: bool = True) -> dict:
    """Each step of a prepared plan (`SubgraphPlan`, on the inputs it holds) timed alone over
    `runs` runs with `threads` BLAS threads: benchmark_model's tables as rows."""
    from edgelite.interpreter.threads import limit

    clock = time.perf_counter
    per_step = [[] for _ in plan.steps]
    totals = []
    with Progress("op profile", total=runs, quiet=quiet) as bar, \
            limit(threads):
        for run, args in plan.steps:    # one untimed pass: what the first invoke prepares
            run(*args)
        for _ in range(runs):
            run_start = clock()
            for i, (run, args) in enumerate(plan.steps):
                t = clock()
                run(*args)
                per_step[i].append(clock() - t)
            totals.append(clock() - run_start)
            bar.advance()
    placed = {p.index: p for p in plan.placement}
    sg = plan.sg
    rows = []
    total_avg = sum(statistics.mean(t) for t in per_step) or 1.0
    for i, (oi, t) in enumerate(zip(plan.step_ops, per_step)):
        op = sg.operators[oi]
        p = placed.get(oi)
        if p is not None and p.where not in ("CPU", "folded"):
            members = [q.index for q in plan.placement if q.where == p.where
                       and q.partition == p.partition]
            kind, name = f"{p.where} partition", f"partition {p.partition} ({len(members)} ops: " \
                f"{members[0]}..{members[-1]})"
        else:
            out = op.outputs[0] if op.outputs else -1
            kind, name = op.op, sg.tensors[out].name if out >= 0 else ""
        rows.append({"step": i, "op_index": oi, "node_type": kind, "name": name,
                     "first_ms": t[0] * 1e3, "avg_ms": statistics.mean(t) * 1e3,
                     "share": statistics.mean(t) / total_avg, "times_called": 1})
    cdf = 0.0
    for r in rows:
        cdf += r["share"]
        r["cdf"] = cdf
    by_type: dict = {}
    for r in rows:
        e = by_type.setdefault(r["node_type"], {"node_type": r["node_type"], "count": 0,
                                                "avg_ms": 0.0, "times_called": 0})
        e["count"] += 1
        e["avg_ms"] += r["avg_ms"]
        e["times_called"] += r["times_called"]
    summary, cdf = sorted(by_type.values(), key=lambda e: -e["avg_ms"]), 0.0
    for e in summary:
        e["share"] = e["avg_ms"] * 1e-3 / total_avg
        cdf += e["share"]
        e["cdf"] = cdf
    top = sorted(rows, key=lambda r: -r["avg_ms"])[:TOP_OPS]
    cdf = 0.0
    top_rows = []
    for r in top:
        cdf += r["share"]
        top_rows.append({**r, "cdf": cdf})
    return {"runs": runs, "subgraph": plan.index, "run_order": rows, "top": top_rows,
            "by_node_type": summary,
            "timings_us": stats_us(totals), "nodes_observed": len(rows)}



def op_profile_text(p: dict) -> list:
    """benchmark_model's three tables, tab-separated columns as its profiler prints them."""
    head = "\t" + "\t".join(["[node type]".rjust(24), "[first]".rjust(10), "[avg ms]".rjust(10),
                             "[%]".rjust(8), "[cdf%]".rjust(8), "[times called]".rjust(14),
                             "[Name]"])

    def row(r: dict) -> str:
        return "\t" + "\t".join([r["node_type"].rjust(24), f"{r['first_ms']:10.3f}",
                                 f"{r['avg_ms']:10.3f}", f"{r['share']:7.3%}".rjust(8),
                                 f"{r['cdf']:7.3%}".rjust(8), str(r["times_called"]).rjust(14),
                                 f"[{r['name']}]"])

    lines = [f"Operator-wise Profiling Info for Regular Benchmark Runs ({p['runs']} runs, each "
             "step of the plan timed alone):",
             "=" * 30 + " Run Order " + "=" * 30, head, *map(row, p["run_order"]), "",
             "=" * 30 + " Top by Computation Time " + "=" * 30, head, *map(row, p["top"]), "",
             "=" * 30 + " Summary by node type " + "=" * 30,
             "\t" + "\t".join(["[Node type]".rjust(24), "[count]".rjust(8), "[avg ms]".rjust(10),
                               "[avg %]".rjust(10), "[cdf %]".rjust(10),
                               "[times called]".rjust(14)])]
    for e in p["by_node_type"]:
        lines.append("\t" + "\t".join([e["node_type"].rjust(24), str(e["count"]).rjust(8),
                                       f"{e['avg_ms']:10.3f}", f"{e['share']:9.3%}".rjust(10),
                                       f"{e['cdf']:9.3%}".rjust(10),
                                       str(e["times_called"]).rjust(14)]))
    lines += ["", f"Timings (microseconds): {count_line(p['timings_us'])}",
              f"{p['nodes_observed']} nodes observed"]
    return lines
