"""bench_cycle: median schedule() time on synthetic snapshots (pending tasks x nodes).

Run: ``python -m benchmarks.bench_cycle`` (``--quick`` for the small sizes only).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from meta.model.kinds import JobKind, Topology
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.policy.config import SchedulerConfig
from meta.policy.scheduler import schedule
from meta.policy.snapshot import NodeShare, PendingTask, Reservation, Snapshot, TenantState

GPU_TYPES = (("h100", 8, 96), ("a100", 8, 64), ("l40s", 4, 48), ("t4", 4, 32))  # type, GPUs, cpus
NODES_PER_LEAF = 16
LEAVES_PER_SPINE = 8
SIZES = ((1_000, 100), (10_000, 1_000), (50_000, 4_000))


def build_nodes(count: int) -> tuple[tuple[NodeState, ...], dict[str, str]]:
    """build_nodes makes ``count`` nodes of four GPU types on a two-level switch tree."""
    nodes = []
    parents: dict[str, str] = {}
    for i in range(count):
        gpu_type, gpus, cpus = GPU_TYPES[i * len(GPU_TYPES) // count]
        leaf = f"leaf{i // NODES_PER_LEAF}"
        parents[leaf] = f"spine{i // (NODES_PER_LEAF * LEAVES_PER_SPINE)}"
        cap = ResourceVector(cpus=cpus, memory_mib=cpus * 8 * 1024, gpus=gpus, gpu_type=gpu_type, storage_gib=2000)
        nodes.append(NodeState(f"{gpu_type}n{i}", cap, ("gpu",), leaf, healthy=i % 97 != 5, drained=i % 89 == 7))
    return tuple(nodes), parents


def _worker(rng: random.Random, gpu_type: str, gpus: int) -> ResourceVector:
    return ResourceVector(cpus=gpus * 8, memory_mib=gpus * 48 * 1024, gpus=gpus, gpu_type=gpu_type)


def build_reservations(rng: random.Random, nodes: tuple[NodeState, ...], now: float) -> tuple[Reservation, ...]:
    """build_reservations fills about 85% of GPUs with running work, some without an expected end."""
    out = []
    for k, node in enumerate(nodes):
        free = node.capacity.gpus
        while free and rng.random() < 0.85:
            gpus = min(free, rng.choice((1, 2, 4, 8)))
            free -= gpus
            start = now - rng.uniform(60, 20_000)
            out.append(Reservation(
                attempt_id=f"a{k}-{free}", task_id=f"rt{k}-{free}", job_id=f"rj{k}-{free}",
                tenant=f"tenant-{rng.randrange(20)}", priority_class=rng.choice(("training", "inference", "evaluation")),
                shares=(NodeShare(node.name, _worker(rng, node.capacity.gpu_type or "", gpus)),),
                start_time=start, expected_end=None if rng.random() < 0.1 else now + rng.uniform(60, 40_000),
                last_checkpoint_time=start + rng.uniform(0, now - start), restore_cost_s=rng.uniform(0, 600),
                preemptible=rng.random() < 0.5, min_runtime_s=rng.choice((0, 600)),
            ))
    return tuple(out)


def build_pending(rng: random.Random, count: int, now: float) -> tuple[PendingTask, ...]:
    """build_pending makes a mix of single tasks, gangs, inference and evaluation."""
    out = []
    for k in range(count):
        gpu_type = rng.choice(GPU_TYPES)[0]
        roll = rng.random()
        if roll < 0.2:
            kind, workers, gpus = JobKind.TRAINING, rng.choice((2, 4, 8, 16)), 4 if gpu_type in ("l40s", "t4") else 8
        elif roll < 0.6:
            kind, workers, gpus = JobKind.TRAINING, 1, rng.choice((1, 2, 4))
        elif roll < 0.85:
            kind, workers, gpus = JobKind.INFERENCE, 1, rng.choice((1, 2))
        else:
            kind, workers, gpus = JobKind.EVALUATION, 1, 1
        deadline = now + rng.uniform(3600, 40_000) if kind is JobKind.INFERENCE and rng.random() < 0.2 else None
        out.append(PendingTask(
            task_id=f"p{k}", job_id=f"j{k}", tenant=f"tenant-{rng.randrange(20)}", kind=kind,
            priority_class=kind.value, submit_time=now - rng.uniform(0, 30_000), per_worker=_worker(rng, gpu_type, gpus),
            workers=workers, runtime_estimate_s=rng.choice((600, 3600, 4 * 3600, 24 * 3600)), deadline=deadline,
            topology=rng.choice((Topology.NONE, Topology.PREFER_SAME_SWITCH, Topology.REQUIRE_SAME_SWITCH))
            if workers > 1 else Topology.NONE,
            preemptible=kind is not JobKind.INFERENCE,
        ))
    return tuple(out)


def build_snapshot(pending: int, nodes: int, seed: int = 7) -> Snapshot:
    """build_snapshot assembles one synthetic cycle input."""
    rng = random.Random(seed)
    now = 1_000_000.0
    node_states, parents = build_nodes(nodes)
    tenants = tuple(
        TenantState(f"tenant-{k}", weight=1.0 + k % 3, guaranteed={"*": 8 * (k % 4)}, limit={"*": 64 * nodes // 100},
                    decayed_usage=rng.uniform(0, 1e7))
        for k in range(20)
    )
    return Snapshot(now=now, nodes=node_states, reservations=build_reservations(rng, node_states, now),
                    tenants=tenants, pending=build_pending(rng, pending, now), switch_parent=parents)


def measure(snapshot: Snapshot, repeats: int) -> tuple[float, float, int, int]:
    """measure returns the cold (first) and warm median seconds of schedule(), placements, preemptions.

    Cold includes indexing the node tuple and reading every reservation; warm cycles reuse the
    memoised inventory and update the reservation ledger by difference, as the simulator and the
    daemon do when the node tuple is unchanged between cycles.
    """
    times = []
    plan = None
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        plan = schedule(snapshot, SchedulerConfig())
        times.append(time.perf_counter() - t0)
    assert plan is not None
    return times[0], statistics.median(times[1:]), len(plan.placements), len(plan.preemptions)


def main() -> None:
    """main prints a table of median cycle times."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="only the smallest size")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'pending':>8} {'nodes':>6} {'reserv':>7} {'cold s':>8} {'warm median s':>14} {'placed':>7} {'preempt':>8}")
    for pending, nodes in SIZES[:1] if args.quick else SIZES:
        snapshot = build_snapshot(pending, nodes)
        cold, warm, placed, preempted = measure(snapshot, args.repeats)
        print(f"{pending:>8} {nodes:>6} {len(snapshot.reservations):>7} {cold:>8.3f} {warm:>14.3f} "
              f"{placed:>7} {preempted:>8}")


if __name__ == "__main__":
    main()
