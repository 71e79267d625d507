"""Chess games packed as sharded jobs: the job kind, packing, the pipeline, its config, statistics, the parity fixture."""
