"""Generate the bundled planning dataset: original, synthetic, deterministic (stdlib only).

    python examples/planning/make_examples.py

writes into recipes/planning/data/ (shipped with the package; the *.jsonl here link to it):
annotated_p1/p2/test.jsonl (gold plans, for planning-grpo) and
teacher_p1/p2.jsonl (R1-style teacher outputs, ~25% deliberately bad, for planning-sft),
then reads them back, checks them and prints the counts quoted in README.md.
Templates and vocabulary live in _vocab.py.
"""

from __future__ import annotations

import copy
import json
import random
import re
import statistics
from collections import Counter
from pathlib import Path

import _vocab as V

HERE = Path(__file__).resolve().parents[2] / "recipes" / "planning" / "data"
SEED = 20241111
SIZES = {"p1": 160, "p2": 180}  # per period, for both the annotated and the teacher files
TEST_SIZE = 40
KIND_SHARES = {"simple": 0.45, "compound": 0.35, "followup": 0.20}
EN_SHARE = 0.15
BAD_SHARE, GOLD_SHARE, VERBOSE_SHARE = 0.25, 0.70, 0.10
DEFECTS = {
    "format": 0.22,
    "json": 0.18,
    "experts_mismatch": 0.20,
    "hallucinated_expert": 0.16,
    "too_long": 0.12,
    "empty_think": 0.12,
}
SIMPLE, COMPOUND, FOLLOW = (
    {"zh": V.SIMPLE_ZH, "en": V.SIMPLE_EN},
    {"zh": V.COMPOUND_ZH, "en": V.COMPOUND_EN},
    {"zh": V.FOLLOW_ZH, "en": V.FOLLOW_EN},
)
GOOD = re.compile(r"^<think>\n(.*?)\n</think>\n\n<answer>\n(.*?)\n</answer>$", re.DOTALL)


def slots(rng: random.Random) -> dict[str, str]:
    """Fill every template slot, Chinese and English (``_en``) forms."""
    c: dict[str, str] = {}
    for key, pool in V.SLOT_POOLS.items():
        c[key], c[key + "_en"] = rng.choice(pool)
    c["time2"], c["time2_en"] = rng.choice([t for t in V.TIMES if t[0] != c["time"]])
    c["kw2"], c["kw2_en"] = rng.choice([k for k in V.KWS if k[0] != c["kw"]])
    (c["metric"], c["metric_en"], unit), (c["metric2"], c["metric2_en"], _) = rng.sample(V.METRICS, 2)
    c["n"], c["cnt"], x = rng.choice(V.NS), str(rng.randint(30, 2000)), rng.uniform(1, 50)
    values = {
        "money": (f"{x:.1f}万元", f"¥{x * 10:.0f}k"),
        "price": (f"{x + 15:.1f}元", f"¥{x + 15:.1f}"),
        "pct": (f"{x:.1f}%",) * 2,
        "count": (str(int(x * 97)),) * 2,
    }
    c["val"], c["val_en"] = values[unit]
    up, d = rng.random() < 0.6, rng.randint(1, 30)
    c["trend"] = f"环比{'增长' if up else '下降'}{d}%"
    c["trend_en"] = f"{'up' if up else 'down'} {d}% on the previous period"
    return c


def make_item(rng: random.Random, period: str, kind: str, lang: str) -> dict | None:
    """One request with its gold rewrite and plan; None when p1 would route two steps to one expert."""
    c, history = slots(rng), []
    if kind == "followup":
        prev_user, prev_reply, queries, rewrite, steps = rng.choice(FOLLOW[lang])
        history = [
            {"role": "user", "content": prev_user.format(**c)},
            {"role": "assistant", "content": prev_reply.format(**c)},
        ]
    elif kind == "compound":
        queries, rewrite, steps = rng.choice(COMPOUND[lang])
    else:
        weights = V.INTENT_WEIGHT[period]
        intents = sorted({e[0] for e in SIMPLE[lang]})
        intent = rng.choices(intents, [weights[i] for i in intents])[0]
        entry = rng.choice([e for e in SIMPLE[lang] if e[0] == intent])
        queries, rewrite, steps = entry[1], entry[2], [(intent, entry[3] if len(entry) > 3 else None, None)]
    rewrite = rewrite.format(**c)
    plan = []
    for intent, tasks, deps in steps:
        step: dict = {"专家": V.EXPERT[intent][period == "p2"], "处理问题": [t.format(**c) for t in tasks or [rewrite]]}
        if deps:
            step["depends_on"] = list(deps)
        plan.append(step)
    if len({s["专家"] for s in plan}) < len(plan):
        return None
    if rng.random() < 0.2:  # an unrelated earlier turn
        other = rng.choice([e for e in SIMPLE[lang] if e[0] != steps[0][0]])
        turn = rng.choice(other[1]).format(**slots(rng))
        history = [
            {"role": "user", "content": turn},
            {"role": "assistant", "content": (V.REPLY_ZH if lang == "zh" else V.REPLY_EN)[other[0]]},
            *history,
        ]
    experts = V.P1_EXPERTS if period == "p1" else V.P2_EXPERTS
    item = {"period": period, "query": rng.choice(queries).format(**c), "history": history, "experts": list(experts)}
    if rng.random() < 0.5:
        if rng.random() < 0.8:
            item["tools"] = rng.sample(V.TOOLS, rng.randint(1, 3))
        if "tools" not in item or rng.random() < 0.6:
            products = rng.sample([p[0] for p in V.PRODUCTS], rng.randint(1, 3))
            item["products"] = products if c["product"] in products or c["product"] not in rewrite else [c["product"]]
    return {**item, "rewrite": rewrite, "plan": plan, "_kind": kind, "_lang": lang, "_intents": [s[0] for s in steps]}


def gist(rewrite: str, lang: str) -> str:
    if lang == "en":
        g = rewrite[0].lower() + rewrite[1:]
        return "know " + g if g.startswith("how ") else g
    return "了解" + rewrite if any(w in rewrite for w in ("如何", "哪些", "多长")) else rewrite


def make_think(rng: random.Random, item: dict, plan: list[dict]) -> str:
    lang = item["_lang"]
    t, g = V.THINK[lang], gist(item["rewrite"], lang)
    parts = [t["follow"].format(q=item["query"], g=g)] if item["_kind"] == "followup" else []
    if len(plan) == 1:
        opts = t["single_follow"] if item["_kind"] == "followup" else t["single"]
        parts.append(rng.choice(opts).format(e=plan[0]["专家"], g=g))
    else:
        parts.append(rng.choice(t["multi"]).format(k=len(plan)))
        steps = (t["step"].format(task=s["处理问题"][0], e=s["专家"]) for s in plan)
        parts.append(t["step_sep"].join(steps) + t["step_end"])
    for intent, step in zip(item["_intents"], plan, strict=True):
        if intent in V.P2_ONLY and item["period"] == "p1" and step["专家"] == V.EXPERT[intent][0]:
            parts.append(t["fallback"].format(desc=V.P2_ONLY[intent][lang == "en"], e=step["专家"]))
    if len(plan) == 1:
        parts.append(rng.choice(t["single_tail"]))
    else:
        deps = [t["dep"].format(j=j + 1, i=i + 1) for j, s in enumerate(plan) for i in s.get("depends_on", [])]
        parts += deps or [t["indep"]]
    return t["sep"].join(parts)


def ramble(rng: random.Random, think: str, item: dict, plan: list[dict], lo: int, hi: int) -> str:
    """Pad a think with re-checking sentences until lo <= len <= hi (the verbose-teacher style)."""
    t, queue = V.THINK[item["_lang"]], []
    while len(think) < lo:
        queue = queue or rng.sample(t["recheck"], k=len(t["recheck"]))  # no sentence twice in a row
        step = rng.choice(plan)
        experts = "、".join(item["experts"])
        s = queue.pop().format(
            e=step["专家"], task=step["处理问题"][0], q=item["query"], experts=experts, rw=item["rewrite"]
        )
        if len(think) + len(s) + 1 <= hi:
            think += t["sep"] + s
    return think


def wrap(think: str, answer: str) -> str:
    return f"<think>\n{think}\n</think>\n\n<answer>\n{answer}\n</answer>"


def teacher_output(rng: random.Random, item: dict, defect: str | None) -> tuple[str, str | None]:
    """The teacher's raw text for an item, and a label saying which variant was written."""
    answer, plan, zh = {"补全后的问题": item["rewrite"], "plan": item["plan"]}, item["plan"], item["_lang"] == "zh"
    if defect in ("experts_mismatch", "hallucinated_expert"):
        plan = copy.deepcopy(plan)
        step = rng.choice(plan)
        if defect == "experts_mismatch":
            step["专家"] = rng.choice([e for e in item["experts"] if e not in {s["专家"] for s in item["plan"]}])
        else:
            extra = [e for e in V.P2_EXPERTS if e not in item["experts"]]
            step["专家"] = rng.choice(V.FAKE_EXPERTS + extra)
        answer = {**answer, "plan": plan}
    think = make_think(rng, item, plan)
    variant = None
    if defect is None and rng.random() < VERBOSE_SHARE:
        think, variant = ramble(rng, think, item, plan, rng.randint(300, 520), 600), "verbose"
    elif defect == "too_long":
        think = ramble(rng, think, item, plan, rng.randint(820, 1000), 1300)
    elif defect == "empty_think":
        think = ""
    text = json.dumps(answer, ensure_ascii=False)
    if defect == "json":
        variant = rng.choice(["plans_key", "rewrite_key", "step_keys", "trailing_comma", "truncated", "python_repr"])
        text = {
            "plans_key": text.replace('"plan":', '"plans":'),
            "step_keys": text.replace('"专家":', '"expert":'),
            "rewrite_key": text.replace('"补全后的问题":', '"rewrite":'),
            "trailing_comma": text[:-1] + ", }",
            "truncated": text[: len(text) * 2 // 3],
            "python_repr": str(answer),
        }[variant]
    out = wrap(think, text)
    if defect == "format":
        variant = rng.choice(["no_blank_line", "no_think_close", "trailing_text"])
        if variant == "no_blank_line":
            out = out.replace("</think>\n\n<answer>", "</think>\n<answer>")
        elif variant == "no_think_close":
            out = out.replace("\n</think>\n", "\n")
        else:
            out += rng.choice(["\n希望对你有帮助！", "\n\n以上就是我的规划。"] if zh else ["\nHope this helps!"])
    return out, variant


def stratified(rng: random.Random, n: int, shares: dict[str, float]) -> list[str]:
    labels = [k for k, s in shares.items() for _ in range(round(n * s))]
    labels = (labels + [next(iter(shares))] * n)[:n]
    rng.shuffle(labels)
    return labels


def generate(rng: random.Random, period: str, n: int, seen: set, banned: set | None = None) -> list[dict]:
    """n fresh items; with ``banned`` (held-out mode) every query must also be new, and joins it."""
    items = []
    langs = stratified(rng, n, {"zh": 1 - EN_SHARE, "en": EN_SHARE})
    for kind, lang in zip(stratified(rng, n, KIND_SHARES), langs, strict=True):
        for _ in range(5000):
            item = make_item(rng, period, kind, lang)
            key = item and (item["query"], item["history"][-2]["content"] if item["history"] else "")
            if item and key not in seen and (banned is None or item["query"] not in banned):
                seen.add(key)
                if banned is not None:
                    banned.add(item["query"])
                items.append(item)
                break
        else:
            raise RuntimeError(f"could not draw a fresh {period} {kind}/{lang} item")
    return items


def public(item: dict, rid: str) -> dict:
    return {"id": rid, **{k: v for k, v in item.items() if not k.startswith("_") and k not in ("rewrite", "plan")}}


def annotated(item: dict, rid: str) -> dict:
    return {**public(item, rid), "rewrite": item["rewrite"], "plan": item["plan"], "_it": item}


def build(seed: int = SEED) -> dict[str, list[dict]]:
    rng, seen, files = random.Random(seed), set(), {}
    for p, n in SIZES.items():
        files[f"annotated_{p}"] = [annotated(it, f"{p}-a{i + 1:04d}") for i, it in enumerate(generate(rng, p, n, seen))]
    for p, n in SIZES.items():
        items = generate(rng, p, n, seen)
        defects = stratified(rng, n, {"good": 1 - BAD_SHARE, **{d: BAD_SHARE * s for d, s in DEFECTS.items()}})
        n_gold = round(n * GOLD_SHARE) - defects.count("experts_mismatch")
        others = [i for i, d in enumerate(defects) if d != "experts_mismatch"]
        gold = {i for i, d in enumerate(defects) if d == "experts_mismatch"} | set(rng.sample(others, n_gold))
        rows = []
        for i, (it, d) in enumerate(zip(items, defects, strict=True)):
            defect = None if d == "good" else d
            output, variant = teacher_output(rng, it, defect)
            row = {**public(it, f"{p}-t{i + 1:04d}"), "output": output, "_it": it, "_variant": variant}
            if i in gold:
                row["gold"] = {"补全后的问题": it["rewrite"], "plan": copy.deepcopy(it["plan"])}
            if defect:
                row["defect"] = defect
            rows.append(row)
        files[f"teacher_{p}"] = rows
    train_queries = set(r["query"] for rows in files.values() for r in rows)
    test = [it for p in ("p1", "p2") for it in generate(rng, p, TEST_SIZE // 2, seen, train_queries)]
    test = [x for pair in zip(test[: TEST_SIZE // 2], test[TEST_SIZE // 2 :], strict=True) for x in pair]
    files["annotated_test"] = [annotated(it, f"{it['period']}-h{i + 1:04d}") for i, it in enumerate(test)]
    return files


def answer_of(output: str) -> dict | None:
    """The answer JSON of a well-formed output when it has exactly the two expected keys, else None."""
    m = GOOD.match(output)
    try:
        answer = json.loads(m.group(2)) if m else None
    except json.JSONDecodeError:
        return None
    ok = isinstance(answer, dict) and set(answer) == {"补全后的问题", "plan"}
    return answer if ok and all(set(s) <= {"专家", "处理问题", "depends_on"} for s in answer["plan"]) else None


def check(r: dict, lang: str) -> None:
    """Assert what the README promises about one record read back from disk."""
    assert len(r["query"]) <= (40 if lang == "zh" else 80), r["query"]
    for j, step in enumerate(r.get("plan") or r.get("gold", {}).get("plan") or []):
        assert step["专家"] in r["experts"] and step["处理问题"], r["id"]
        assert all(0 <= i < j for i in step.get("depends_on", [])), r["id"]
    if "output" not in r:
        return
    m, answer, defect = GOOD.match(r["output"]), answer_of(r["output"]), r.get("defect")
    think = m.group(1) if m else ""
    experts = {s["专家"] for s in answer["plan"]} if answer else set()
    gold = {s["专家"] for s in r["gold"]["plan"]} if "gold" in r else experts
    ok = {
        None: answer and 30 <= len(think) <= 600 and experts <= set(r["experts"]) and experts == gold,
        "format": m is None,
        "json": m and answer is None,
        "experts_mismatch": answer and "gold" in r and experts <= set(r["experts"]) and experts != gold,
        "hallucinated_expert": answer and not experts <= set(r["experts"]),
        "too_long": answer and len(think) > 800,
        "empty_think": answer and think == "",
    }[defect]
    assert ok, (r["id"], defect)


def report(name: str, rows: list[dict]) -> None:
    its, n = [r["_it"] for r in rows], len(rows)
    kinds = dict(sorted(Counter(it["_kind"] for it in its).items()))
    en = sum(it["_lang"] == "en" for it in its)
    dep = [it["_kind"] for it in its if any("depends_on" in s for s in it["plan"])]
    dep_c = dep.count("compound") / kinds["compound"]
    extras, hist = sum("tools" in r or "products" in r for r in rows), sum(bool(r["history"]) for r in rows)
    print(f"{name}.jsonl: {n} records; kinds {kinds}; English {en} ({en / n:.0%})")
    print(
        f"  depends_on {len(dep)} ({len(dep) / n:.0%}; {dep_c:.0%} of compound); tools/products {extras};"
        f" history {hist}; longest query {max(len(r['query']) for r in rows)}"
    )
    if "output" in rows[0]:
        good = sorted(len(GOOD.match(r["output"]).group(1)) for r in rows if "defect" not in r)
        verbose, mid = sum(r["_variant"] == "verbose" for r in rows), sum(30 <= x <= 160 for x in good)
        print(
            f"  gold {sum('gold' in r for r in rows)}; good {len(good)} (verbose {verbose}); good think chars"
            f" min/median/max {good[0]}/{statistics.median(good):.0f}/{good[-1]}, in 30-160: {mid}"
        )
        defects = dict(sorted(Counter(r["defect"] for r in rows if "defect" in r).items()))
        variants = dict(sorted(Counter(r["_variant"] for r in rows if "defect" in r and r["_variant"]).items()))
        print(f"  defects {defects}; variants {variants}")


def main() -> None:
    files = build()
    for name, rows in files.items():
        public_rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
        path = HERE / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in public_rows), encoding="utf-8")
        back = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert back == public_rows
        for r, row in zip(back, rows, strict=True):
            check(r, row["_it"]["_lang"])
        report(name, rows)
    train = {r["query"] for name, rows in files.items() if name != "annotated_test" for r in rows}
    assert not train & {r["query"] for r in files["annotated_test"]}
    print("all checks passed; annotated_test shares no query with the training files")


if __name__ == "__main__":
    main()
