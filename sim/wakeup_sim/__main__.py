"""`python -m wakeup_sim` (`make simulate`): every scenario, its figures as Markdown, its plots as PNG."""

import argparse
import os
import resource
import sys
import time
from concurrent.futures import as_completed

from wakeup_sim import report, worker
from wakeup_sim.deployment import ROOT
from wakeup_sim.scenarios import SCENARIOS

PLOTS = ROOT / "docs" / "scaling"


def cpu_s() -> float:
    """CPU time of this process (its workers' is each scenario's own, as `worker.simulate` returns it)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wakeup_sim", description=__doc__)
    parser.add_argument("--only", help="run the scenarios whose name contains this")
    parser.add_argument("--no-plots", action="store_true", help="draw no PNG")
    parser.add_argument("--workers", type=int, default=2, help="processes (scenarios run in parallel)")
    parser.add_argument("--costs", action="store_true", help="print each scenario's cost per wake, line by line")
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.only or args.only in s.name]
    plots = None if args.no_plots else PLOTS
    if plots is not None:
        plots.mkdir(parents=True, exist_ok=True)
    started, cpu_before = time.monotonic(), cpu_s()
    print(report.HEADER, flush=True)
    registering: list[report.Figures] = []
    every: list[report.Figures] = []
    scenarios_cpu = 0.0
    with worker.pool(args.workers, plots is not None) as pool:
        # The largest first, so that the workers finish together; the rows print in order.
        futures = {
            pool.submit(worker.simulate, scenario, plots): scenario
            for scenario in sorted(chosen, key=lambda s: s.wakes, reverse=True)
        }
        done: dict[str, report.Figures] = {}
        for count, future in enumerate(as_completed(futures), 1):
            scenario, (figures, cpu) = futures[future], future.result()
            # Progress on stderr as each scenario ends (the tables on stdout stay whole).
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
    # Wall time (what the four minutes are), the CPU of every scenario and this process's, and
    # the machine's load.
    wall_s, cpu = time.monotonic() - started, scenarios_cpu + cpu_s() - cpu_before
    print(f"\n{len(chosen)} scenarios in {wall_s:.0f} s, {cpu:.0f} s of CPU", file=sys.stderr)
    print("load average: {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
