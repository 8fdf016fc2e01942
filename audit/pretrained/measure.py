"""Measure one checkpoint with the evaluation's own code: the maths is the trained runs'.

Per checkpoint (eval.json keys are the runs table's, docs/runs-table.md):

- test perplexity over sliding windows (``stream``: ``ppl_window``, ``ppl_stride`` recorded),
  the NLL per sentence for the multi-bootstrap;
- the log-P spectrum of the first ``pretrained.contexts`` positions and its ranks
  (``audit.evaluate.spectrum``, streamed: with contexts <= V the row Gram, never V x V);
- the hidden-size gap of the double-centred rows (``audit.evaluate.hidden_gap``), a control:
  under the final LayerNorm the expected rank is d - 1, as for the project's Transformer;
- the gradient share of p - e_y kept by col([W, 1]) (``audit.evaluate.gradient_share``) and its
  random-direction floor sqrt((d + 1) / V), ``gradient_floor``;
- unargmaxable tokens in the body's box (the final LayerNorm's) and the authors' [-100, 100]^d
  (``audit.evaluate.debate.argmax_fields``: the tiers, bounded LPs) where asked;
- the head's own singular values (``head_sv``) with its entropy rank and top share, and the
  anisotropy of the head's inputs (``stream.Anisotropy``): the saturation measures' per-checkpoint
  parts (Godey et al. 2024);
- the add-0.5 unigram perplexity of the text fitted on the text itself (``unigram_ppl_text``), the
  count baseline the guard compares the models with (``table.baselines``);
- word similarity of the output embedding's rows for the words that are one token with a
  leading space (``word_index``: a BPE vocabulary has no row for the others).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch

from audit.evaluate import debate, gradient_share, hidden_gap, spectrum, wordsim
from audit.evaluate.baselines import unigram_ppl
from audit.pretrained.load import OutputHead, final_norm, norm_box
from audit.pretrained.stream import Anisotropy, Text, stream

SPACE = "\u0120"   # byte-level BPE's leading-space mark (GPT-2, GPT-NeoX, the tokenizers library)


def word_index(tokenizer, rows: int) -> dict[str, int]:
    """{word: row} of the tokens that are a whole lower-case word after a space ("Ġcat" -> "cat"):
    the rows a benchmark word has in a byte-level BPE vocabulary."""
    index = {}
    for token, row in tokenizer.get_vocab().items():
        word = token[1:]
        if token.startswith(SPACE) and word.isalpha() and word.islower() and row < rows:
            index[word] = row
    return index


def row_names(tokenizer, rows: int) -> list[str]:
    """A name per output row: the token, or ``<row N>`` for the padded rows no token uses
    (Pythia has 50,304 rows for 50,277 tokens)."""
    names = [f"<row {i}>" for i in range(rows)]
    for token, row in tokenizer.get_vocab().items():
        if row < rows:
            names[row] = token
    return names


def head_fields(W: np.ndarray) -> tuple[dict, np.ndarray]:
    """The head's singular values (from its d x d float64 Gram) and their summaries:
    ``head_entropy_rank`` (Roy & Vetterli), ``head_entropy_share`` (over d: 1 is a flat
    spectrum) and ``head_top_share`` (s_1^2 over the sum of squares)."""
    sv = spectrum.stream_spectrum([W]).sv
    energy = float((sv ** 2).sum())
    return ({"head_entropy_rank": spectrum.entropy_rank(sv), "head_entropy_share": spectrum.entropy_rank(sv) / sv.size,
             "head_top_share": float(sv[0] ** 2 / energy) if energy > 0 else float("nan")}, sv)


def _wordsim(W: np.ndarray, tokenizer, wordsim_dir: str | None) -> tuple[dict, pd.DataFrame]:
    """eval.json's wordsim fields and the found pairs (none without benchmarks)."""
    if not wordsim_dir:
        return {"wordsim_note": "not measured: no word-similarity benchmarks given"}, \
            pd.DataFrame(columns=["benchmark", "word1", "word2", "gold", "cosine"])
    pairs, scores = wordsim.pairs_and_scores(W, word_index(tokenizer, W.shape[0]), wordsim_dir)
    return {"wordsim": dict(zip(scores["benchmark"], scores["spearman"])),
            "wordsim_found": {b: int(f) for b, f in zip(scores["benchmark"], scores["found"])},
            "wordsim_pairs": {b: int(p) for b, p in zip(scores["benchmark"], scores["pairs"])}}, pairs


def measure(model, tokenizer, text: Text, section: dict, options: dict, *, name: str, argmax: bool,
            wordsim_dir: str | None = None, progress=None) -> tuple[dict, dict, dict]:
    """(eval.json fields, spectrum.npz arrays, tables) of one loaded checkpoint (module docstring).

    Args:
        section: the study's ``pretrained:`` (window, stride, contexts).
        options: the study's ``evaluate:`` (argmax settings, gradient_share.contexts, hidden_gap).
        name: the runs table's head (the model's name), for messages.
        argmax: run the unargmaxable-token test on this checkpoint.
    """
    dev = next(model.parameters()).device
    head = OutputHead(model.get_output_embeddings(), name)
    d, V = head.d_in, head.layer.out_features
    limit = min(section["contexts"], text.ids.numel() - 1)
    share_limit = options["gradient_share"]["contexts"]
    share = gradient_share.GradientShare(head, text.ids[1:], None if share_limit == "all" else int(share_limit), d_in=d)
    column_mean, aniso = hidden_gap.ColumnMean(limit), Anisotropy(limit)
    totals = {"nll": 0.0, "tokens": 0,
              "sentence_nll": torch.zeros(len(text.sentence_tokens), dtype=torch.float64, device=dev)}
    window, stride = section["window"], section["stride"]
    logp = spectrum.stream_spectrum(stream(model, text, window, stride, limit, totals=totals, progress=progress,
                                           observers=((share, "h"), (column_mean, "log_p"), (aniso, "h"))))
    loss = float(totals["nll"]) / totals["tokens"]
    result = {"status": "ok", "test_loss": loss, "test_ppl": float(np.exp(loss)), "test_tokens": totals["tokens"],
              "ppl_window": window, "ppl_stride": stride, "contexts": logp.m, "vocab_size": V, "emb_size": d,
              "n_params": int(sum(p.numel() for p in model.parameters())), "anisotropy": aniso.value(),
              **spectrum.rank_summary(logp, ""), **share.summary(),
              "gradient_floor": float(np.sqrt((d + 1) / V)),
              # the guard's bar (audit.stats.guard): the add-0.5 unigram fitted on the scored text itself,
              # in-sample and so lower than any held-out unigram (the suite's training data is not here)
              "unigram_ppl_text": unigram_ppl(text.ids[1:].numpy(), text.ids[1:].numpy(), V)}
    W = head.layer.weight.detach().double().cpu().numpy()
    fields, head_sv = head_fields(W)
    result.update(fields)
    arrays = {"log_p_sv": logp.sv, "head_sv": head_sv}
    if options["hidden_gap"]:   # the same rows again, double-centred (audit.evaluate.run's second pass)
        centred = spectrum.stream_spectrum(hidden_gap.double_centred(stream(model, text, window, stride, limit),
                                                                     column_mean.mean()))
        arrays["log_p_centred_sv"] = centred.sv
        result.update(debate.hidden_gap_fields(centred.sv, True, d, d - 1, model.config.model_type))
    tables = {"argmax_tokens": pd.DataFrame(columns=debate.ARGMAX_COLUMNS)}
    if argmax:
        start = time.process_time()
        found, table = debate.argmax_fields(head, text.ids, row_names(tokenizer, V), options["argmax"],
                                            box=norm_box(final_norm(model)), d_in=d)
        result.update(found, argmax_job_seconds=time.process_time() - start)
        tables["argmax_tokens"] = table.rename(columns={"train_count": "text_count"})
    else:
        result["argmax_note"] = "not measured at this checkpoint (pretrained.argmax)"
    found, tables["wordsim_pairs"] = _wordsim(W, tokenizer, wordsim_dir)
    result.update(found)
    sentences = {"nll": totals["sentence_nll"].cpu().numpy(), "tokens": text.sentence_tokens}
    keep = sentences["tokens"] > 0
    tables["sentences"] = {k: v[keep] for k, v in sentences.items()}
    return result, arrays, tables
