"""Early warning (design §7): statistics over a signal's own history, the rules built on them and the engine.

Owns: `detectors` (robust baselines, CUSUM, trend breaks, falls from a rested level), `base` (the alert, the rule
protocol and its plumbing), `collapse` (the representation-collapse rules), `rules` (the other §7 rules and
`build_rules`), `engine` (`RuleEngine`, `evaluate_rows`), `windows` (how far back an alert's evidence reaches:
where a rewind from it starts). The thresholds are `jepa_core.config.rules.RulesConfig`;
judging a finished run directory is `jepa_core.workbench.doctor`.
May import: `jepa_core.common`, `config`, `metrics` (row values and NaN tokens). The run loop fires them live.
"""
