"""CPU spent while the bench writes: its own process's, and the whole machine's (Postgres runs
here, on connections that close with their writers, so it is counted as the rest of the machine)."""

import os
import time
from dataclasses import dataclass


def machine_busy_s() -> float:
    """CPU seconds every core of this machine has spent busy since boot (user, nice, system, irq,
    softirq: /proc/stat's first line)."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, stat.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuReading:
    bench_s: float
    machine_s: float

    @classmethod
    def now(cls) -> "CpuReading":
        return cls(bench_s=time.process_time(), machine_s=machine_busy_s())


def cpu_figures(
    *, before: CpuReading, after: CpuReading, checkpoints: int, rate: float, raw_per_s: float
) -> dict[str, float | None]:
    """CPU a checkpoint costs (the bench's Python, the rest of the machine: Postgres), the rate
    that CPU allows on this machine's cores and `rate` beside it, and the CPU a checkpoint could
    cost at 3x raw."""
    cores = os.cpu_count() or 1
    bench = (after.bench_s - before.bench_s) / checkpoints
    total = max(after.machine_s - before.machine_s, after.bench_s - before.bench_s) / checkpoints
    return {
        "cores": cores,
        "cpu_us_per_checkpoint": round(total * 1e6),
        "cpu_us_per_checkpoint_bench": round(bench * 1e6),
        "cpu_us_per_checkpoint_rest": round((total - bench) * 1e6),
        "cpu_limit_checkpoints_per_s": round(cores / total) if total else None,
        "checkpoints_per_s_vs_cpu_limit": round(rate * total / cores, 2),
        # What the 3x-raw target leaves a checkpoint, all processes together.
        "cpu_us_per_checkpoint_at_3x_raw": round(cores / (3 * raw_per_s) * 1e6),
    }
