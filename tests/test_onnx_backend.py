"""ONNX Runtime backend: exported locally, same vectors as PyTorch (fp32) or close (int8)."""

from __future__ import annotations

import numpy as np
import pytest

from classify.encoders.encoder import Encoder


@pytest.mark.slow
def test_onnx_backends_match_torch(gold):
    texts = [r.text(True) for r in gold.records[:12]] + ["short", ""]
    ref = Encoder(None, backend="torch", use_cache=False, show_progress=False).encode(texts)
    fp32_enc = Encoder(None, backend="onnx", use_cache=False, show_progress=False)
    fp32 = fp32_enc.encode(texts)
    assert fp32.shape == ref.shape
    assert np.abs(fp32 - ref).max() < 1e-4
    int8 = Encoder(None, backend="onnx-int8", use_cache=False, show_progress=False).encode(texts)
    cos = (int8 * ref).sum(1)
    assert cos.min() > 0.95 and cos.mean() > 0.98
    assert not np.allclose(int8, ref, atol=1e-4)  # it really is the quantized model

    # Exported once: a second encoder reuses the file.
    path = fp32_enc.model().path
    mtime = path.stat().st_mtime_ns
    Encoder(None, backend="onnx", use_cache=False, show_progress=False).encode(texts[:2])
    assert path.stat().st_mtime_ns == mtime


def test_onnx_backend_has_its_own_cache_key():
    keys = {b: Encoder(None, backend=b).model_key for b in ("torch", "onnx", "onnx-int8")}
    assert len(set(keys.values())) == 3
    assert keys["onnx-int8"].endswith("|onnx-int8")


def test_unknown_onnx_backend_is_refused():
    from classify.encoders.encoder import resolve_encoder
    from classify.encoders.onnx import OnnxBackendError, OnnxSentenceEncoder

    path, key = resolve_encoder(None)
    with pytest.raises(OnnxBackendError, match="unknown ONNX backend"):
        OnnxSentenceEncoder(path, key, "onnx-fp8")
