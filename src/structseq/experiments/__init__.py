"""Experiments: sweeps of configs x seeds into JSON-lines records (`structseq sweep`) and the reproduction plan
that says which records each table cell holds and trains the missing ones (`structseq plan`)."""
