"""Disagreement review: a queue of items worth a human look, decisions, and their feedback.

queue.py      build the queue from eval runs, `classify run` outputs, cleanlab and coders' notes
schema.py     the queue, decision and taxonomy-proposal models (pydantic) and their files
decisions.py  read, append and validate decisions against a queue and a taxonomy
proposals.py  apply taxonomy proposals (edit, cue, add, merge, split) to a codebook
apply.py      decisions + proposals -> new gold version and new taxonomy version
session.py    the interactive terminal session (one item at a time, resumable)
sheet.py      CSV export / import for groups that review in spreadsheets
cli.py        the `classify review` sub-commands
"""
