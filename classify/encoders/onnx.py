"""ONNX Runtime backend for the sentence encoder, exported locally from the packaged weights.

sentence-transformers' own `backend="onnx"` goes through optimum-onnx, which pins
transformers < 4.58 (this project runs transformers 5), and would fetch an export from the hub.
So we export the transformer ourselves with `torch.onnx.export` (TorchScript exporter, no
network), optionally quantize it with ONNX Runtime's int8 dynamic quantization, and
re-implement the two cheap steps around it: tokenization (the model folder's own
tokenizer.json, through `tokenizers`) and mean pooling + L2 normalisation.

Backends: "onnx" (fp32, graph fused by ONNX Runtime's transformer optimizer; same numbers as
torch to ~1e-6) and "onnx-int8" (int8 per-channel weights, dynamically quantized activations;
cosine ~0.99 to torch). Speed: `python benchmarks/bench_embed.py --compare-backends`.
Exports live in <cache dir>/onnx/<model key>/ and are made once, atomically.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import numpy as np

from classify.core.errors import ClassifyError
from classify.core.paths import cache_dir

BACKENDS = ("onnx", "onnx-int8")
log = logging.getLogger(__name__)


class OnnxBackendError(ClassifyError, RuntimeError):
    pass


def _require_ort():
    try:
        import onnxruntime  # noqa: F401
    except ModuleNotFoundError:
        raise OnnxBackendError(
            "the ONNX backend needs onnxruntime and onnx: pip install 'classify[onnx]' (or onnx onnxruntime)"
        ) from None


def _st_config(folder: Path) -> tuple[int, str, bool]:
    """(max_seq_length, pooling mode, normalize) from a sentence-transformers folder."""
    max_len = 256
    cfg = folder / "sentence_bert_config.json"
    if cfg.exists():
        max_len = int(json.loads(cfg.read_text()).get("max_seq_length") or max_len)
    pooling, normalize = "mean", False
    modules = folder / "modules.json"
    if modules.exists():
        for m in json.loads(modules.read_text()):
            t = m.get("type", "")
            if t.endswith("Pooling"):
                pc = json.loads((folder / m["path"] / "config.json").read_text())
                if not pc.get("pooling_mode_mean_tokens", True):
                    if pc.get("pooling_mode_cls_token"):
                        pooling = "cls"
                    else:
                        raise OnnxBackendError(f"{folder}: only mean or CLS pooling is supported")
            elif t.endswith("Normalize"):
                normalize = True
    return max_len, pooling, normalize


def export_dir(model_key: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_key)
    return cache_dir() / "onnx" / safe


def export_onnx(folder: Path, out: Path, opset: int = 17) -> Path:
    """Export the transformer of a sentence-transformers folder to out/model.onnx (once)."""
    target = out / "model.onnx"
    if target.exists():
        return target
    _require_ort()
    import torch
    from transformers import AutoModel

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from classify.encoders.encoder import quiet_loading

    with quiet_loading():
        model = AutoModel.from_pretrained(str(folder))
    model.eval()
    # Eager attention traces into plain ops every ONNX Runtime build supports.
    if hasattr(model, "set_attn_implementation"):
        try:
            model.set_attn_implementation("eager")
        except Exception:  # older transformers: attribute only
            model.config._attn_implementation = "eager"

    class Wrapper(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    ids = torch.ones(2, 16, dtype=torch.long)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f"model.onnx.tmp{os.getpid()}"
    with torch.inference_mode():
        torch.onnx.export(
            Wrapper(model),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(tmp),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                n: {0: "batch", 1: "seq"}
                for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")
            },
            opset_version=opset,
            dynamo=False,
        )
    _optimize(tmp, model.config)
    os.replace(tmp, target)
    return target


def _optimize(path: Path, config) -> None:
    """Fuse attention, LayerNorm and GELU with ONNX Runtime's transformer optimizer, in place.

    The raw TorchScript export runs slower than PyTorch on CPU; the fused graph is ~1.7x faster.
    Numbers stay the same to ~1e-7. Skipped (with the plain graph kept) when fusion fails.
    """
    try:
        from onnxruntime.transformers import optimizer

        opt = optimizer.optimize_model(
            str(path),
            model_type="bert",
            num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
            hidden_size=int(getattr(config, "hidden_size", 0) or 0),
            opt_level=1,
        )
        opt.save_model_to_file(str(path))
    except Exception as e:  # an architecture the optimizer does not know: keep the plain export
        log.warning("ONNX graph fusion skipped for %s: %s", path, e)


def quantize_int8(fp32: Path) -> Path:
    """Int8 dynamic quantization (per output channel) of the exported model's weights (once)."""
    target = fp32.with_name("model_qint8.onnx")
    if target.exists():
        return target
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = fp32.with_name(f"model_qint8.onnx.tmp{os.getpid()}")
    # Per-channel scales keep sentence vectors within ~0.99 cosine of fp32 (per-tensor: ~0.93).
    # Fused ops carry no inferred type; DefaultTensorType tells the quantizer they are float.
    quantize_dynamic(
        str(fp32),
        str(tmp),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    os.replace(tmp, target)
    return target


class OnnxSentenceEncoder:
    """The subset of SentenceTransformer.encode the project uses, on ONNX Runtime."""

    def __init__(self, folder: str | Path, model_key: str, backend: str = "onnx", threads: int | None = None):
        if backend not in BACKENDS:
            raise OnnxBackendError(f"unknown ONNX backend {backend!r}; known: {', '.join(BACKENDS)}")
        _require_ort()
        import onnxruntime as ort
        from tokenizers import Tokenizer

        folder = Path(folder)
        tok_file = folder / "tokenizer.json"
        if not tok_file.exists():
            raise OnnxBackendError(f"{folder}: no tokenizer.json; the ONNX backend needs a fast tokenizer file")
        self.max_seq_length, self.pooling, self.normalize = _st_config(folder)
        self.tokenizer = Tokenizer.from_file(str(tok_file))
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        pad_id = self.tokenizer.token_to_id("[PAD]")
        self.tokenizer.enable_padding(
            pad_id=pad_id if pad_id is not None else 0, pad_token="[PAD]" if pad_id is not None else "<pad>"
        )
        path = export_onnx(folder, export_dir(model_key))
        if backend == "onnx-int8":
            path = quantize_int8(path)
        self.path = path
        so = ort.SessionOptions()
        if threads:
            so.intra_op_num_threads = threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        enc = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        h = self.session.run(None, feeds)[0]
        if self.pooling == "cls":
            v = h[:, 0]
        else:
            m = mask[..., None].astype(h.dtype)
            v = (h * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return v

    def encode(
        self,
        texts: list[str],
        batch_size: int = 32,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = False,
    ) -> np.ndarray:
        # Sort by length so padding inside a batch is small, as sentence-transformers does.
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.zeros((len(texts), 0), dtype=np.float32)
        chunks = []
        for s in range(0, len(texts), batch_size):
            chunks.append(self._encode_batch([texts[i] for i in order[s : s + batch_size]]))
        if chunks:
            v = np.concatenate(chunks).astype(np.float32)
            if self.normalize or normalize_embeddings:
                v /= np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
            out = np.empty_like(v)
            out[order] = v
        return out
