"""The corpus report (`classify report`): the share of each category in a labels file, corrected for
the classifier's errors measured on gold, beside the counts, per library and overall; published shares
beside ours; one HTML page to read and cite.

    labels      the labels rows as the report counts them (library, where a label comes from)
    correction  the model's gold profile and agreement with gold
    quantify    correction methods (QuaPy) chosen and checked on shifted gold
    stats       shares, intervals, per library, the cross table
    reference   published shares: reading and comparing
    html        the page and its figures
    folder      the report folder: corpus.json, PNGs, report.html
"""

from classify.report.folder import write_corpus_report
from classify.report.labels import ReportError
from classify.report.stats import corpus_stats, share_ci

__all__ = ["ReportError", "corpus_stats", "share_ci", "write_corpus_report"]
