"""Multi-bootstrap over seeds and test sentences (Sellam et al., MultiBERTs, ICLR 2022).

A runs-table ``test_ppl`` treats a run's test perplexity as exact, so a Welch test over seeds
speaks about this test set only. The multi-bootstrap adds the test sentences as a second source
of randomness, resampled with the *same* sentence indices for both arms (paired on sentences),
so its interval speaks about the language the test set was drawn from.

Statistic (``corpus_ppl``; seeds i of each arm, sentence counts ``w`` over the S sentences)::

    ppl(run) = exp(sum_s w_s nll[run, s] / sum_s w_s tokens[s])     # corpus-level perplexity
    T        = mean_i ppl(a_i) - mean_i ppl(b_i)

On the data (``w = 1``) T is the difference of mean test perplexities, the comparisons table's
``diff``. Test and interval (``seed_sentence_t``; H0: the expected difference of corpus
perplexities is 0, two-sided): ``t = T / se`` with ``se^2 = s_a^2/n_a + s_b^2/n_b + V_sentence``
(Welch's unbiased seed variance of the runs' test perplexities, plus the variance of T over R
sentence-only resamples, every seed once, a multinomial(S, 1/S) draw shared by both arms),
referred to t with Welch-Satterthwaite df over the three parts (n_a - 1, n_b - 1, S - 1), and
the interval ``T +- t_df se``, which excludes 0 exactly when p < alpha. Until issue 33 the seeds
were resampled too and p was the percentile bootstrap's (doubled smaller tail): with the seed
bootstrap's (n - 1)/n variance and complete separation (2 runs against 2 separate with
probability 1/3, every resample then on one side) it rejected a true H0 at 0.23 (2 seeds per
arm), 0.18 (3), 0.10 (5 and 10) at alpha = 0.05 when seeds dominate; this one stays within
alpha + 2 MC SE at 2-10 seeds in both regimes of ``python -m audit bench multiboot``
(docs/statistics.md). Variance shares: ``v_seed / (v_seed + v_sentence)`` and its complement,
the two parts of ``se^2``. A row below ``min_seeds`` per arm (the Welch row's "too few seeds" or
"runs failed") or not run has no p, no interval and no place in a Holm family; Holm is the
caller's, one family per label over both tests (``audit.stats.comparisons.holm_both``).

Dependence: evaluation scores the test file as one stream (batch 1, the hidden state carried
from line to line, ``audit.evaluate.run``), so a line's NLL depends on the lines before it; the
sentence resample treats lines as independent. Lines far apart are nearly independent (an
LSTM's memory fades within tens of tokens), so the sentence variance is taken as it is, not
from contiguous blocks; a positive correlation between neighbouring lines would make it, and
so the interval, somewhat too small when sentences dominate.

Per-run input: ``sentences.npz`` beside ``eval.json`` (``audit.evaluate.run``), gathered by
``python -m audit collect --sentences-out`` into one file keyed by run (``save`` / ``load``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from audit.errors import AuditError
from audit.files import atomic_write
from audit.stats.gates import gated
from audit.stats.io import Settings
from audit.stats.resample import chunk_sizes

METRIC = "test_ppl"   # the one runs-table metric the per-sentence sums reproduce
COLUMNS = ["mb_diff", "mb_ci_low", "mb_ci_high", "mb_ci_level", "mb_p", "mb_p_adj", "mb_var_seed_share",
           "mb_var_sentence_share", "mb_resamples", "mb_sentences", "mb_note", "mb_se", "mb_df"]


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


def seed_sentence_t(ppl_a: np.ndarray, ppl_b: np.ndarray, sentence_samples: np.ndarray,
                    n_sentences: int, level: float) -> dict:
    """Two-sided t test and interval of T from its seed and sentence variance components.

    H0: E[T] = 0 (no difference of expected corpus perplexity), H1: E[T] != 0, two-sided.

    Args:
        ppl_a: shape (n_a,) corpus perplexity of each run of arm a on the whole test set;
            ppl_b: shape (n_b,). sentence_samples: shape (R,), T on sentence-only resamples
            (every seed once). n_sentences: S. level: confidence level of the interval.

    Returns:
        dict ``diff, se, df, p, ci_low, ci_high, v_seed, v_sentence``: ``v_seed`` = s_a^2/n_a +
        s_b^2/n_b (Welch's unbiased variance of the difference of means: the seed bootstrap's
        is smaller by (n - 1)/n, and at 2-3 seeds that alone made its p far too small),
        ``v_sentence`` the variance of ``sentence_samples``, se = sqrt(v_seed + v_sentence), df
        by Welch-Satterthwaite over the three components (n_a - 1, n_b - 1, S - 1 degrees of
        freedom): Welch's df when sentences add nothing, near S - 1 when they dominate.
        ``p = 2 P(t_df > |diff| / se)``, the interval ``diff +- t_df(1 - (1 - level)/2) se``,
        so it excludes 0 exactly when p < 1 - level. p, df and interval are NaN when
        undefined: an arm with fewer than 2 runs, or se = 0.
    """
    n_a, n_b = len(ppl_a), len(ppl_b)
    diff = float(np.mean(ppl_a) - np.mean(ppl_b))
    v_sent = _var(sentence_samples)
    out = dict(diff=diff, se=math.nan, df=math.nan, p=math.nan, ci_low=math.nan, ci_high=math.nan,
               v_seed=math.nan, v_sentence=v_sent)
    if n_a < 2 or n_b < 2:
        return out
    parts = np.array([_var(ppl_a, 1) / n_a, _var(ppl_b, 1) / n_b, v_sent])
    dfs = np.array([n_a - 1, n_b - 1, max(n_sentences - 1, 1)], float)
    total = float(parts.sum())
    out["v_seed"] = float(parts[0] + parts[1])
    if total <= 0:
        return out
    se, df = math.sqrt(total), total ** 2 / float(np.sum(parts ** 2 / dfs))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return dict(out, se=se, df=df, p=float(2 * stats.t.sf(abs(diff) / se, df)),
                ci_low=diff - half, ci_high=diff + half)


def multibootstrap(nll_a: np.ndarray, nll_b: np.ndarray, tokens: np.ndarray,
                   settings: Settings) -> dict:
    """The ``COLUMNS`` of one comparison (a = candidate, b = reference), before Holm.

    Args:
        nll_a: shape (n_a, S) per-sentence NLL sums of arm a's runs; nll_b: shape (n_b, S).
        tokens: shape (S,) predicted tokens per sentence, the same for every run.
        settings: ``alpha`` (CI at 1 - alpha), ``bootstrap_resamples`` R, ``bootstrap_seed``.

    Returns:
        dict: ``mb_diff`` (T on the data), ``mb_ci_low/high`` and ``mb_p`` (``seed_sentence_t``;
        H0: the expected difference of corpus perplexities is 0, two-sided), ``mb_se``,
        ``mb_df``, the variance shares, ``mb_resamples``, ``mb_sentences`` and ``mb_note``
        (what was resampled, or why p is undefined).
    """
    nll_a, nll_b = np.asarray(nll_a, float), np.asarray(nll_b, float)
    tokens = np.asarray(tokens, float)
    R, S = settings.bootstrap_resamples, len(tokens)
    ones = np.ones((1, S))
    sent = resample(nll_a, nll_b, tokens, R, np.random.default_rng(settings.bootstrap_seed), seeds=False)
    t = seed_sentence_t(corpus_ppl(nll_a, tokens, ones)[0], corpus_ppl(nll_b, tokens, ones)[0], sent, S,
                        1 - settings.alpha)
    total = t["v_seed"] + t["v_sentence"]
    share = np.isfinite(total) and total > 0
    note = (f"t test: diff / sqrt(seed variance s_a^2/n_a + s_b^2/n_b + sentence variance from {R} "
            f"sentence resamples of {S} test sentences, paired), Welch-Satterthwaite df; two-sided; "
            f"lines scored as one stream, resampled as independent")
    if not np.isfinite(t["p"]):
        note += ("; undefined: an arm has fewer than 2 runs" if not np.isfinite(t["v_seed"]) else
                 "; undefined: no variance (every run and every sentence resample gives the same T)")
    # the interval at 1 - alpha until Holm sets its step's level (audit.stats.families)
    return dict(mb_diff=t["diff"], mb_ci_low=t["ci_low"], mb_ci_high=t["ci_high"], mb_ci_level=1 - settings.alpha,
                mb_p=t["p"],
                mb_p_adj=math.nan, mb_se=t["se"], mb_df=t["df"],
                mb_var_seed_share=t["v_seed"] / total if share else math.nan,
                mb_var_sentence_share=t["v_sentence"] / total if share else math.nan,
                mb_resamples=R, mb_sentences=S, mb_note=note)


def _var(samples: np.ndarray, ddof: int = 0) -> float:
    # exactly 0 for constant values (np.var leaves rounding noise such as 1e-31 there)
    return 0.0 if np.ptp(samples) == 0 else float(np.var(samples, ddof=ddof))


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
    if gated(row, settings):   # the Welch row's gate: no p, no CI, no place in a Holm family
        return _missing(row["reason"])
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
    """A finalized comparisons table with ``COLUMNS`` appended, ``mb_p_adj`` NaN: the Holm
    adjustment is the caller's, in one family with the Welch tests
    (``audit.stats.comparisons.holm_both``; the claims family ``claims``:
    ``audit.stats.one_sample_claims.holm_with_one_sample``)."""
    cols = [row_columns(runs, sentences, r, settings) for r in table.to_dict("records")]
    return pd.concat([table, pd.DataFrame(cols, columns=COLUMNS, index=table.index)], axis=1)
