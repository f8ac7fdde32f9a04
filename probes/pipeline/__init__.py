"""``lara run``: the whole audit from one YAML config, with content-hash stage skipping."""

from .config import RunConfig, load_run_config
from .run import RunResult, run_pipeline
from .stage_table import STAGES

__all__ = ["STAGES", "RunConfig", "RunResult", "load_run_config", "run_pipeline"]
