"""The run machinery: what a run directory is and who may write it (status vocabulary, writer lock, signals).

This layer sits above the method (model, masks, EMA, step) and below the metric stream, early warning and the
workbench. It may import the method and the standard library; nothing here imports the stream, rules or notebooks.
"""
