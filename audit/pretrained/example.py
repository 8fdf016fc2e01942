"""A constructed suite in the Hugging Face layout: the pretrained source run without a hub.

``python -m audit pretrained example --text TRAIN.txt --out models`` trains a byte-level BPE
(``tokenizers``) and small GPT-NeoX models (``transformers``) on the text, several seeds each,
saving checkpoints as a suite does (``<out>/example/<model>-seed<seed>/step<N>/``: config.json,
model.safetensors, tokenizer.json), for configs/pretrained-example.yaml and tests/pretrained/.
Two models, each constructed so that one claim must come out one way:

- ``tiny-16`` (d = 16): trained; its final checkpoint has one planted unargmaxable token,
  ``PLANTED``, whose output row is the mean of two others (w_c = (w_a + w_b) / 2 makes
  l_c <= max(l_a, l_b) everywhere, so no input makes c the strict argmax): the argmax test
  must find it in every seed, over any box;
- ``tiny-sat`` (d = 16): the same training up to ``SAT_FROM``, then checkpoints whose head keeps
  its top ``SAT_RANKS`` singular values and shrinks the others: the loss must rise late and the
  head's spectrum narrow, the saturation of Godey et al. 2024 built in.

Deterministic: every seed fixes torch's generator, batches are drawn by a seeded numpy
Generator, and the BPE trainer draws no random numbers. Bounded: ``STEPS`` Adam steps a seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from audit.data.text import lines

CHECKPOINTS = (10, 20, 40, 60, 80)     # steps saved (revisions step<N>)
STEPS = max(CHECKPOINTS)
SAT_FROM = 40                            # tiny-sat: trained checkpoints up to here, rank-cut after
# tiny-sat: at each later checkpoint the head keeps its top r singular values and shrinks the rest
SAT_RANKS = {60: (4, 0.3), 80: (2, 0.2)}     # step: (r, factor of the others)
PLANTED = (300, 40, 41)                  # tiny-16's final head: row 300 = mean of rows 40 and 41
VOCAB, D, LAYERS, CONTEXT = 512, 16, 2, 128
TRAIN_LINES = 4000


def train_tokenizer(text: str | Path, vocab: int = VOCAB):
    """A byte-level BPE of ``vocab`` tokens on the first ``TRAIN_LINES`` lines, as the fast
    tokenizer transformers saves (``<|endoftext|>`` id 0 begins every text, as Pythia's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [line.strip() + "\n" for _, line in zip(range(TRAIN_LINES), (t for _, t in lines(text))) if line.strip()]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                        show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    ids = tokenizer(corpus, add_special_tokens=False)["input_ids"]
    return tokenizer, torch.tensor([t for piece in ids for t in piece], dtype=torch.int64)


def new_model(seed: int, d: int = D, layers: int = LAYERS, rows: int = VOCAB):
    """A GPT-NeoX causal LM with ``rows`` output rows (Pythia pads its 50,277 tokens to 50,304)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    config = GPTNeoXConfig(vocab_size=rows, hidden_size=d, num_hidden_layers=layers, num_attention_heads=2,
                           intermediate_size=4 * d, max_position_embeddings=CONTEXT, rotary_pct=0.25,
                           tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    return GPTNeoXForCausalLM(config)


def train(model, ids: torch.Tensor, seed: int, save, steps=CHECKPOINTS, batch: int = 8, length: int = 64) -> None:
    """Adam on random windows of ``ids``, ``save(step, model)`` at each step of ``steps``."""
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for step in range(1, max(steps) + 1):
        starts = rng.integers(0, ids.numel() - length - 1, size=batch)
        x = torch.stack([ids[s:s + length] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in steps:
            model.eval()
            save(step, model)
            model.train()


def cut_rank(model, rank: int, factor: float) -> None:
    """Shrink the head's singular values past the top ``rank`` by ``factor``: W <- U diag(s') V^T.
    Full rank still (an exactly rank-deficient W is no trained head)."""
    with torch.no_grad():
        W = model.get_output_embeddings().weight
        u, s, vt = torch.linalg.svd(W.double(), full_matrices=False)
        s[rank:] *= factor
        W.copy_(((u * s) @ vt).float())


def plant(model, token: int = PLANTED[0], a: int = PLANTED[1], b: int = PLANTED[2]) -> None:
    """Make ``token`` unargmaxable: its row becomes the mean of rows ``a`` and ``b``, exactly.
    Rows ``a`` and ``b`` are first rounded to multiples of 2^-10, so their mean is a float32
    number: a mean rounded to float32 leaves a sliver (width ~1e-8) where ``token`` wins by more
    than the test's margin, and the braid tier finds it."""
    with torch.no_grad():
        W = model.get_output_embeddings().weight
        for row in (a, b):
            W[row] = torch.round(W[row] * 1024) / 1024
        W[token] = (W[a] + W[b]) / 2


def save_checkpoint(model, tokenizer, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


def build(text: str | Path, out: str | Path, seeds=range(5)) -> Path:
    """Build the example suite under ``<out>/example/`` (module docstring); returns that folder."""
    import copy

    from audit.pretrained.load import _quiet

    _quiet()
    torch.set_num_threads(1)   # tiny models: a second thread only waits (measured: backward 0.24 s a step on two)
    root = Path(out) / "example"
    tokenizer, ids = train_tokenizer(text)
    for seed in seeds:
        def save(step, model, seed=seed):
            save_checkpoint(model, tokenizer, root / f"tiny-16-seed{seed}" / f"step{step}")
            if step == max(CHECKPOINTS):
                planted = copy.deepcopy(model)
                plant(planted)
                save_checkpoint(planted, tokenizer, root / f"tiny-16-seed{seed}" / f"step{step}")
            late = copy.deepcopy(model)
            if step in SAT_RANKS:   # tiny-sat's later checkpoints: the SAT_FROM weights, rank-cut
                late.load_state_dict(torch.load(root / f".sat{seed}.pt", weights_only=True))
                cut_rank(late, *SAT_RANKS[step])
            elif step == SAT_FROM:
                torch.save(model.state_dict(), root / f".sat{seed}.pt")
            save_checkpoint(late, tokenizer, root / f"tiny-sat-seed{seed}" / f"step{step}")

        root.mkdir(parents=True, exist_ok=True)
        train(new_model(seed), ids, seed, save)
        (root / f".sat{seed}.pt").unlink()
    return root


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit pretrained example", description=__doc__)
    parser.add_argument("--text", required=True, help="training text (e.g. PTB's train.txt)")
    parser.add_argument("--out", default="models", help="the suite's root (pretrained.root)")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    root = build(args.text, args.out, range(args.seeds))
    print(f"example suite -> {root}/ (tiny-16, tiny-sat x {args.seeds} seeds x {len(CHECKPOINTS)} checkpoints)")
    return 0
