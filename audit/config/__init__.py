"""Study configurations: a study validated against ``configs/schema.yaml``, its arms, and the
settings of each of its runs.

- ``study.py``: ``load_study``/``check_study`` (one-line errors naming file and key, then the
  schema's defaults filled in), the statistics sections (``check_section``,
  ``check_stats_config``, ``read_claims_file``, ``stats_sections``), ``python -m audit validate``;
- ``arms.py``: head entries, grids expanded into arms, and what the schema cannot say of them;
- ``settings.py``: ``run_settings``, exactly what one (corpus, head, seed) run depends on, and
  ``train_settings`` of it, the train rule's params.

``schema_defaults`` (``audit.schema``) hands a section's defaults to code that needs them at import
(``ModelConfig``, the stats ``Settings``), without torch. The names below are the room's interface:
other rooms import them from ``audit.config``.
"""

from audit.config.arms import expand_grids, needs_model_check
from audit.config.settings import is_bpe, run_settings, settings_json, settings_text, train_settings
from audit.config.study import (check_section, check_stats_config, check_study, load_study, main, read_claims_file,
                                stats_sections, write_yaml)

__all__ = ["check_section", "check_stats_config", "check_study", "expand_grids", "is_bpe", "load_study", "main",
           "needs_model_check", "read_claims_file", "run_settings", "settings_json", "settings_text",
           "stats_sections", "train_settings", "write_yaml"]
