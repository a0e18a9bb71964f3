"""`costmodel run`: the main job, with a progress bar per stage."""

from __future__ import annotations

import argparse


def add_commands(sub) -> None:
    p = sub.add_parser("run", help="the main job: evaluate every chip preset on the default workload mix")
    p.add_argument("--out", default="report", help="report folder (default ./report)")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from calibration.pipeline import calibrate_shipped

    from ..report.main_job import run_main_job

    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as bar:
        tasks = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        job = run_main_job(args.out, calibrate_stage=calibrate_shipped, progress=progress)
    console.print(job.markdown, markup=False, highlight=False)
    console.print(f"wrote {job.folder}/report.json, {job.folder}/report.md and PNG figures")
    return 0
