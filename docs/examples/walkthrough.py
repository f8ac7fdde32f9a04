# %% [markdown]
# # An audit from Python, on the shipped testbed
# The RL checkpoint was trained (GRPO) on the `member` questions; the SFT checkpoint is the same
# model before RL. Run this file top to bottom (`python docs/examples/walkthrough.py`) or open it
# as a notebook (percent format). A test runs it in CI.

# %%
import json
from pathlib import Path

import probes

TESTBED = Path(probes.__file__).parent / "testbed" / "checkpoints" / "cpu-seed0"
rows = [json.loads(line) for line in (TESTBED / "questions.jsonl").read_text().splitlines()]
questions = [r for r in rows if r["split"] == "member"][:20] + [r for r in rows if r["split"] == "non_member"][:20]
questions += [r for r in rows if r["split"] == "clean_ref"][:20]  # the clean set (split clean_ref)

# %% Models: a path, or a model you already hold (Hugging Face + tokenizer, TransformerBridge, nnsight)
rl = probes.load_model(TESTBED / "rl")
sft = probes.load_model(TESTBED / "sft")
acts = probes.pool(rl, [q["question"] for q in questions[:4]], layers=[0, -1])  # torch [4, 2, d_model]
print(acts.shape)

# %% LaRA: perturbation sets, per-layer metrics, S_LaRA against the clean questions
sets = probes.perturb(questions, similars=3, paraphrases=2)
metrics = probes.lara_metrics(rl, sets)
lara = probes.lara_score(metrics, clean=[q["id"] for q in questions if q["split"] == "clean_ref"])
print(metrics, lara.describe(), sep="\n")

# %% Output-level detectors on both checkpoints, with each question's 3 controls
store = Path("runs/walkthrough/responses.sqlite")
store.parent.mkdir(parents=True, exist_ok=True)
prompt = {"prompt_format": "raw", "template": "Q: {prompt}\nA:"}  # the testbed's prompt (configs/demo.yaml)
audited = probes.detect(rl, questions, "ppl,min_k,zlib", sets=sets, store=store, **prompt)
before = probes.detect(sft, questions, "ppl,min_k,zlib", sets=sets, store=store, **prompt)
print(audited.scores.head())

# %% Fusion, labelled evaluation, the label-free verdict and which questions it flags
fused = probes.fuse(audited, ["ppl", "zlib"])
print(probes.evaluate(audited)[["auc", "auc_low", "auc_high", "tpr_at_5fpr"]])
verdict = probes.verdict(audited, reference=before, permutations=2000, bootstrap=200)
print(verdict.summary())
print(verdict.questions.sort_values("q_value").head())

# %% Plots take ax= and return the Figure
figure = probes.plot_roc(audited)
figure.savefig("runs/walkthrough/roc.png")
