"""Where a run's settings come from, for every front: the config file (`config_file`, with
its `[serve]` table, `serve_table`), the model (`model_choice`), the runner (`runners`) and
the rest (`resolution`), each resolved from the flags, a resumed run's record, the config
file, the environment and the defaults. What each option is lives in
`logos.options.declarations`."""

__all__ = ["config_file", "model_choice", "resolution", "runners", "serve_table"]
