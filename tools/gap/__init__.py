"""The gap to a reference: what the compiler made of two runs, compared on evidence, as ranked hypotheses."""
