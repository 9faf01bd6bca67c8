"""An encoder name that nothing here can load is one clear error (a ClassifyError the CLI prints as a
line), for the frozen encoder, fine-tuning and SetFit alike: not a hub traceback."""

from __future__ import annotations

import pytest

from classify.core.errors import ClassifyError
from classify.encoders.encoder import Encoder, EncoderUnavailable

BOGUS = "no-such-org/no-such-encoder-xyz"


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # The hub is never reached in tests: offline mode makes the lookup fail at once. huggingface_hub
    # reads the variable when imported, so its constant is set too.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)


def test_frozen_encoder_names_the_encoder_and_what_was_tried():
    with pytest.raises(
        EncoderUnavailable, match=r"encoder 'no-such-org/no-such-encoder-xyz' cannot be loaded: .*packaged"
    ):
        Encoder(BOGUS, show_progress=False, use_cache=False).encode(["a text"])


def test_setfit_gives_the_same_error(gold, taxonomy):
    pytest.importorskip("setfit")
    from classify.classifiers.base import ModelOptions, make_classifier

    clf = make_classifier("setfit", taxonomy, ModelOptions(encoder=BOGUS, show_progress=False))
    with pytest.raises(ClassifyError, match="cannot be loaded"):
        clf.fit(gold.records[:12], {d: gold.labels[d][:12] for d in taxonomy.dimension_ids})
