"""The demo's run: the chosen preset prepares its model here, then the demo topology runs through the
launcher's local backend (the code path ``atropos-launch run`` uses) under the live line, and the
preset writes the report."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from demo.placement import kept_on, launcher_cores, this_process_cores
from demo.preset import RunResult
from demo.presets import preset_of
from demo.report import write_report
from demo.topology import demo_topology
from demo.watch import Watch


def run(args: argparse.Namespace) -> int:
    """Clear the report folder, prepare the model, run the topology, write the report; the exit code."""
    from atroposlib.launch.local import LocalRun
    from atroposlib.launch.plan import build_plan
    from example_trainer.metrics import read_metrics

    preset = preset_of(args)
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "logs").mkdir(parents=True)
    t_start = time.perf_counter()
    print(f"[demo] report folder: {out}", flush=True)
    print(f"[demo] {preset.intro}", flush=True)
    prep = preset.prepare(out, args)
    print(
        f"[demo] model ready in {prep['warm_s']:.1f}s: greedy accuracy {prep['warm_acc']:.2f}",
        flush=True,
    )
    plan = build_plan(demo_topology(args, prep["warm"], out), out, "local", gpus_here=0)
    runner = LocalRun(plan, topology_path="atropos-demo", say=lambda line: None)
    watch = Watch(args.steps)
    with kept_on(launcher_cores(args.schedule, this_process_cores())):
        code = runner.run(on_tick=watch.tick)
    if watch.tty:
        print(flush=True)
    if code != 0:
        failed = next((p.comp for p in runner.procs if p.state == "failed"), None)
        tail = _tail(out / failed.log) if failed is not None else ""
        raise SystemExit(f"[demo] {runner.message or 'stopped'}:\n{tail}")
    loop_s = time.perf_counter() - (watch.t_loop or t_start)
    result = RunResult(
        out=out,
        args=args,
        prep=prep,
        rows=read_metrics(plan.metrics_source, final=True),
        early=watch.early,
        late=watch.late,
        loop_s=loop_s,
        total_s=time.perf_counter() - t_start,
        preset=preset,
    )
    return write_report(result)


def _tail(path: Path, n: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""
