"""Engines: one per-shard task, run by local processes, a job array, or Ray, with the same bytes out."""

from tokpack.engines.driver import prepare_sharded, start_job
from tokpack.engines.executors import EXECUTORS, rank_from_environment, run_array_task, run_local, run_ray, task_of
from tokpack.engines.kinds import KINDS
from tokpack.engines.shard_task import ShardJob, build_shard, finish_dataset, finish_if_complete, run_shard, shards_done

__all__ = ["EXECUTORS", "KINDS", "ShardJob", "build_shard", "finish_dataset", "finish_if_complete", "prepare_sharded", "rank_from_environment", "run_array_task", "run_local", "run_ray",
           "run_shard", "shards_done", "start_job", "task_of"]
