"""Engines: one per-shard task, run by local processes, a job array, or Ray, with the same bytes out."""

from tokpack.engines.driver import prepare_sharded, start_job
from tokpack.engines.executors import EXECUTORS, rank_from_environment, run_array_task, run_local, run_ray
from tokpack.engines.shard_task import ShardJob, finish_if_complete, run_shard

__all__ = ["EXECUTORS", "ShardJob", "finish_if_complete", "prepare_sharded", "rank_from_environment", "run_array_task", "run_local", "run_ray",
           "run_shard", "start_job"]
