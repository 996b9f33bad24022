"""Vector search methods for the SQLite backend, compared at 10k and 100k 384-d vectors.

  * numpy, exact: one flat matrix (boolean mask + matmul + argpartition, as vector_index.py
    first did) and clawrecall's `VectorIndex` class as it is today (one matrix per scope),
    each unscoped and with a scope filter selecting ~5% of the rows;
  * sqlite-vec (`vec0` through apsw): brute-force KNN `WHERE embedding MATCH ? AND k = ?`,
    unscoped, with the scope as a metadata column, and with the scope as a partition key;
  * hnswlib (M=16, ef_construction=200) at ef=64 and ef=128: unscoped, and scoped by
    hnswlib's filter function or by over-fetching and filtering afterwards.

Vectors are the real MiniLM embeddings of the synthetic memories of `bench/scale.py` when
its stores are in `--db-dir` (then the queries are MiniLM embeddings of its queries, and
the scope filter is one user's scope), else random Gaussian vectors, normalised, with 20
equal scopes. Every method runs in its own subprocess so its memory (RSS growth while
building or loading) is its own. Recall@10 is against the exact top 10 (float32 brute
force over the rows the filter allows); latency is one query at a time, k = 10.

    python bench/vector_search.py [--sizes 10000,100000] [--db-dir DIR] [--queries 200] [--random] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
DEFAULT_DB_DIR = Path(tempfile.gettempdir()) / "clawrecall-scale"
K = 10
HNSW_M, HNSW_EFC = 16, 200
OVERFETCH = 40  # scoped hnsw without a filter: ask for k × this many, keep the scope's


# -- data -------------------------------------------------------------------------------------
def load_data(n: int, db_dir: Path, n_queries: int, force_random: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """(vectors N×384 float32, scope code per row, queries Q×384, scope code per query, source)."""
    db = db_dir / f"scale-{n}.db"
    if not force_random and db.exists():
        import sqlite3

        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = con.execute("SELECT embedding, scope FROM memories WHERE embedding IS NOT NULL ORDER BY rowid").fetchall()
        con.close()
        if len(rows) >= 0.9 * n:  # dedup drops a few percent
            vectors = np.frombuffer(b"".join(r[0] for r in rows), dtype=np.float32).reshape(len(rows), -1).copy()
            names = sorted({r[1] for r in rows})
            code = {s: i for i, s in enumerate(names)}
            scopes = np.array([code[r[1]] for r in rows], dtype=np.int32)
            sys.path.insert(0, str(BENCH))
            from scale import synthetic_queries  # noqa: PLC0415

            from clawrecall import Memory

            qs = synthetic_queries(n_queries)
            mem = Memory.open(db, writes={"enabled": False})
            queries = mem.upkeep.embedder.embed([q for q, _ in qs], kind="query").astype(np.float32)
            mem.close()
            qscopes = np.array([code.get(f"user:{u}", 0) for _, u in qs], dtype=np.int32)
            return vectors, scopes, queries, qscopes, f"MiniLM embeddings of {db.name}"
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((n, 384), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    scopes = rng.integers(0, 20, n).astype(np.int32)
    queries = rng.standard_normal((n_queries, 384), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    qscopes = rng.integers(0, 20, n_queries).astype(np.int32)
    return vectors, scopes, queries, qscopes, "random Gaussian, normalised"


def exact_topk(vectors: np.ndarray, queries: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """Row numbers of the true top K per query (allowed: bool mask per query × row, or None)."""
    sims = queries @ vectors.T
    if allowed is not None:
        sims = np.where(allowed, sims, -np.inf)
    top = np.argpartition(-sims, K - 1, axis=1)[:, :K]
    order = np.take_along_axis(sims, top, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(top, order, axis=1)


# -- workers (each in its own process) ----------------------------------------------------------
def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed_queries(fn, queries: np.ndarray, qscopes: np.ndarray) -> tuple[list[float], list[list[int]]]:
    for i in range(min(10, len(queries))):  # warm up
        fn(queries[i], int(qscopes[i]))
    lat, found = [], []
    for q, s in zip(queries, qscopes):
        t = time.perf_counter()
        ids = fn(q, int(s))
        lat.append((time.perf_counter() - t) * 1000)
        found.append([int(i) for i in ids])
    return lat, found


def worker_numpy(vectors, scopes, queries, qscopes, tmp) -> list[dict]:
    """Two exact numpy layouts: one flat matrix with a boolean scope mask (rows copied out by fancy
    indexing, as vector_index.py first did), and clawrecall's current `VectorIndex` class itself."""
    import inspect

    from clawrecall.storage import Filters
    from clawrecall.storage.vector_index import RowMeta, VectorIndex

    out = []
    n = len(vectors)
    now = time.time()
    # (1) flat matrix + mask + matmul + argpartition
    rss0 = rss_mb()
    t = time.perf_counter()
    mat = np.zeros((max(1024, int(n * 1.25)), vectors.shape[1]), dtype=np.float32)
    mat[:n] = vectors
    alive = np.ones(n, dtype=bool)
    deleted = np.zeros(n, dtype=bool)
    expires = np.full(n, np.inf)
    scope_col = scopes.copy()
    build = time.perf_counter() - t
    mem = rss_mb() - rss0

    def flat(q, s, scoped):
        mask = alive.copy()
        mask &= ~deleted
        mask &= expires > now
        if scoped:
            mask &= np.isin(scope_col, [s])
        cand = np.flatnonzero(mask)
        sims = mat[:n] @ q if cand.size == n else mat[cand] @ q
        top = np.argpartition(-sims, K - 1)[:K] if sims.size > K else np.arange(sims.size)
        top = top[np.argsort(-sims[top], kind="stable")]
        return top if cand.size == n else cand[top]

    for scoped in (False, True):
        lat, found = timed_queries(lambda q, s, scoped=scoped: flat(q, s, scoped), queries, qscopes)
        out.append(dict(method="numpy flat matrix + mask", variant="scope mask (~5%)" if scoped else "unscoped",
                        scoped=scoped, lat=lat, found=found, build_s=build, load_s=None, mem_mb=mem, disk_mb=None))
    del mat
    # (2) clawrecall's VectorIndex, whatever its layout is today
    rss0 = rss_mb()
    t = time.perf_counter()
    kw = {"capacity": max(1024, int(n * 1.25))} if "capacity" in inspect.signature(VectorIndex).parameters else {}
    index = VectorIndex(vectors.shape[1], **kw)
    names = [f"s{s}" for s in range(int(scopes.max()) + 1)]
    index.upsert_many([str(i) for i in range(len(vectors))], vectors, [
        RowMeta.of(names[s], category="fact", created_at=0.0) for s in scopes
    ])
    build = time.perf_counter() - t
    mem = rss_mb() - rss0
    layout = "per-scope matrices" if hasattr(index, "_parts") else "one matrix"
    for scoped in (False, True):
        def fn(q, s, scoped=scoped):
            return [int(i) for i, _ in index.search(q, K, Filters(scopes=[names[s]] if scoped else None))]

        lat, found = timed_queries(fn, queries, qscopes)
        out.append(dict(method=f"clawrecall VectorIndex ({layout})", variant="one scope (~5%)" if scoped else "unscoped",
                        scoped=scoped, lat=lat, found=found, build_s=build, load_s=None, mem_mb=mem, disk_mb=None))
    return out


def _vec_connection(path: str):
    import apsw
    import sqlite_vec

    con = apsw.Connection(path)
    con.enable_load_extension(True)
    con.load_extension(sqlite_vec.loadable_path())
    con.enable_load_extension(False)
    return con


def worker_sqlite_vec(vectors, scopes, queries, qscopes, tmp) -> list[dict]:
    dims = vectors.shape[1]
    tables = {
        "unscoped": f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dims}] distance_metric=cosine)",
        "metadata column": f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dims}] distance_metric=cosine, scope integer)",
        "partition key": f"CREATE VIRTUAL TABLE v USING vec0(scope integer partition key, embedding float[{dims}] distance_metric=cosine)",
    }
    out = []
    for variant, ddl in tables.items():
        path = os.path.join(tmp, f"vec-{variant.replace(' ', '-')}.db")
        con = _vec_connection(path)
        con.execute("PRAGMA journal_mode=WAL")
        t = time.perf_counter()
        con.execute(ddl)
        with con:
            if variant == "unscoped":
                con.executemany("INSERT INTO v (rowid, embedding) VALUES (?, ?)",
                                ((i + 1, v.tobytes()) for i, v in enumerate(vectors)))
            else:
                con.executemany("INSERT INTO v (rowid, scope, embedding) VALUES (?, ?, ?)",
                                ((i + 1, int(s), v.tobytes()) for i, (v, s) in enumerate(zip(vectors, scopes))))
        build = time.perf_counter() - t
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        disk = sum(p.stat().st_size for p in Path(tmp).glob(Path(path).name + "*")) / 1e6
        rss0 = rss_mb()
        t = time.perf_counter()
        con = _vec_connection(path)
        load = time.perf_counter() - t
        version = con.execute("SELECT vec_version()").fetchone()[0]
        if variant == "unscoped":
            sql = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ?"

            def fn(q, s):
                return [r[0] - 1 for r in con.execute(sql, (q.tobytes(), K))]
        else:
            sql = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? AND scope = ?"

            def fn(q, s):
                return [r[0] - 1 for r in con.execute(sql, (q.tobytes(), K, s))]

        lat, found = timed_queries(fn, queries, qscopes)
        out.append(dict(method=f"sqlite-vec {version} vec0", variant=variant, scoped=variant != "unscoped", lat=lat,
                        found=found, build_s=build, load_s=load, mem_mb=rss_mb() - rss0, disk_mb=disk))
        con.close()
    return out


def worker_hnswlib(vectors, scopes, queries, qscopes, tmp) -> list[dict]:
    import hnswlib

    n, dims = vectors.shape
    rss0 = rss_mb()
    t = time.perf_counter()
    index = hnswlib.Index(space="cosine", dim=dims)
    index.init_index(max_elements=n, M=HNSW_M, ef_construction=HNSW_EFC, random_seed=1)
    index.add_items(vectors, np.arange(n), num_threads=os.cpu_count() or 1)
    build = time.perf_counter() - t
    mem = rss_mb() - rss0
    path = os.path.join(tmp, "hnsw.bin")
    index.save_index(path)
    disk = os.path.getsize(path) / 1e6
    t = time.perf_counter()
    loaded = hnswlib.Index(space="cosine", dim=dims)
    loaded.load_index(path, max_elements=n)
    load = time.perf_counter() - t
    del loaded
    index.set_num_threads(1)
    out = []
    scope_list = scopes.tolist()  # plain ints: the filter callback must return a Python bool
    for ef in (64, 128):
        index.set_ef(ef)

        def plain(q, s):
            return index.knn_query(q, k=K)[0][0]

        def with_filter(q, s):
            labels, _ = index.knn_query(q, k=K, filter=lambda label: scope_list[label] == s)
            return labels[0]

        def overfetch(q, s):
            want = min(n, K * OVERFETCH)
            if index.ef < want:
                index.set_ef(want)
            labels = index.knn_query(q, k=want)[0][0]
            index.set_ef(ef)
            return [int(x) for x in labels if scopes[x] == s][:K]

        for variant, fn, scoped in (("unscoped", plain, False), ("filter function", with_filter, True),
                                    (f"over-fetch k×{OVERFETCH}", overfetch, True)):
            lat, found = timed_queries(fn, queries, qscopes)
            out.append(dict(method=f"hnswlib M={HNSW_M} efC={HNSW_EFC} ef={ef}", variant=variant, scoped=scoped,
                            lat=lat, found=found, build_s=build, load_s=load, mem_mb=mem, disk_mb=disk))
    return out


WORKERS = {"numpy": worker_numpy, "sqlite-vec": worker_sqlite_vec, "hnswlib": worker_hnswlib}


def run_worker(name: str, data: str, tmp: str) -> None:
    d = np.load(data)
    results = WORKERS[name](d["vectors"], d["scopes"], d["queries"], d["qscopes"], tmp)
    print(json.dumps(results))


# -- driver ---------------------------------------------------------------------------------------
def measure(n: int, db_dir: Path, n_queries: int, force_random: bool, methods: list[str], log) -> dict:
    vectors, scopes, queries, qscopes, source = load_data(n, db_dir, n_queries, force_random)
    log(f"{len(vectors)} vectors ({source}); scope filter keeps {np.mean([np.mean(scopes == s) for s in qscopes]):.1%} of rows on average")
    truth_all = exact_topk(vectors, queries, None)
    truth_scoped = np.concatenate([
        exact_topk(vectors, queries[i : i + 50], scopes[None, :] == qscopes[i : i + 50, None])
        for i in range(0, len(queries), 50)
    ])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data.npz")
        np.savez(data, vectors=vectors, scopes=scopes, queries=queries, qscopes=qscopes)
        for name in methods:
            log(f"  {name} …")
            proc = subprocess.run([sys.executable, __file__, "--worker", name, data, tmp], capture_output=True, text=True)
            if proc.returncode != 0:
                log(proc.stderr)
                raise SystemExit(f"{name} worker failed")
            for r in json.loads(proc.stdout.strip().splitlines()[-1]):
                truth = truth_scoped if r["scoped"] else truth_all
                recall = statistics.fmean(len(set(f) & set(t.tolist())) / K for f, t in zip(r.pop("found"), truth))
                lat = sorted(r.pop("lat"))
                r.update(p50_ms=statistics.median(lat), p95_ms=lat[int(0.95 * len(lat)) - 1], recall=recall)
                rows.append(r)
                log(f"    {r['method']} / {r['variant']}: p50 {r['p50_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms, recall {recall:.3f}")
    selectivity = float(np.mean([np.mean(scopes == s) for s in qscopes]))
    return {"size": len(vectors), "source": source, "scope_selectivity": selectivity, "queries": len(queries), "rows": rows}


def machine() -> dict:
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from importlib import metadata

    versions = {}
    for mod, dist in (("apsw", "apsw"), ("sqlite_vec", "sqlite-vec"), ("hnswlib", "hnswlib")):
        try:
            versions[mod] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[mod] = "missing"
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            **versions, "load_avg": os.getloadavg()}


def render(report: dict) -> str:
    m = report["machine"]
    lines = [f"Machine: {m['cpu']}, {m['cpu_count']} CPUs, Python {m['python']}, numpy {m['numpy']}, apsw {m['apsw']}, "
             f"sqlite-vec {m['sqlite_vec']}, hnswlib {m['hnswlib']}; load average at start {m['load_avg'][0]:.2f}", ""]
    lines += ["| N | method | filter | p50 (ms) | p95 (ms) | recall@10 | build (s) | load (s) | RAM Δ (MB) | disk (MB) |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    f = lambda v, spec: "–" if v is None else format(v, spec)  # noqa: E731
    for size in report["sizes"]:
        for r in size["rows"]:
            lines.append(
                f"| {size['size']:,} | {r['method']} | {r['variant']} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} "
                f"| {r['recall']:.3f} | {f(r['build_s'], '.1f')} | {f(r['load_s'], '.2f')} | {f(r['mem_mb'], '.0f')} "
                f"| {f(r['disk_mb'], '.0f')} |"
            )
    lines.append("")
    for size in report["sizes"]:
        lines.append(f"{size['size']:,} vectors: {size['source']}; {size['queries']} queries; the scope filter keeps "
                     f"{size['scope_selectivity']:.1%} of the rows.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        run_worker(*argv[1:4])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated numbers of vectors")
    parser.add_argument("--db-dir", default=str(DEFAULT_DB_DIR), help="where bench/scale.py keeps its stores")
    parser.add_argument("--queries", type=int, default=200, help="queries per method")
    parser.add_argument("--methods", default="numpy,sqlite-vec,hnswlib", help="comma-separated: numpy, sqlite-vec, hnswlib")
    parser.add_argument("--random", action="store_true", help="random vectors even if real embeddings are cached")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    report = {"machine": machine(), "sizes": []}
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        report["sizes"].append(measure(n, Path(args.db_dir), args.queries, args.random, args.methods.split(","), log))
    report["machine"]["load_avg_end"] = os.getloadavg()
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
