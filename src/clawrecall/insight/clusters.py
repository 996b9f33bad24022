"""Groups of near-identical rows: every pair of vectors at cosine ≥ a threshold, joined into groups.

nova-memory finds its pairs with a self-join of the whole table, O(n²) in SQL. Here the vectors are
split into cells by a few rounds of spherical k-means (about 2√n cells); each row lives in its
nearest cell and is compared exactly with the rows living in its `probes` nearest cells. Two rows as
alike as a 0.8 threshold asks are compared unless both sit on the edges of cells that neither looks
into: the result may miss a pair, never invent one (a reported pair's cosine is computed exactly).
Below `EXACT_ROWS` rows every pair is compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXACT_ROWS = 4_000  # below this, every pair (a 4,000² block is 64 MB of float32)
_SAMPLE = 10_000  # rows k-means learns its cells from
_ROUNDS = 4
_BLOCK = 2_048  # rows compared with a cell's rows at once


@dataclass(frozen=True)
class Group:
    """Rows (their indexes in the input) joined by pairs at or above the threshold, and those pairs' cosines."""

    members: list[int]
    similarities: list[float]


def groups(vectors: np.ndarray, threshold: float, *, probes: int = 4, seed: int = 0) -> list[Group]:
    """The groups of two or more rows, largest first (then by first member). `vectors` are one per row."""
    n = len(vectors)
    if n < 2:
        return []
    unit = _normalized(vectors)
    everyone = np.arange(n)
    cells = [(everyone, everyone)] if n <= EXACT_ROWS else _cells(unit, probes, np.random.default_rng(seed))
    found = [_pairs(unit, askers, members, threshold) for members, askers in cells]
    a = np.concatenate([f[0] for f in found])
    b = np.concatenate([f[1] for f in found])
    sims = np.concatenate([f[2] for f in found])
    if not len(a):
        return []
    _, first = np.unique(a * n + b, return_index=True)  # a pair seen from two cells counts once
    a, b, sims = a[first], b[first], sims[first]
    label = _components(n, a, b)
    rows = np.unique(np.concatenate([a, b]))  # every row in a pair, by row
    rows = rows[np.argsort(label[rows], kind="stable")]
    roots, starts = np.unique(label[rows], return_index=True)
    by_pair = np.argsort(label[a], kind="stable")
    pair_roots, pair_starts = np.unique(label[a][by_pair], return_index=True)
    assert np.array_equal(roots, pair_roots)
    members = np.split(rows, starts[1:])
    similarities = np.split(np.round(sims[by_pair], 4), pair_starts[1:])
    out = [Group(m.tolist(), s.tolist()) for m, s in zip(members, similarities)]
    return sorted(out, key=lambda g: (-len(g.members), g.members[0]))


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each row's component (its smallest row) under the pairs, by propagating the minimum label along
    the pairs and jumping pointers until nothing changes: a few vectorised rounds, no loop per pair."""
    label = np.arange(n)
    while True:
        low = np.minimum(label[a], label[b])
        before = label.copy()
        np.minimum.at(label, a, low)
        np.minimum.at(label, b, low)
        while not np.array_equal(label, label[label]):
            label = label[label]
        if np.array_equal(label, before):
            return label


def _normalized(vectors: np.ndarray) -> np.ndarray:
    unit = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(unit, axis=1, keepdims=True)
    return unit / np.where(norms == 0, 1, norms)


def _cells(unit: np.ndarray, probes: int, rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each cell of a spherical k-means learnt on a sample: the rows whose nearest centroid it is, and
    the rows that look into it (it is among their `probes` nearest). A pair is compared when one row
    looks into the other's cell."""
    n = len(unit)
    k = max(2, int(2 * np.sqrt(n)))
    sample = unit[rng.choice(n, size=min(n, _SAMPLE), replace=False)]
    centroids = sample[rng.choice(len(sample), size=k, replace=False)]
    for _ in range(_ROUNDS):
        nearest = np.argmax(sample @ centroids.T, axis=1)
        order = np.argsort(nearest, kind="stable")
        used, starts = np.unique(nearest[order], return_index=True)
        sums = np.zeros_like(centroids)
        sums[used] = np.add.reduceat(sample[order], starts, axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = np.where(norms > 0, sums / np.where(norms == 0, 1, norms), centroids)
    probes = min(probes, k)
    ranked = []
    for start in range(0, n, _BLOCK * 8):
        scores = unit[start:start + _BLOCK * 8] @ centroids.T
        picks = []
        for _ in range(probes):  # a few argmaxes: quicker than partitioning every row of 2√n scores
            best = np.argmax(scores, axis=1)
            picks.append(best)
            scores[np.arange(len(scores)), best] = -np.inf
        ranked.append(np.stack(picks, axis=1))
    looks = np.concatenate(ranked)
    homes, lookers = _by_cell(looks[:, 0], np.arange(n), k), _by_cell(looks.ravel(), np.repeat(np.arange(n), probes), k)
    return [(homes[c], lookers[c]) for c in range(k) if len(homes[c]) and len(lookers[c])]


def _by_cell(cell_of: np.ndarray, rows: np.ndarray, k: int) -> list[np.ndarray]:
    order = np.argsort(cell_of, kind="stable")
    bounds = np.searchsorted(cell_of[order], np.arange(k + 1))
    return [rows[order[bounds[c]:bounds[c + 1]]] for c in range(k)]


def _pairs(unit: np.ndarray, askers: np.ndarray, members: np.ndarray,
           threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (a < b, by input index) of an asker and a member at or above the threshold, and their cosines."""
    block = unit[members]
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for start in range(0, len(askers), _BLOCK):
        ask = askers[start:start + _BLOCK]
        sims = unit[ask] @ block.T
        rows, cols = np.nonzero(sims >= threshold)
        x, y = ask[rows], members[cols]
        keep = x != y
        found.append((np.minimum(x, y)[keep], np.maximum(x, y)[keep], sims[rows, cols][keep]))
    return (np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]),
            np.concatenate([f[2] for f in found]))
