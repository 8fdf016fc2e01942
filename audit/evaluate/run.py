"""Evaluate one trained run: test perplexity, log-P spectrum and ranks, word similarity, and the
measurements since 2021 (``audit.evaluate.debate``: unargmaxable tokens, the logit-gradient share,
the hidden size read from the double-centred log-P).

The test split is read as one continuous stream (batch size 1, hidden state carried across
BPTT chunks, eval mode), as the reference code does. Every predicted position is one context,
one row of the log-P matrix; the rows of the first ``contexts`` positions stream straight into
``audit.evaluate.spectrum`` and are never stacked; the gradient share and the column means of the
double-centred log-P are observers of that same pass, and the double-centred rows stream in a
second pass over the same contexts. Perplexity uses all test positions, normalised by the
number of predicted tokens (the reference divides by one more, a ~0.003 ppl underestimate).

No step can run without end (issue 49); each module's docstring states its bound. The test split
is streamed in ceil(N / bptt) chunks, at most three times (log-P with its observers, the
double-centred rows of the hidden gap, the mapped logits f(l)); the spectra are one eigensolve
each (``spectrum``: LAPACK's capped iterations raise, never loop); the Jacobian takes d_in or
ceil(V / 512) passes per sampled context (``jacobian``); the gradient share one QR and a
projection per block (``gradient_share``); the argmax test's tiers fixed work per token, at most
``lp_budget`` LPs, each stopped by ``argmax.LP_ROUNDS``, ``argmax.LP_SECONDS`` or a working set
that stops growing (the token then unresolved), and the witness search ``search_steps`` turns
for ``search_tokens`` tokens (``argmax``, ``argmax_search``); top-k, word similarity and the
baselines are single passes. ``audit.plan.resources.evaluate_minutes`` plans each bound.
"""

from __future__ import annotations

import argparse
import json
import time
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from audit.config import check_section
from audit.evaluate import debate, gradient_share, hidden_gap, jacobian, spectrum, topk, wordsim
from audit.data.corpus import EOS, load as load_corpus
from audit.errors import AuditError
from audit.model.language_model import LanguageModel, ModelConfig, perplexity
from audit.files import atomic_write, atomic_write_text
from audit.device import resolve_device


# eval.json's reason for a run without f_logits_* columns
F_LOGITS_NOTE = ("not measured: the head has no transformed_logits() (HeadProtocol: no logits after an "
                 "element-wise map whose spectrum to read)")
# eval.json's reason for a run without word-similarity scores (data.tokenizer: bpe)
WORDSIM_SUBWORD_NOTE = "not applicable: subword vocabulary (a word's embedding is not one row)"


def load_model(path: str | os.PathLike, device: torch.device) -> tuple[LanguageModel, list[str]]:
    blob = torch.load(path, weights_only=False, map_location=device)
    model = LanguageModel(ModelConfig.of(**blob["config"])).to(device)
    model.load_state_dict(blob["state"])
    return model.eval(), blob["vocab"]


@torch.no_grad()
def stream_rows(model: LanguageModel, ids: torch.Tensor, bptt: int, limit: int | None,
                transformed: bool = False, totals: dict | None = None,
                observers: tuple = ()) -> Iterator[torch.Tensor]:
    """Yield float32 row blocks (rows, V) of log-P (or of f(l) if ``transformed``).

    Only the first ``limit`` contexts are yielded (all if None); if ``totals`` is given the
    stream runs to the end of ``ids`` anyway and sums the test NLL and token count into it, and,
    when it holds ``sentence_of`` (shape (len(ids) - 1,), the sentence of each predicted
    position, ``sentence_index``), the NLL per sentence into ``totals["sentence_nll"]``.
    ``observers`` are ``(collector, kind)`` pairs that see every block of the whole stream,
    kind ``"log_p"`` the log-probabilities and ``"h"`` the head's input (top-k, Jacobian).
    """
    data = ids.view(-1, 1).to(next(model.parameters()).device)
    hidden = model.init_hidden(1)
    emitted = 0
    for i in range(0, data.size(0) - 1, bptt):
        if totals is None and limit is not None and emitted >= limit:
            return
        seq_len = min(bptt, data.size(0) - 1 - i)
        dropped, _, hidden = model.body(data[i:i + seq_len], hidden)
        if totals is not None or transformed is False:
            log_probs = model.head(dropped)[:, 0]
        for collector, kind in observers:
            collector.add(log_probs if kind == "log_p" else dropped[:, 0])
        if totals is not None:
            targets = data[i + 1:i + 1 + seq_len, 0]
            # summed on the device (float64), read once by the caller: no sync per chunk
            nll = F.nll_loss(log_probs, targets, reduction="none").double()
            totals["nll"] = totals["nll"] + nll.sum()
            totals["tokens"] += targets.numel()
            if "sentence_of" in totals:   # the same terms summed per sentence (audit.stats.multiboot)
                totals["sentence_nll"].index_add_(0, totals["sentence_of"][i:i + seq_len], nll)
        take = seq_len if limit is None else max(0, min(seq_len, limit - emitted))
        if take:
            rows = model.head.transformed_logits(dropped)[:, 0] if transformed else log_probs
            emitted += take
            yield rows[:take].float()


def per_word_fields(nll_sum: float, tokens: int, word_end: torch.Tensor) -> dict:
    """``test_words`` and ``test_ppl_per_word`` = exp(nll_sum / words) of a subword corpus's test split.

    The model predicted positions 1 .. ``tokens`` of the test ids (position 0 is never predicted);
    a word counts as scored when its last token is among them (``audit.data.bpe.words_scored``), so
    on the full split the count is the word corpus's own number of scored tokens, and the figure
    compares with a word-vocabulary run's ``test_ppl``. Only subword corpora record it: for a word
    corpus every token is a word and it would equal ``test_ppl``.

    Args:
        nll_sum: the summed test NLL in nats (test_loss x test_tokens).
        tokens: the number of predicted positions.
        word_end: shape (n,) bool, the test split's ``word_end`` (n >= tokens + 1).
    """
    from audit.data.bpe import words_scored

    words = words_scored(word_end, 1, 1 + tokens)
    if words == 0:
        raise AuditError("the scored test tokens end no word: no perplexity per word")
    return {"test_words": words, "test_ppl_per_word": perplexity(nll_sum / words)}


def sentence_index(ids: torch.Tensor, vocab: list[str]) -> tuple[torch.Tensor, np.ndarray]:
    """The sentence of every predicted test position and the predicted tokens per sentence.

    A sentence is one line of the test file: it ends with its ``<eos>`` (``audit.data.corpus``),
    so position j (1 .. N-1) belongs to sentence #{<eos> among ids[0 .. j-1]}. The first token
    is never predicted, so a first line that is only ``<eos>`` (WikiText-2's blank first line)
    has no predicted token: such sentences are numbered but left out by ``sentence_sums``.

    Returns:
        (shape (N-1,) int64 sentence ids, shape (S,) int64 predicted tokens per sentence).
    """
    ends = (ids == vocab.index(EOS)) if EOS in vocab else torch.zeros_like(ids, dtype=torch.bool)
    of = torch.cumsum(ends.long(), 0)[:-1]
    return of, np.bincount(of.numpy(), minlength=int(of[-1]) + 1 if len(of) else 0).astype(np.int64)


def sentence_sums(nll: torch.Tensor, tokens: np.ndarray) -> dict:
    """sentences.npz's arrays: ``nll`` (S',) float64 and ``tokens`` (S',) int64 of the sentences
    with at least one predicted token."""
    keep = tokens > 0
    return {"nll": nll.cpu().numpy()[keep], "tokens": tokens[keep]}


TOPK_COLUMNS = ["position", "context", "target", "target_rank", "in_top_k", "top"]


def topk_words(table: pd.DataFrame, ids: np.ndarray, vocab: list[str], k: int, width: int = 6) -> pd.DataFrame:
    """The top-k table with words: the last ``width`` context words, the target and the top k."""
    out = pd.DataFrame({
        "position": table["position"],
        "context": [" ".join(vocab[i] for i in ids[max(0, p - width + 1):p + 1]) for p in table["position"]],
        "target": [vocab[i] for i in table["target"]],
        "target_rank": table["target_rank"], "in_top_k": table["in_top_k"],
        "top": [" ".join(vocab[i] for i in row) for row in table[[f"top_{j + 1}" for j in range(k)]].to_numpy()],
    })
    return out[TOPK_COLUMNS]


def save_npz(path: Path, arrays: dict) -> None:
    """Write ``arrays`` to ``path`` atomically."""
    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:  # a file object: np.savez would append .npz to a name
            np.savez(handle, **arrays)

    atomic_write(path, write)


def evaluate_run(run_dir: str | os.PathLike, corpus_path: str, wordsim_dir: str,
                 out_dir: str | os.PathLike | None = None, device: str | None = None,
                 options: dict | None = None) -> dict:
    """Evaluate ``run_dir`` (model.pt, metrics.json) and write eval.json, spectrum.npz,
    sentences.npz (``sentence_sums``: the test NLL per sentence, whose sum is test_loss x
    test_tokens), wordsim_pairs.csv, topk.csv and argmax_tokens.csv (``debate.ARGMAX_COLUMNS``)
    into ``out_dir`` (default: the run folder). A failed run is
    recorded as failed without evaluating anything. ``device`` None: the run's ``train.device``,
    the setting its job's GPU request (rules/evaluate.smk) was planned from. ``options``: the
    study's ``evaluate:`` section (rules/evaluate.smk passes it; missing keys take the schema's
    defaults, None all of them)."""
    run_dir = Path(run_dir)
    out = Path(out_dir or run_dir)
    options = check_section("evaluate", options or {}, "evaluate options")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    settings = metrics["settings"]
    result = {"status": metrics["status"]}
    argmax_table = pd.DataFrame(columns=debate.ARGMAX_COLUMNS)
    pairs = pd.DataFrame(columns=["benchmark", "word1", "word2", "gold", "cosine"])
    top_table = pd.DataFrame(columns=TOPK_COLUMNS)
    arrays = {}
    sentences = {"nll": np.zeros(0), "tokens": np.zeros(0, dtype=np.int64)}   # a failed run: none
    if metrics["status"] == "ok":
        torch.set_num_threads(settings["train"]["threads"])
        dev = resolve_device(device or settings["train"]["device"])
        model, vocab = load_model(run_dir / "model.pt", dev)
        corpus = load_corpus(corpus_path)
        if corpus.vocab != vocab:
            raise AuditError(f"{corpus_path}: vocabulary differs from the one {run_dir / 'model.pt'} was trained on")
        test = corpus.test[: (settings.get("max_tokens") or {}).get("test") or None]
        contexts = options["contexts"]
        limit = None if contexts == "all" else min(int(contexts), test.numel() - 1)
        bptt = settings["train"]["bptt"]
        sentence_of, sentence_tokens = sentence_index(test, vocab)
        totals = {"nll": 0.0, "tokens": 0, "sentence_of": sentence_of.to(dev),
                  "sentence_nll": torch.zeros(len(sentence_tokens), dtype=torch.float64, device=dev)}
        positions = topk.select_positions(test.numel() - 1, [p for p in options["topk"]["positions"] if p < test.numel() - 1],
                                          options["topk"]["random"], np.random.default_rng(options["topk"]["seed"]))
        sampled = (jacobian.sample_contexts(test.numel() - 1, options["jacobian"]["contexts"],
                                            np.random.default_rng(options["jacobian"]["seed"]))
                   if options["jacobian"]["contexts"] else np.zeros(0, dtype=np.int64))
        top_rows, h_rows = topk.RowCollector(positions), topk.RowCollector(sampled)
        observers = [(top_rows, "log_p"), (h_rows, "h")]
        share = None
        if gradient_share.pre_map(model.head, model.body.d_out) is not None:
            share_limit = options["gradient_share"]["contexts"]
            share_limit = None if share_limit == "all" else int(share_limit)
            share = gradient_share.GradientShare(model.head, test[1:], share_limit, d_in=model.body.d_out)
            observers.append((share, "h"))
        else:
            result.update(gradient_share=None, gradient_share_note="not measured: the head's log-P is not reached "
                          "from one output layer's logits (per-word gates, or no output_layer()/layer_logits(); "
                          "audit/evaluate/gradient_share.py pre_map)")
        column_mean = hidden_gap.ColumnMean(limit) if options["hidden_gap"] else None
        if column_mean is not None:
            observers.append((column_mean, "log_p"))
        logp = spectrum.stream_spectrum(stream_rows(model, test, bptt, limit, totals=totals, observers=tuple(observers)))
        sentences = sentence_sums(totals["sentence_nll"], sentence_tokens)
        result.update(test_loss=float(totals["nll"]) / totals["tokens"], test_tokens=totals["tokens"],
                      contexts=logp.m, vocab_size=logp.n)
        result["test_ppl"] = perplexity(result["test_loss"])
        if corpus.subword:  # a BPE corpus: the same NLL sum per word too (audit/data/bpe.py)
            result.update(per_word_fields(float(totals["nll"]), totals["tokens"], corpus.word_end["test"][: test.numel()]))
        result.update(spectrum.rank_summary(logp, ""))
        arrays["log_p_sv"] = logp.sv
        if share is not None:
            result.update(share.summary())
        if column_mean is not None:   # second pass: the same rows, double-centred (audit.evaluate.hidden_gap)
            centred = spectrum.stream_spectrum(hidden_gap.double_centred(stream_rows(model, test, bptt, limit),
                                                                         column_mean.mean()))
            arrays["log_p_centred_sv"] = centred.sv
            layer = model.head.output_layer()
            result.update(debate.hidden_gap_fields(centred.sv, bool(getattr(model.head, "plain_softmax", False)),
                                                   layer[0].shape[1] if layer is not None else model.body.d_out,
                                                   getattr(model.body, "output_rank", None),
                                                   getattr(model.body, "name", model.cfg.body)))
        fields, argmax_table = debate.argmax_fields(
            model.head, corpus.train[: (settings.get("max_tokens") or {}).get("train") or None], vocab, options["argmax"],
            box=getattr(model.body, "output_box", None), d_in=model.body.d_out)
        result.update(fields)
        if model.head.transformed_logits(torch.zeros(1, 1, model.body.d_out, device=dev)) is not None:
            flog = spectrum.stream_spectrum(stream_rows(model, test, bptt, limit, transformed=True))
            result.update(spectrum.rank_summary(flog, "f_logits_"))
            arrays["f_logits_sv"] = flog.sv
        else:
            result["f_logits_note"] = F_LOGITS_NOTE
        top = topk.top_k(top_rows.rows(), test[positions + 1].numpy(), positions, options["topk"]["k"])
        top_table = topk_words(top, test.numpy(), vocab, options["topk"]["k"])
        if len(sampled):
            jac = jacobian.degeneracy(model.head, torch.from_numpy(h_rows.rows()).to(dev), len(sampled),
                                      np.random.default_rng(options["jacobian"]["seed"]),
                                      threshold=options["jacobian"]["threshold"])
            arrays["jacobian_mean_normalised_sv"] = jac.mean_normalised_sv
            result["jacobian_fraction_below"] = jac.fraction_below
        if corpus.subword:
            result["wordsim_note"] = WORDSIM_SUBWORD_NOTE
        else:
            vectors = model.encoder.weight.detach().cpu().numpy()
            pairs, scores = wordsim.pairs_and_scores(vectors, vocab, wordsim_dir)
            result["wordsim"] = dict(zip(scores["benchmark"], scores["spearman"]))
            result["wordsim_found"] = {b: int(f) for b, f in zip(scores["benchmark"], scores["found"])}
            result["wordsim_pairs"] = {b: int(p) for b, p in zip(scores["benchmark"], scores["pairs"])}
    out.mkdir(parents=True, exist_ok=True)
    save_npz(out / "spectrum.npz", arrays)
    save_npz(out / "sentences.npz", sentences)
    atomic_write_text(pairs.to_csv(index=False), out / "wordsim_pairs.csv")
    atomic_write_text(top_table.to_csv(index=False), out / "topk.csv")
    atomic_write_text(argmax_table.to_csv(index=False), out / "argmax_tokens.csv")
    result["job_cpu_seconds"] = time.process_time()   # the whole job's CPU (audit.bench.study)
    atomic_write_text(json.dumps(result, indent=1, sort_keys=True), out / "eval.json")
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m audit evaluate", description=__doc__)
    parser.add_argument("--run-dir", required=True, help="run folder with model.pt and metrics.json")
    parser.add_argument("--corpus", required=True, help="corpus cache written by `audit prepare`")
    parser.add_argument("--wordsim-dir", required=True, help="folder of the word-similarity benchmarks")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="default: the run's train.device")
    parser.add_argument("--options", default="{}",
                        help="the study's evaluate: section as JSON (default: the schema's defaults)")
    args = parser.parse_args(argv)
    try:
        options = json.loads(args.options)
    except json.JSONDecodeError as err:
        raise AuditError(f"--options: not valid JSON ({err.msg} at character {err.pos})") from None
    result = evaluate_run(args.run_dir, args.corpus, args.wordsim_dir, device=args.device, options=options)
    if result["status"] == "ok":
        print(f"test ppl {result['test_ppl']:.2f} | contexts {result['contexts']} | Press rank {result['press_rank']}")
    else:
        print("run failed in training: nothing evaluated")
    return 0
