"""`python -m wakeup_sim` (`make simulate`): the grid (`wakeup_sim.grid`), its figures as Markdown,
the worst cell's plot as PNG; non-zero when a cell misses its bound, loses a wake or calls one twice.

Its last line: `simulate: C cells, over bound B, lost L, called twice D, worst p99 X s (cell)`.
"""

import argparse
import os
import resource
import sys
import time
from concurrent.futures import as_completed
from dataclasses import replace

from wakeup_sim import report, worker
from wakeup_sim.deployment import ROOT
from wakeup_sim.grid import ON_TIME_S, SCENARIOS
from wakeup_sim.profile import AWS

PLOTS = ROOT / "docs" / "scaling"
WORST_PLOT = "worst-cell.png"


def cpu_s() -> float:
    """CPU time of this process (its workers' is each scenario's own, as `worker.simulate` returns it)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _parameters(pairs: list[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs)


def worst_cell(every: list[report.Figures]) -> report.Figures | None:
    """The cell with the worst p99 of those held to a second (the planner's; else of any bounded)."""
    held = [f for f in every if f.bound_s == ON_TIME_S] or [f for f in every if f.bound_s is not None] or every
    return max(held, key=lambda f: f.p99_s, default=None)


def summary(every: list[report.Figures]) -> str:
    """The last line: cells, over bound, lost, called twice, and the worst p99 (`worst_cell`)."""
    worst = worst_cell(every)
    worst_text = f"{worst.p99_s:.2f} s ({worst.name})" if worst else "none"
    return (
        f"simulate: {len(every)} cells, over bound {sum(report.over_bound(f) for f in every)}, "
        f"lost {sum(f.lost for f in every)}, called twice {sum(f.called_twice for f in every)}, "
        f"worst p99 {worst_text}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wakeup_sim", description=__doc__)
    parser.add_argument("--only", help="run the cells whose name contains this")
    parser.add_argument("--no-plots", action="store_true", help="draw no PNG")
    parser.add_argument("--workers", type=int, default=2, help="processes (cells run in parallel)")
    parser.add_argument("--costs", action="store_true", help="print each cell's cost per wake, line by line")
    parser.add_argument(
        "--parameter", action="append", default=[], metavar="NAME=VALUE", help="a template parameter overridden"
    )
    parser.add_argument(
        "--no-init-boost", action="store_true", help="init at the memory's share of a vCPU (the assumption's other end)"
    )
    parser.add_argument("--reclaim", type=float, help="seconds an idle cell keeps an idle environment")
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.only or args.only in s.name]
    if args.reclaim is not None:
        chosen = [replace(s, reclaimed_after_s=args.reclaim) if s.reclaimed_after_s else s for s in chosen]
    parameters = _parameters(args.parameter)
    profile = replace(AWS, init_unthrottled=False) if args.no_init_boost else AWS
    started, cpu_before = time.monotonic(), cpu_s()
    print(report.HEADER, flush=True)
    registering: list[report.Figures] = []
    every: list[report.Figures] = []
    scenarios_cpu = 0.0
    points: dict[str, report.Points] = {}
    with worker.pool(args.workers, False) as pool:
        # The largest first, so that the workers finish together; the rows print in order.
        futures = {
            pool.submit(worker.simulate, scenario, None, parameters, profile): scenario
            for scenario in sorted(chosen, key=lambda s: s.wakes, reverse=True)
        }
        done: dict[str, report.Figures] = {}
        for count, future in enumerate(as_completed(futures), 1):
            scenario, (figures, cpu, points[scenario.name]) = futures[future], future.result()
            # Progress on stderr as each cell ends (the tables on stdout stay whole).
            elapsed = time.monotonic() - started
            print(
                f"[{count}/{len(chosen)}, {elapsed:.0f} s] {scenario.name}: {cpu:.1f} s of CPU",
                file=sys.stderr,
                flush=True,
            )
            done[scenario.name], scenarios_cpu = figures, scenarios_cpu + cpu
            while len(every) < len(chosen) and chosen[len(every)].name in done:
                figures = done[chosen[len(every)].name]
                print(report.row(figures), flush=True)
                if chosen[len(every)].registering_within_s:
                    registering.append(figures)
                every.append(figures)
    if registering:
        print(f"\n{report.REGISTRATION_HEADER}")
        for figures in registering:
            print(report.registration_row(figures), flush=True)
    if args.costs and every:
        print(f"\n{report.costs_table(every)}")
    worst = worst_cell(every)
    if worst is not None and not args.no_plots:
        PLOTS.mkdir(parents=True, exist_ok=True)
        report.plot(points[worst.name], f"the worst cell: {worst.name}", PLOTS / WORST_PLOT)
    # Wall time, the CPU of every cell and this process's (half of it: the wall time on 2 idle
    # cores), and the machine's load.
    wall_s, cpu = time.monotonic() - started, scenarios_cpu + cpu_s() - cpu_before
    print(f"\n{len(chosen)} cells in {wall_s:.0f} s, {cpu:.0f} s of CPU", file=sys.stderr)
    print("load average: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg()), file=sys.stderr, flush=True)
    missed = sum(report.over_bound(f) or f.lost > 0 or f.called_twice > 0 for f in every)
    print(summary(every), flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
