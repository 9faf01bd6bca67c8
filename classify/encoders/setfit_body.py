"""SetFit's embedding phase, run by the `setfit` package on the training records, cached per training set.

SetFit (Tunstall et al., 2022) fine-tunes a whole sentence encoder on pairs of training texts (same
label: cosine 1, different: 0) and puts a classifier on the tuned embeddings. We run its embedding
phase once per labeled dimension, in turn, on one encoder (`setfit.Trainer.train_embeddings`), and
leave the classifier to the spec (`classify.classifiers.features.SetFitFeatures`).

Cost on 2 CPU cores (measured, MiniLM, 128 tokens, 16 pairs per step): ~2.3 s per step; one
iteration makes 2 pairs per labeled text and dimension, so a 5-fold cross-validation of the shipped
gold is ~100 steps (~4 min) per fold. all-mpnet-base-v2 is ~5x that. So the tuned encoder is stored
in `cache_dir()/setfit/<key>/`, the key naming everything that decides its weights (encoder
weights, settings, seed, the training texts and labels in order): re-running an evaluation, or a
run whose gold profile uses the same folds, trains nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from classify.core.errors import ClassifyError
from classify.core.hashing import text_hash
from classify.core.paths import cache_dir
from classify.encoders.encoder import load_sentence_transformer, quiet_loading, resolve_encoder

log = logging.getLogger(__name__)

# Bumped when training changes in a way the settings do not show (then old folders are not reused).
FORMAT = 2
_DONE = "classify-setfit.json"  # written last: a folder without it is an interrupted save


class SetFitConfig(BaseModel):
    """Embedding-phase settings; spec `setfit` takes each as `--opt sf_<name>=...`."""

    model_config = ConfigDict(extra="forbid")

    iterations: Annotated[
        int, Field(ge=1, le=100, description="SetFit num_iterations: pairs per text = 2 x this, per dimension")
    ] = 1
    epochs: Annotated[int, Field(ge=1, le=20, description="passes over the pairs")] = 1
    batch_size: Annotated[int, Field(ge=2, le=512, description="pairs per step")] = 16
    lr: Annotated[float, Field(gt=0, lt=1, description="encoder learning rate (SetFit's body_learning_rate)")] = 2e-5
    max_seq_length: Annotated[int, Field(ge=8, le=512, description="tokens per text (longer texts are cut)")] = 128
    seed: int = 0  # the run's --seed; not an option of its own


@dataclass
class BodyLog:
    """What producing the tuned encoder cost: `cached` when it was read back instead of trained."""

    key: str
    cached: bool
    seconds: float
    steps: int
    pairs: dict[str, int]


class SetFitMissing(ClassifyError):
    pass


def _require_setfit() -> None:
    # Found, not imported: importing setfit takes seconds and turns transformers' info logging on,
    # which a cache hit (no training) should not pay for.
    try:
        found = importlib.util.find_spec("setfit") is not None
    except (ImportError, ValueError):  # a module entry of None (import blocked) or without a spec
        found = False
    if not found:
        raise SetFitMissing(
            "spec setfit needs the setfit package, which is not installed: pip install 'classify[setfit]'"
        )


def body_key(model_key: str, cfg: SetFitConfig, texts: list[str], labels: dict[str, list[str | None]]) -> str:
    """Everything that decides the tuned weights. The order of texts matters: SetFit draws pairs by position."""
    h = hashlib.sha256()
    h.update(json.dumps({"format": FORMAT, "model": model_key, "cfg": cfg.model_dump()}, sort_keys=True).encode())
    for d in sorted(labels):
        h.update(f"\x00dim:{d}".encode())
        for t, y in zip(texts, labels[d]):
            if y is not None:
                h.update(f"\x00{text_hash(t)}\x01{y}".encode())
    return h.hexdigest()[:24]


def body_folder(key: str) -> Path:
    return cache_dir() / "setfit" / key


def _weights_digest(folder: Path) -> dict[str, str]:
    """sha256 of each weights file: a truncated or altered file in the cache is trained again, not loaded."""
    out = {}
    for f in sorted(folder.rglob("*.safetensors")):
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        out[str(f.relative_to(folder))] = h.hexdigest()
    return out


def train_body(
    encoder: str | None, texts: list[str], labels: dict[str, list[str | None]], cfg: SetFitConfig
) -> tuple[Path, BodyLog]:
    """The folder of an encoder tuned with SetFit's embedding phase on (texts, labels); trained or cached."""
    _require_setfit()
    load_from, model_key = resolve_encoder(encoder)
    key = body_key(model_key, cfg, texts, labels)
    folder = body_folder(key)
    done = folder / _DONE
    if done.exists():
        try:
            meta = json.loads(done.read_text())
            if meta["weights_sha256"] != _weights_digest(folder):
                raise ValueError("weights differ from those saved")
            log.info("setfit: tuned encoder %s read from the cache (trained in %.0f s)", key, meta["seconds"])
            return folder, BodyLog(key, True, float(meta["seconds"]), int(meta["steps"]), dict(meta["pairs"]))
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("setfit: cached encoder %s is unreadable; training it again", key)
    if folder.exists():  # interrupted save or unreadable record: start over
        shutil.rmtree(folder, ignore_errors=True)

    t0 = time.perf_counter()
    body, steps, pairs = _train(load_from, texts, labels, cfg)
    seconds = time.perf_counter() - t0
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Saved under a temporary name and renamed: a killed save leaves no folder that looks complete.
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    try:
        with quiet_loading():
            body.save(str(tmp))
        meta = {
            "seconds": round(seconds, 1),
            "steps": steps,
            "pairs": pairs,
            "model": model_key,
            **cfg.model_dump(),
            "weights_sha256": _weights_digest(tmp),
        }
        (tmp / _DONE).write_text(json.dumps(meta, indent=1))
        try:
            os.replace(tmp, folder)
        except OSError:  # another process saved the same key first: theirs is as good
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder, BodyLog(key, False, seconds, steps, pairs)


def _step_logger(dim: str):
    from transformers import TrainerCallback

    class StepLog(TrainerCallback):
        """A line every tenth of the steps: training is minutes of silence otherwise."""

        def on_train_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()
            self.every = max(1, state.max_steps // 10)

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % self.every == 0 or state.global_step == state.max_steps:
                log.info(
                    "setfit: tuning the encoder on %s: step %d/%d (%.0f s)",
                    dim,
                    state.global_step,
                    state.max_steps,
                    time.perf_counter() - self.t0,
                )

    return StepLog()


def _train(load_from: str, texts: list[str], labels: dict[str, list[str | None]], cfg: SetFitConfig):
    from sklearn.linear_model import LogisticRegression
    from transformers.trainer_callback import ProgressCallback
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    from setfit import SetFitModel, Trainer, TrainingArguments
    from setfit import logging as setfit_logging

    # Importing setfit turns transformers' info logging on for everyone, and its own "Running training" banner.
    hf_logging.set_verbosity(verbosity)
    setfit_logging.set_verbosity_warning()

    body = load_sentence_transformer(load_from)
    body.max_seq_length = cfg.max_seq_length
    model = SetFitModel(model_body=body, model_head=LogisticRegression())  # the head is ours, not SetFit's
    steps, pairs = 0, {}
    with tempfile.TemporaryDirectory(prefix="classify-setfit-") as out:
        for d in sorted(labels):
            known = [(i, y) for i, y in enumerate(labels[d]) if y is not None]
            names = sorted({y for _, y in known})
            if len(names) < 2:  # no negative pairs to learn from
                continue
            x = [texts[i] for i, _ in known]
            y = [names.index(v) for _, v in known]
            args = TrainingArguments(
                output_dir=out,
                batch_size=cfg.batch_size,
                num_epochs=cfg.epochs,
                num_iterations=cfg.iterations,
                body_learning_rate=cfg.lr,
                seed=cfg.seed,
                report_to="none",
                save_strategy="no",
                logging_strategy="no",
                show_progress_bar=False,
            )
            trainer = Trainer(model=model, args=args)
            # The spec reports progress in its own lines; transformers' bar and loss dicts go.
            trainer.st_trainer.remove_callback(ProgressCallback)
            trainer.st_trainer.add_callback(_step_logger(d))
            t = time.perf_counter()
            with quiet_loading(), warnings.catch_warnings():
                # torch's DataLoader warns that pin_memory has no accelerator to pin for, on every CPU run.
                warnings.filterwarnings("ignore", message=".*pin_memory.*")
                trainer.train_embeddings(x, y, args=args)
            n_pairs = 2 * cfg.iterations * len(x)
            pairs[d] = n_pairs
            n_steps = cfg.epochs * -(-n_pairs // cfg.batch_size)
            steps += n_steps
            log.info("setfit: %s: %d pairs, %d steps in %.0f s", d, n_pairs, n_steps, time.perf_counter() - t)
    return body, steps, pairs
