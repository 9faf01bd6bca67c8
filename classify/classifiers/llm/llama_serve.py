"""Entry point for the local server: `python -m classify.classifiers.llm.llama_serve <llama_cpp.server args>`.

It runs llama-cpp-python's OpenAI-compatible server unchanged, except that by default the model
is loaded without llama.cpp's "extra" CPU buffer types (AMX / repacked weights): on CPUs that
report AMX inside some sandboxes those kernels crash the process on the first batched prompt
(segfault in llama_decode). Set CLASSIFY_LLAMA_EXTRA_BUFTS=1 to keep them.
"""

from __future__ import annotations

import os


def _disable_extra_bufts() -> None:
    import llama_cpp.llama_cpp as lc

    orig = lc.llama_model_default_params

    def params():
        p = orig()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p

    lc.llama_model_default_params = params


def main() -> None:
    if os.environ.get("CLASSIFY_LLAMA_EXTRA_BUFTS") != "1":
        _disable_extra_bufts()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
