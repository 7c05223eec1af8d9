"""bench/bench_graceful_shrink.py's count of wasted task-seconds, on a stages document shaped as Spark's
REST API answers ``stages?details=true`` (the figure docs/mechanism.md quotes for graceful against FP)."""

from __future__ import annotations


def task(index: int, attempt: int, status: str, launch: str, ms: float | None) -> dict:
    return {"taskId": index * 10 + attempt, "index": index, "attempt": attempt, "status": status,
            "launchTime": launch, **({"duration": ms} if ms is not None else {})}


def test_killed_attempts_and_lost_map_output_count_as_waste_and_running_ones_do_not(monkeypatch):
    import bench.bench_graceful_shrink as B

    stages = [
        {"stageId": 1, "attemptId": 0, "numCompleteTasks": 3, "numFailedTasks": 0, "numKilledTasks": 1,
         "tasks": {"1": task(0, 0, "SUCCESS", "2026-11-27T20:00:00.000GMT", 60_000),
                   "2": task(1, 0, "SUCCESS", "2026-11-27T20:00:00.000GMT", 60_000),  # its output lost: runs again
                   "3": task(2, 0, "KILLED", "2026-11-27T20:00:00.000GMT", 30_000),  # FP at 30 s
                   "4": task(2, 1, "SUCCESS", "2026-11-27T20:00:31.000GMT", 60_000)}},
        {"stageId": 1, "attemptId": 1, "numCompleteTasks": 1, "numFailedTasks": 0, "numKilledTasks": 0,
         "tasks": {"5": task(1, 0, "SUCCESS", "2026-11-27T20:01:40.000GMT", 60_000)}},  # the resubmitted map
        {"stageId": 2, "attemptId": 0, "numCompleteTasks": 0, "numFailedTasks": 1, "numKilledTasks": 0,
         "tasks": {"6": task(0, 0, "FAILED", "2026-11-27T20:01:31.000GMT", 2_000),  # FetchFailed
                   "7": task(0, 1, "RUNNING", "2026-11-27T20:02:41.000GMT", None)}},  # not ended: not counted
    ]
    monkeypatch.setattr(B, "get_json", lambda url: stages if url.endswith("stages?details=true") else None)
    got = B.attempts("http://driver", "app-1")
    assert got == {"failed": 2, "run": 6, "task_s": 272.0, "wasted_s": 92.0}  # 60 (lost map) + 30 (killed) + 2
