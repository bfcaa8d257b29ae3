"""Experiments: run a training command, read its JSON line, compute honest metrics and a verdict,
and file the experiment page, the lane's RESULTS.tsv row and the model page through the writer."""
