"""Multi-bootstrap over seeds and test sentences (Sellam et al., MultiBERTs, ICLR 2022).

A runs-table ``test_ppl`` treats a run's test perplexity as exact, so a Welch test over seeds
speaks about this test set only. The multi-bootstrap resamples the seeds of each arm and the
test sentences jointly, the *same* sentence indices for both arms (paired on sentences), so its
interval speaks about the language the test set was drawn from.

Statistic of one resample (seed draws ``i*`` within each arm, sentence counts ``w`` over the
S sentences, a multinomial(S, 1/S) draw shared by both arms)::

    ppl(run) = exp(sum_s w_s nll[run, s] / sum_s w_s tokens[s])     # corpus-level perplexity
    T        = mean_{i in i*_a} ppl(a_i) - mean_{i in i*_b} ppl(b_i)

On the unresampled data (``w = 1``, every seed once) T is the difference of mean test
perplexities, the comparisons table's ``diff``. Reported per comparison: the percentile CI,
the two-sided bootstrap p ``min(1, 2 (1 + min(#{T* <= 0}, #{T* >= 0})) / (R + 1))``, and the
shares of the variance of T* from seeds and from sentences, ``V_seed / (V_seed + V_sentence)``
where ``V_seed`` is the variance of a seed-only bootstrap (all sentences once) and
``V_sentence`` that of a sentence-only bootstrap (every seed once); the interaction of the two
is not attributed. Every Generator is ``default_rng(bootstrap_seed)``, fresh per row.

Per-run input: ``sentences.npz`` beside ``eval.json`` (``audit.evaluate.run``), gathered by
``python -m audit collect --sentences-out`` into one file keyed by run (``save`` / ``load``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit.errors import AuditError
from audit.files import atomic_write
from audit.stats.io import Settings
from audit.stats.multiplicity import adjust
from audit.stats.resample import chunk_sizes, percentile_ci

METRIC = "test_ppl"   # the one runs-table metric the per-sentence sums reproduce
COLUMNS = ["mb_diff", "mb_ci_low", "mb_ci_high", "mb_p", "mb_p_adj", "mb_var_seed_share",
           "mb_var_sentence_share", "mb_resamples", "mb_sentences", "mb_note"]


@dataclass(frozen=True)
class Sentences:
    """Per-run test NLL summed per sentence, keyed by (corpus, head, seed).

    ``nll[key]`` shape (S,) float64, ``tokens[key]`` shape (S,) int64 (predicted tokens per
    sentence); a failed run has S = 0.
    """

    nll: dict
    tokens: dict


def save(sentences: Sentences, path: str | os.PathLike) -> None:
    """Write every run's arrays into one npz (``nll_<i>``, ``tokens_<i>``, ``index`` of
    "corpus<TAB>head<TAB>seed"), atomically; no pickled objects."""
    keys = sorted(sentences.nll)
    arrays = {"index": np.array(["\t".join(k) for k in keys], dtype=str)}
    for i, key in enumerate(keys):
        arrays[f"nll_{i}"] = np.asarray(sentences.nll[key], np.float64)
        arrays[f"tokens_{i}"] = np.asarray(sentences.tokens[key], np.int64)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:  # a file object: np.savez would append .npz to a name
            np.savez(handle, **arrays)

    atomic_write(path, write)


def load(path: str | os.PathLike) -> Sentences:
    """Read a file written by ``save``.

    Raises:
        AuditError: missing or unreadable file, or arrays of one run of unequal length.
    """
    try:
        with np.load(path, allow_pickle=False) as blob:
            index = [tuple(str(k).split("\t")) for k in blob["index"]]
            nll = {k: blob[f"nll_{i}"] for i, k in enumerate(index)}
            tokens = {k: blob[f"tokens_{i}"] for i, k in enumerate(index)}
    except FileNotFoundError:
        raise AuditError(f"{path}: sentence file not found") from None
    except (OSError, KeyError, ValueError) as err:
        raise AuditError(f"{path}: unreadable sentence file ({err})") from None
    for key in index:
        if nll[key].shape != tokens[key].shape or nll[key].ndim != 1:
            raise AuditError(f"{path}: run {'/'.join(key)} has {nll[key].shape} sentence sums "
                             f"but {tokens[key].shape} token counts")
    return Sentences(nll, tokens)


def corpus_ppl(nll: np.ndarray, tokens: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Corpus-level perplexity of every run under every sentence weighting.

    Args:
        nll: shape (n, S), summed test NLL per run and sentence. tokens: shape (S,).
        weights: shape (R, S), how often each sentence is drawn.

    Returns:
        shape (R, n): ``exp(weights @ nll.T / weights @ tokens)``.
    """
    return np.exp((weights @ nll.T) / (weights @ tokens)[:, None])


def resample(nll_a: np.ndarray, nll_b: np.ndarray, tokens: np.ndarray, n_resamples: int,
             rng: np.random.Generator, seeds: bool = True, sentences: bool = True) -> np.ndarray:
    """Bootstrap distribution of T (module docstring), resampling seeds and/or sentences.

    Args:
        nll_a: shape (n_a, S). nll_b: shape (n_b, S), the same S sentences. tokens: shape (S,).
        seeds: resample the runs within each arm (else each run once).
        sentences: resample the sentences, shared by both arms (else each sentence once).

    Returns:
        shape (R,), T on each resample.
    """
    n_a, n_b, n_s = len(nll_a), len(nll_b), len(tokens)
    out = []
    for r in chunk_sizes(n_resamples, 2 * n_s + n_a + n_b):
        if sentences:   # multinomial counts from r x S uniform draws (one bincount, no loop)
            draws = rng.integers(0, n_s, size=(r, n_s)) + (np.arange(r) * n_s)[:, None]
            weights = np.bincount(draws.ravel(), minlength=r * n_s).reshape(r, n_s).astype(float)
        else:
            weights = np.ones((r, n_s))
        arms = []
        for nll, n in ((nll_a, n_a), (nll_b, n_b)):
            ppl = corpus_ppl(nll, tokens, weights)
            idx = rng.integers(0, n, size=(r, n)) if seeds else np.tile(np.arange(n), (r, 1))
            arms.append(np.take_along_axis(ppl, idx, axis=1).mean(axis=1))
        out.append(arms[0] - arms[1])
    return np.concatenate(out) if out else np.empty(0)


def two_sided_p(samples: np.ndarray) -> float:
    """Bootstrap p of H0: T = 0, two-sided by doubling the smaller tail, +1 corrected:
    ``min(1, 2 (1 + min(#{T* <= 0}, #{T* >= 0})) / (R + 1))``; never 0."""
    below, above = int(np.sum(samples <= 0)), int(np.sum(samples >= 0))
    return min(1.0, 2 * (1 + min(below, above)) / (len(samples) + 1))


def multibootstrap(nll_a: np.ndarray, nll_b: np.ndarray, tokens: np.ndarray,
                   settings: Settings) -> dict:
    """The ``COLUMNS`` of one comparison (a = candidate, b = reference), before Holm.

    Args:
        nll_a: shape (n_a, S) per-sentence NLL sums of arm a's runs; nll_b: shape (n_b, S).
        tokens: shape (S,) predicted tokens per sentence, the same for every run.
        settings: ``alpha`` (CI at 1 - alpha), ``bootstrap_resamples`` R, ``bootstrap_seed``.

    Returns:
        dict: ``mb_diff`` (T on the data), ``mb_ci_low/high`` (percentile), ``mb_p`` (H0: the
        expected difference of corpus perplexities is 0, two-sided), the variance shares,
        ``mb_resamples``, ``mb_sentences`` and ``mb_note`` (what was resampled).
    """
    nll_a, nll_b = np.asarray(nll_a, float), np.asarray(nll_b, float)
    tokens = np.asarray(tokens, float)
    R = settings.bootstrap_resamples
    ones = np.ones((1, len(tokens)))
    diff = float(corpus_ppl(nll_a, tokens, ones).mean() - corpus_ppl(nll_b, tokens, ones).mean())
    joint = resample(nll_a, nll_b, tokens, R, np.random.default_rng(settings.bootstrap_seed))
    low, high = percentile_ci(joint, 1 - settings.alpha)
    v_seed = _var(resample(nll_a, nll_b, tokens, R, np.random.default_rng(settings.bootstrap_seed),
                           sentences=False))
    v_sent = _var(resample(nll_a, nll_b, tokens, R, np.random.default_rng(settings.bootstrap_seed),
                           seeds=False))
    total = v_seed + v_sent
    return dict(mb_diff=diff, mb_ci_low=low, mb_ci_high=high, mb_p=two_sided_p(joint),
                mb_var_seed_share=v_seed / total if total > 0 else math.nan,
                mb_var_sentence_share=v_sent / total if total > 0 else math.nan,
                mb_resamples=R, mb_sentences=len(tokens),
                mb_note=(f"seeds within arms and {len(tokens)} test sentences resampled jointly, "
                         f"paired on sentences; percentile CI; p two-sided, doubled smaller tail, +1"
                         + ("" if total > 0 else "; variance shares undefined: no variance")))


def _var(samples: np.ndarray) -> float:
    # exactly 0 for constant resamples (np.var leaves rounding noise such as 1e-31 there)
    return 0.0 if np.ptp(samples) == 0 else float(np.var(samples))


def _missing(reason: str) -> dict:
    return dict(dict.fromkeys(COLUMNS, math.nan), mb_note=f"not computed: {reason}")


def arm_matrix(runs: pd.DataFrame, sentences: Sentences, corpus: str, head: str) -> tuple:
    """(nll of shape (n, S), tokens of shape (S,)) of the ok runs with a finite ``test_ppl`` of
    one arm (the runs the Welch test uses), or (None, reason)."""
    rows = runs[(runs["corpus"] == corpus) & (runs["head"] == head) & (runs["status"] == "ok")]
    seeds = rows.loc[np.isfinite(rows[METRIC].to_numpy(float)), "seed"]
    if not len(seeds):
        return None, f"no usable runs of {head} in corpus {corpus!r}"
    keys = [(corpus, head, str(s)) for s in seeds]
    absent = [k for k in keys if k not in sentences.nll]
    if absent:
        return None, f"no per-sentence sums of run {'/'.join(absent[0])}"
    tokens = sentences.tokens[keys[0]]
    if any(not np.array_equal(sentences.tokens[k], tokens) for k in keys):
        return None, f"runs of {head} in corpus {corpus!r} were evaluated on different test sentences"
    return np.stack([sentences.nll[k] for k in keys]), tokens


def row_columns(runs: pd.DataFrame, sentences: Sentences | None, row: dict, settings: Settings) -> dict:
    """``COLUMNS`` of one comparisons row (keys corpus, metric, head_a, head_b), NaN with the
    reason in ``mb_note`` when it cannot be computed."""
    if row["metric"] != METRIC:
        return _missing(f"defined for {METRIC} only")
    if sentences is None:
        return _missing("no per-sentence test NLL (sentences.npz) was given")
    # arm_matrix gives (nll, tokens), or (None, why)
    a, tokens_a = arm_matrix(runs, sentences, row["corpus"], row["head_a"])
    b, tokens_b = arm_matrix(runs, sentences, row["corpus"], row["head_b"])
    if a is None or b is None:
        return _missing(tokens_a if a is None else tokens_b)
    if not np.array_equal(tokens_a, tokens_b):
        return _missing(f"{row['head_a']} and {row['head_b']} were evaluated on different test sentences")
    if len(tokens_a) == 0:
        return _missing("no test sentences")
    return multibootstrap(a, b, tokens_a, settings)


def attach(table: pd.DataFrame, runs: pd.DataFrame, sentences: Sentences | None,
           settings: Settings) -> pd.DataFrame:
    """A finalized comparisons table with ``COLUMNS`` appended; ``mb_p_adj`` is Holm over the
    defined ``mb_p`` of each family (the Welch family's labels)."""
    cols = [row_columns(runs, sentences, r, settings) for r in table.to_dict("records")]
    extra = pd.DataFrame(cols, columns=COLUMNS, index=table.index)
    for _, idx in table.groupby("family", sort=False).groups.items():
        extra.loc[idx, "mb_p_adj"] = adjust(extra.loc[idx, "mb_p"].astype(float))[0]
    return pd.concat([table, extra], axis=1)
