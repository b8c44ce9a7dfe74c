"""The workbench behind the notebooks: what `notebooks/train.py` and `notebooks/monitor.py` drive, in plain modules.

Owns:
- `runs`: discovering run directories and reading one (config, status, summary), as the notebooks show them;
- `charts`: the Altair charts of the early-warning signals, drawn from `chart_data` (what they plot: selections,
  smoothing, downsampling, alert frames); `report`: the read-only HTML report;
- `doctor`: a run's health verdict and alerts (`jepa doctor`), the rules replayed over its stream;
- `session`: `TrainingSession`, the train notebook's state machine (start an in-process trainer on a thread, Step N,
  Stop, launch a detached `jepa train`, resume, rewind, list running runs and reattach, follow, live cadence
  changes, progress and phase, the current action's message, a consistent batch for the mask overlay), composed of
  a `SessionState` (`session_state`: every field a session keeps, its lock and views) that it hands to
  `InProcessRuns` (`in_process`: runs this process trains) and `DetachedRuns` (`following`: runs another process
  trains);
- `plan`: the config form's values turned into a validated `Plan` (preset, overrides, Config);
- `detached`: starting `python -m jepa_core.train` in its own session, its log under `<runs_dir>/.logs/`;
- `live`: `LiveRun`, one run kept up to date by reading only the bytes appended to its metrics.jsonl (decoded and
  framed by the same reader as `jepa_core.metrics.reader.read_metrics`);
- `markup`: the one escaper for text put into `mo.md` (markdown and HTML), and the report header in markdown;
- `panel`: the progress panel's HTML and the mask overlay picture.

May import: every layer below it (common, config, method, data, metrics, alerts, run). Only the entry points
(`jepa_core.cli`) import it. Notebooks only wire widgets to it.
"""
