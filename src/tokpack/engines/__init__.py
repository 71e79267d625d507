"""Engines: one sharded-job lifecycle, its rank task run by local processes, a job array, or Ray, with the same bytes out."""

from tokpack.engines.driver import prepare_sharded, start_job
from tokpack.engines.executors import EXECUTORS, rank_from_environment, run_array_task, run_local, run_ray, task_of
from tokpack.engines.kinds import KINDS
from tokpack.engines.lifecycle import build_shard, finish_dataset, finish_job, run_shard, shards_done
from tokpack.engines.text_job import ShardJob

__all__ = ["EXECUTORS", "KINDS", "ShardJob", "build_shard", "finish_dataset", "finish_job", "prepare_sharded",
           "rank_from_environment", "run_array_task", "run_local", "run_ray", "run_shard", "shards_done", "start_job",
           "task_of"]
