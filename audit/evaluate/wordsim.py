"""Word-similarity evaluation of an embedding matrix on the 13 EN-*.txt benchmarks.

Each benchmark line is ``word1 word2 score`` separated by tabs or spaces (CRLF line ends and a
missing final newline are fine). Words are lower-cased and looked up exactly in the LM vocabulary
(no <unk> back-off, no lemmatisation); a pair with an out-of-vocabulary word is skipped and
counted. The model's similarity is the cosine of the two rows, and a benchmark's score is
Spearman's rho between gold scores and cosines with average ranks for ties.

Differences from the reference port (FDW/LK), on purpose:
- nothing is modified in place: the reference adds 1e-6 to the stored vectors at every use, so
  its numbers drift with file order; here the caller's array is only read;
- a pair listed twice (same word1, word2 in the same order after lower-casing, e.g. money/cash
  in EN-WS-353-ALL) is kept once with the MEAN of its gold scores (the reference keeps the last).
  Reversed pairs (a, b) and (b, a) are separate lines of the benchmarks, as in the reference;
- a benchmark with fewer than 3 pairs found gets rho = NaN (the reference reports 0 for none),
  because a rank correlation of 0-2 points is undefined or trivially +-1; a constant gold or
  cosine column also gives NaN (scipy's convention);
- a zero vector has cosine 0 with everything (scikit-learn's convention) instead of a division
  by zero.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.stats

from audit.errors import AuditError

MIN_PAIRS = 3  # fewer found pairs than this: Spearman's rho is reported as NaN


def read_benchmark(path: Path) -> pd.DataFrame:
    """Distinct pairs of one benchmark file.

    Args:
        path: a text file of ``word1 word2 score`` lines (tabs or spaces; blank lines ignored).

    Returns:
        DataFrame[word1, word2, gold] in first-appearance order, words lower-cased, one row per
        distinct ordered pair; gold is the mean score of a pair's lines.

    Raises:
        AuditError: a line without exactly three fields or with a non-numeric score.
    """
    path = Path(path)
    pairs: dict[tuple[str, str], list[float]] = {}
    # universal newlines: CRLF and a missing final newline read the same as LF files
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.lower().split()
            if not fields:
                continue
            if len(fields) != 3:
                raise AuditError(f"{path}:{number}: expected 'word1 word2 score', got {line.strip()!r}")
            try:
                score = float(fields[2])
            except ValueError:
                raise AuditError(f"{path}:{number}: score {fields[2]!r} is not a number") from None
            pairs.setdefault((fields[0], fields[1]), []).append(score)
    return pd.DataFrame(
        {"word1": [k[0] for k in pairs], "word2": [k[1] for k in pairs],
         "gold": [float(np.mean(v)) for v in pairs.values()]},
        columns=["word1", "word2", "gold"])


def load_benchmarks(benchmark_dir) -> dict[str, pd.DataFrame]:
    """All ``*.txt`` benchmarks of a directory, keyed by file stem, sorted by name.

    Args:
        benchmark_dir: directory holding the benchmark files (e.g. EN-WS-353-ALL.txt).

    Returns:
        {stem: DataFrame[word1, word2, gold]} as from ``read_benchmark``.

    Raises:
        AuditError: the directory is missing or holds no .txt file.
    """
    directory = Path(benchmark_dir)
    if not directory.is_dir():
        raise AuditError(f"word-similarity benchmark directory {str(directory)!r} does not exist")
    files = sorted(directory.glob("*.txt"), key=lambda p: p.stem)
    if not files:
        raise AuditError(f"word-similarity benchmark directory {str(directory)!r} has no .txt files")
    return {path.stem: read_benchmark(path) for path in files}


def _as_matrix(vectors) -> np.ndarray:
    if type(vectors).__module__.startswith("torch"):
        vectors = vectors.detach().cpu().numpy()
    matrix = np.asarray(vectors)
    if matrix.ndim != 2:
        raise AuditError(f"word similarity: vectors must be 2-D (V x d), got shape {matrix.shape}")
    return matrix


def _as_index(vocab, rows: int) -> Mapping[str, int]:
    if isinstance(vocab, Mapping):
        index = vocab
    elif isinstance(vocab, Sequence) and not isinstance(vocab, str):
        index = {word: row for row, word in enumerate(vocab)}
    else:
        raise AuditError(f"word similarity: vocab must be a dict word -> row or a list of words, "
                         f"got {type(vocab).__name__}")
    if index and not all(0 <= int(r) < rows for r in index.values()):
        raise AuditError(f"word similarity: vocab has a row index outside 0..{rows - 1}")
    return index


def _cosines(matrix: np.ndarray, rows1: np.ndarray, rows2: np.ndarray) -> np.ndarray:
    """Cosine of matrix[rows1[i]] and matrix[rows2[i]] for each i, in float64 (new arrays only)."""
    a = matrix[rows1].astype(np.float64)  # fancy indexing copies: the caller's array is untouched
    b = matrix[rows2].astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def _score(matrix, index, benchmarks) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Found pairs with cosines, and per-benchmark counts, from parsed benchmarks."""
    found_frames, counts = [], []
    for name, pairs in benchmarks.items():
        known = pairs["word1"].isin(index.keys()) & pairs["word2"].isin(index.keys())
        found = pairs[known].reset_index(drop=True)
        rows1 = np.array([index[w] for w in found["word1"]], dtype=np.int64)
        rows2 = np.array([index[w] for w in found["word2"]], dtype=np.int64)
        found.insert(0, "benchmark", name)
        found["cosine"] = _cosines(matrix, rows1, rows2)
        found_frames.append(found)
        counts.append((name, len(pairs), len(found)))
    columns = ["benchmark", "word1", "word2", "gold", "cosine"]
    table = pd.concat(found_frames, ignore_index=True)[columns] if found_frames else \
        pd.DataFrame(columns=columns)
    return table, pd.DataFrame(counts, columns=["benchmark", "pairs", "found"])


def pair_similarities(vectors, vocab, benchmark_dir) -> pd.DataFrame:
    """Cosine similarity of every benchmark pair whose two words are in the vocabulary.

    Args:
        vectors: embedding matrix, numpy or torch, shape (V, d); only read.
        vocab: dict word -> row, or a sequence of words in row order.
        benchmark_dir: directory of ``*.txt`` benchmarks (see ``load_benchmarks``).

    Returns:
        DataFrame[benchmark, word1, word2, gold, cosine], benchmarks sorted by name, pairs in
        file order; benchmark is the file stem (e.g. ``EN-WS-353-ALL``).
    """
    matrix = _as_matrix(vectors)
    table, _ = _score(matrix, _as_index(vocab, matrix.shape[0]), load_benchmarks(benchmark_dir))
    return table


def _spearman(gold: np.ndarray, cosine: np.ndarray) -> float:
    if len(gold) < MIN_PAIRS:
        return float("nan")
    with warnings.catch_warnings():  # constant input: scipy warns and returns NaN, which we keep
        warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
        return float(scipy.stats.spearmanr(gold, cosine).statistic)


def evaluate(vectors, vocab, benchmark_dir) -> pd.DataFrame:
    """Spearman's rho of each benchmark between gold scores and embedding cosines.

    Args:
        vectors: embedding matrix, numpy or torch, shape (V, d); only read.
        vocab: dict word -> row, or a sequence of words in row order.
        benchmark_dir: directory of ``*.txt`` benchmarks (13 files in the data mirror).

    Returns:
        DataFrame[benchmark, pairs, found, spearman], one row per file sorted by benchmark name:
        pairs = distinct pairs in the file, found = pairs with both words in vocab, spearman =
        rho over the found pairs (average ranks for ties; NaN when found < 3).
    """
    return pairs_and_scores(vectors, vocab, benchmark_dir)[1]


def pairs_and_scores(vectors, vocab, benchmark_dir) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``pair_similarities`` and ``evaluate`` from one reading of the benchmark files.

    Returns:
        (pairs, scores): DataFrame[benchmark, word1, word2, gold, cosine] and
        DataFrame[benchmark, pairs, found, spearman], as the two functions return them.
    """
    matrix = _as_matrix(vectors)
    table, counts = _score(matrix, _as_index(vocab, matrix.shape[0]), load_benchmarks(benchmark_dir))
    groups = {name: frame for name, frame in table.groupby("benchmark", sort=False)}
    counts["spearman"] = [
        _spearman(groups[name]["gold"].to_numpy(), groups[name]["cosine"].to_numpy())
        if name in groups else float("nan") for name in counts["benchmark"]]
    return table, counts
