"""Which of gold's side information helps the root-cause classifier? (issue #12, item 6)

A plain TF-IDF + logistic regression (the `tfidf-logreg` recipe: word 1-2 grams, sublinear tf,
C=10) on the gold reports that show a cause, 5-fold CV x 3 seeds, Cohen's kappa against gold:

  base       the report text only
  notes      + the adjudication note appended to the training reports (never to test reports)
  second     + each coder's own root cause where it differs from gold, as an extra example at weight 0.5
  symptom    + the GOLD symptom as a token in train and test (an upper bound for "symptom as a feature")
  balanced   class_weight="balanced" (rare causes weighed up)

The same folds serve every variant: choices made from these figures are tuned on them.

    python benchmarks/rootcause_signals.py
"""

import json
import warnings
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import StratifiedKFold

warnings.filterwarnings("ignore", message="The least populated class")
rows = [json.loads(line) for line in open(Path(__file__).resolve().parents[1] / "gold" / "reports.jsonl")]
R = [r for r in rows if r["root_cause"]]


def text(r):
    return "\n".join([r["title"], r["body"], r["discussion"] or ""])


y = np.array([r["root_cause"] for r in R])
sym = np.array([r["symptom"] for r in R])


def run(variant, seeds=(0, 1, 2)):
    ks = []
    for seed in seeds:
        pred = np.empty(len(R), dtype=object)
        # stratify on root cause where possible
        skf = StratifiedKFold(5, shuffle=True, random_state=seed)
        yy = [v if (y == v).sum() >= 5 else "rare" for v in y]
        for tr, te in skf.split(R, yy):
            Xtr = [text(R[i]) for i in tr]
            ytr = list(y[tr])
            w = [1.0] * len(tr)
            if variant == "notes":
                Xtr = [
                    t + ("\n" + R[i]["adjudication_note"] if R[i]["adjudication_note"] else "") for t, i in zip(Xtr, tr)
                ]
            if variant == "second":
                for i in tr:
                    for c in ("coder_a", "coder_b"):
                        v = R[i][c].get("root_cause")
                        if v and v != y[i]:
                            Xtr.append(text(R[i]))
                            ytr.append(v)
                            w.append(0.5)
            Xte = [text(R[i]) for i in te]
            if variant == "symptom":
                Xtr = [f"SYMPTOM_{sym[i]} SYMPTOM_{sym[i]} " + t for t, i in zip(Xtr, tr)]
                Xte = [f"SYMPTOM_{sym[i]} SYMPTOM_{sym[i]} " + t for t, i in zip(Xte, te)]  # gold symptom: upper bound
            vec = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2)
            A = vec.fit_transform(Xtr)
            clf = LogisticRegression(
                C=10, max_iter=3000, class_weight="balanced" if variant == "balanced" else None
            ).fit(A, ytr, sample_weight=w)
            pred[te] = clf.predict(vec.transform(Xte))
        ks.append(cohen_kappa_score(y, pred.astype(str)))
    return np.mean(ks), np.std(ks)


if __name__ == "__main__":
    for v in ["base", "notes", "second", "symptom", "balanced"]:
        m, s = run(v)
        print(f"{v:10s} kappa {m:.3f} ± {s:.3f}")
