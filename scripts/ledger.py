#!/usr/bin/env python3
"""The public-run ledger: every public report of a DeepSpeed run in tests/cases/ledger/*.json,
run through zeromem with the case's own software stack, scored against what happened.

  python3 scripts/ledger.py --zeromem build/zeromem --write docs/accuracy.md   # regenerate the document
  python3 scripts/ledger.py --zeromem build/zeromem --check                   # CI: hold the totals
  python3 scripts/ledger.py --zeromem build/zeromem --show C02                # one case's commands and output

A verdict is "right" when zeromem's verdict for the resource the report is about (gpu or host) matches the
observed outcome ("oom" or "fits"); "tight" counts as right. The dangerous miss is "fits" for a run that ran
out of memory. Cases whose report shows memory growing across steps, or one rank alone spiking, are marked
"predictable": false in the ledger (with the quote) and scored apart.

Beside zeromem the same input is scored with DeepSpeed's own estimator (zeromem --convention deepspeed) and
the 16 B/param rule (the ZeRO paper's model states 2 + 2 + K = 12 bytes per parameter, partitioned by stage
over the data-parallel degree, offloaded states off the GPU; no activations, no buffers).

The totals the CI test holds are in tests/cases/ledger/gate.json. Only the standard library is used.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEDGER_DIR = os.path.join(ROOT, "tests", "cases", "ledger")
GIB = float(1 << 30)


def load_ledger():
    cases = []
    for path in sorted(glob.glob(os.path.join(LEDGER_DIR, "*.json"))):
        if os.path.basename(path) == "gate.json":
            continue
        with open(path) as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                sys.exit(f"ledger: {path}:{e.lineno}: {e.msg}")
        for c in data:
            c["_file"] = os.path.relpath(path, ROOT)
            cases.append(c)
    ids = [c["id"] for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit(f"ledger: observation ids given twice: {', '.join(sorted(dup))}")
    return cases


def stack_args(stack):
    parts = [f"{k}={stack[k]}" for k in ("deepspeed", "torch", "transformers") if stack.get(k)]
    return ["--stack", ",".join(parts)] if parts else []


def run_estimate(exe, case, extra):
    cmd = [exe, "estimate"] + case["args"] + stack_args(case.get("stack", {})) + extra + ["--format", "json"]
    env = dict(os.environ)
    env["ZEROMEM_STACK"] = "defaults"  # the case's stack comes from its --stack, never from this machine
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if p.returncode not in (0, 1, 4):  # 4: answered, tight
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1], "cmd": cmd}
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"error": "no JSON on stdout", "cmd": cmd}
    out["cmd"] = cmd
    return out


def verdict_of(out, resource):
    """'fits', 'tight', 'oom' or None (no capacity / error)."""
    if "error" in out:
        return None
    key = resource + "_verdict"
    if out.get(key) in ("fits", "tight", "oom"):
        return out[key]
    b = out.get("fits_gpu" if resource == "gpu" else "fits_host")
    if b is None:
        return None
    return "fits" if b else "oom"


def rule_16b(out, case):
    """The 16 B/param rule on the GPU: ZeRO paper Table 1 (2 + 2 + 12 bytes per parameter), partitioned by
    stage over N_d, with offloaded optimizer states / parameters off the GPU. Returns (bytes, verdict)."""
    if "error" in out or not all(k in out for k in ("model", "cluster", "zero_optimization")):
        return None, None  # a workload's JSON (DPO, PPO) has one block per model: the rule is not scored
    m, cl, z = out["model"], out["cluster"], out["zero_optimization"]
    p = float(out.get("trainable_params", m["params"]))
    total = float(m["params"])
    frozen = total - p
    nd = float(cl.get("data_parallel") or cl["gpus"])
    stage = int(z.get("stage", 0))
    opt_off = z.get("offload_optimizer", "none") not in ("none", None)
    par_off = z.get("offload_param", "none") not in ("none", None)
    params = 2 * (p + frozen) / (nd if stage >= 3 else 1)
    grads = 2 * p / (nd if stage >= 2 else 1)
    optim = 12 * p / (nd if stage >= 1 else 1)
    if opt_off:
        optim = 0.0
        if stage >= 2:
            grads = 0.0
    if par_off and stage >= 3:
        params = 0.0
    need = params + grads + optim
    cap = cl.get("gpu_memory")
    if not cap:
        return need, None
    return need, ("fits" if need <= cap else "oom")


def score(exe):
    cases = load_ledger()
    rows = []
    for c in cases:
        res = c["resource"]
        z = run_estimate(exe, c, [])
        ds = run_estimate(exe, c, ["--convention", "deepspeed"])
        rule_need, rule_v = rule_16b(z, c) if res == "gpu" else (None, None)
        rows.append({
            "case": c,
            "zeromem": verdict_of(z, res),
            "deepspeed": verdict_of(ds, res),
            "rule": rule_v,
            "z": z, "ds": ds, "rule_need": rule_need,
        })
    return rows


def right(v, observed):
    if v is None:
        return None
    if v == "tight":
        return True
    return v == observed


def totals(rows, predictable=True):
    t = {}
    for res in ("gpu", "host"):
        sel = [r for r in rows if r["case"]["resource"] == res and r["case"].get("predictable", True) == predictable]
        for who in ("zeromem", "deepspeed", "rule"):
            scored = [r for r in sel if r[who] is not None]
            t[f"{res}_{who}_scored"] = len(scored)
            t[f"{res}_{who}_right"] = sum(1 for r in scored if right(r[who], r["case"]["observed"]["outcome"]))
            t[f"{res}_{who}_fits_for_oom"] = sum(
                1 for r in scored if r[who] == "fits" and r["case"]["observed"]["outcome"] == "oom")
            t[f"{res}_{who}_tight"] = sum(1 for r in scored if r[who] == "tight")
        t[f"{res}_observations"] = len(sel)
        t[f"{res}_zeromem_errors"] = sum(1 for r in sel if "error" in r["z"])
    return t


def gib(b):
    return "" if b is None else f"{b / GIB:.2f}"


def peak_of(out, res):
    if "error" in out or "per_gpu" not in out:
        return None
    if res == "gpu":
        return out["per_gpu"]["total"]
    return out["per_node"]["host_memory"]


def capacity_of(out, res):
    if "error" in out or "cluster" not in out:
        return None
    return out["cluster"]["gpu_memory" if res == "gpu" else "host_memory"]


def mark(v, observed):
    if v is None:
        return "—"
    r = right(v, observed)
    return f"{v} {'✓' if r else ('✗ (fits for an OOM)' if v == 'fits' else '✗')}"


def render(rows, exe):
    lines = []
    w = lines.append
    w("# Accuracy on public runs")
    w("")
    w("Generated by `python3 scripts/ledger.py --write docs/accuracy.md` from the ledger in")
    w("`tests/cases/ledger/` (one entry per observation of a public report: inputs as stated, the software stack")
    w("stated or implied by the report's date, the observed outcome and figures, the source). Do not edit by hand.")
    w("The CI test `ledger_totals` holds the totals below (tests/cases/ledger/gate.json): a change that makes the")
    w("model less right on real runs fails it.")
    w("")
    w("Each observation is run with its own stack (`--stack deepspeed=V,torch=V,transformers=V`). Columns: zeromem")
    w("(`estimate`, the full convention), DeepSpeed's own estimator (`--convention deepspeed`: model states only),")
    w("and the 16 B/param rule (the ZeRO paper's 2 + 2 + 12 bytes per parameter partitioned by stage, offloaded")
    w("states off the GPU). A verdict is right when it matches the outcome for the resource the report is about;")
    w("\"tight\" counts as right; ✗ (fits for an OOM) is the dangerous miss. GiB = 2^30 bytes; zeromem's GPU")
    w("figure is its peak per GPU (allocated, CUDA context and fragmentation allowance included), its host figure")
    w("the peak per node.")
    w("")
    for predictable, title in ((True, "Totals"), (False, "Totals of the runs not predictable from their setup")):
        t = totals(rows, predictable)
        if t["gpu_observations"] + t["host_observations"] == 0:
            continue
        w(f"## {title}")
        w("")
        w("| resource | observations | zeromem right | zeromem \"fits\" for an OOM | zeromem tight | DeepSpeed's estimator right | 16 B/param rule right |")
        w("|---|---|---|---|---|---|---|")
        for res in ("gpu", "host"):
            if t[f"{res}_observations"] == 0:
                continue
            def frac(who):
                return f"{t[f'{res}_{who}_right']} of {t[f'{res}_{who}_scored']}"
            rule = frac("rule") if res == "gpu" else "—"
            w(f"| {res.upper()} | {t[f'{res}_observations']} | {frac('zeromem')} | {t[f'{res}_zeromem_fits_for_oom']} | "
              f"{t[f'{res}_zeromem_tight']} | {frac('deepspeed')} | {rule} |")
        w("")
    opened = [r["case"] for r in rows if r["case"].get("open_term")]
    if opened:
        w("## Misses with a named open term")
        w("")
        w("These are scored as they come out above, but left out of the error band: the ledger names the term zeromem")
        w("lacks for them, and a band stretched to cover a known gap would make every other verdict tight.")
        w("")
        for c in opened:
            w(f"- **{c['id']}** ({c['source']}): {c['open_term']}.")
        w("")
    w("## Error band")
    w("")
    b = band(rows)
    w(f"GPU: {100 * b['gpu']['under']:.1f}% of the capacity on {b['gpu']['runs']} observations; host: "
      f"{100 * b['host']['under']:.1f}% on {b['host']['runs']}. A need that fits by less than this margin is \"tight\"")
    w("(`data/verdict_band.json`, compiled into zeromem; `python3 scripts/ledger.py --band` lists each observation's")
    w("underestimate: runs that ran out of memory give (capacity - estimate) / capacity, runs that fitted with a measured")
    w("allocated or reserved peak give (peak - estimate) / capacity; inputs without an architecture are left out, their")
    w("verdict follows the activation allowance instead).")
    w("")
    w("## Per observation")
    w("")
    w("| id | resource | observed | zeromem | needs GiB | of GiB | DeepSpeed's estimator | its GiB | 16 B/param | its GiB | stack | source |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = r["case"]
        res, obs = c["resource"], c["observed"]["outcome"]
        st = c.get("stack", {})
        stack = " / ".join(st.get(k, "default") for k in ("deepspeed", "torch", "transformers"))
        flag = "" if c.get("predictable", True) else " (not predictable)"
        zv = mark(r["zeromem"], obs) if "error" not in r["z"] else "error: " + r["z"]["error"].replace("|", "\\|")
        w(f"| {c['id']}{flag} | {res} | {obs} | {zv} | {gib(peak_of(r['z'], res))} | {gib(capacity_of(r['z'], res))} | "
          f"{mark(r['deepspeed'], obs)} | {gib(peak_of(r['ds'], res))} | {mark(r['rule'], obs)} | {gib(r['rule_need'])} | "
          f"{stack} | {c['source']} |")
    w("")
    w("## Inputs")
    w("")
    w("Each observation as zeromem input (run from the repository root), with what the report says happened.")
    w("")
    for r in rows:
        c = r["case"]
        w(f"- **{c['id']}** ({c['source']}): `zeromem estimate {' '.join(c['args'] + stack_args(c.get('stack', {})))}`"
          f" — observed: {c['observed'].get('what', c['observed']['outcome'])}."
          + (f" Stack: {c['stack'].get('why')}." if c.get("stack", {}).get("why") else "")
          + ("" if c.get("predictable", True) else f" Not predictable from the setup: {c.get('why_not_predictable', '')}"))
    w("")
    return "\n".join(lines)


def estimated_of_kind(out, kind):
    """zeromem's figure of the same kind as a report's measured peak: nvidia-smi (per_gpu.total: everything
    on the device), max_reserved (per_gpu.reserved) or max_allocated (per_gpu.allocated,
    torch.cuda.max_memory_allocated)."""
    if "error" in out or "per_gpu" not in out:
        return None
    key = {"nvidia-smi": "total", "max_reserved": "reserved", "max_allocated": "allocated"}[kind]
    return out["per_gpu"][key]


def has_architecture(out):
    """False for a --params input (no architecture: no activations); those verdicts follow the activation
    allowance, not the band."""
    return bool((out.get("model") or {}).get("family"))


def band_points(rows, resource="gpu"):
    """(id, evidence, underestimate as a fraction of capacity) for each predictable observation that shows
    how far below the real need zeromem's estimate can be. A run that ran out of memory needed at least the
    capacity, so (capacity - estimated) / capacity is a lower bound of the underestimate; a GPU run that
    fitted with a measured max_allocated / max_reserved peak gives (observed - estimated) / capacity of the
    same kind. nvidia-smi figures of runs that fitted are left out: the caching allocator keeps freed
    blocks, so they bound the need from above only. Observations with an `open_term` (a miss whose missing
    term the ledger names) are scored as misses and left out of the band. GPU inputs without an architecture (--params) are left
    out too: their verdict follows the activation allowance, not the band."""
    pts = []
    for r in rows:
        c, z = r["case"], r["z"]
        if c["resource"] != resource or not c.get("predictable", True) or "error" in z or "per_gpu" not in z:
            continue
        if c.get("open_term"):  # a miss whose missing term is named: scored as a miss, not a band
            continue
        if resource == "gpu" and not has_architecture(z):
            continue
        cap = capacity_of(z, resource)
        if not cap:
            continue
        if c["observed"]["outcome"] == "oom":
            pts.append((c["id"], "ran out of memory", (cap - peak_of(z, resource)) / cap))
            continue
        mp = c["observed"].get("measured_peak")
        if resource == "gpu" and mp and mp["kind"] in ("max_allocated", "max_reserved"):
            est = estimated_of_kind(z, mp["kind"])
            pts.append((c["id"], mp["kind"], (mp["gib"] * GIB - est) / cap))
    return pts


def band(rows):
    """The error band of the verdict per resource: the largest underestimate the ledger shows, as a fraction
    of the capacity (0 when every estimate was at or above the need), and the observations it rests on. A
    need within this margin below the capacity is "tight"."""
    out = {}
    for res in ("gpu", "host"):
        pts = band_points(rows, res)
        # Rounded up to 4 decimals, so the run that sets the band stays inside it (rounded to nearest, a
        # largest underestimate of 0.11635 would be stored as 0.1163 and its own verdict called "fits").
        under = max([e for _, _, e in pts] + [0.0])
        out[res] = {"under": math.ceil(round(under * 1e4, 6)) / 1e4, "runs": len(pts)}
    return out


def check(rows):
    with open(os.path.join(LEDGER_DIR, "gate.json")) as f:
        gate = json.load(f)
    t = totals(rows, True)
    failures = []
    for key, floor in gate.get("at_least", {}).items():
        if t.get(key, 0) < floor:
            failures.append(f"{key} = {t.get(key, 0)}, the gate holds at least {floor}")
    for key, ceil in gate.get("at_most", {}).items():
        if t.get(key, 0) > ceil:
            failures.append(f"{key} = {t.get(key, 0)}, the gate holds at most {ceil}")
    with open(os.path.join(ROOT, "data", "verdict_band.json")) as f:
        stored = json.load(f)
    for res, b in band(rows).items():
        if abs(stored[res]["under"] - b["under"]) > 5e-4 or stored[res]["runs"] != b["runs"]:
            failures.append(f"data/verdict_band.json {res} = {stored[res]}, the ledger measures {b}: "
                            f"run python3 scripts/ledger.py --band and store it")
    for r in rows:
        if "error" in r["z"]:
            failures.append(f"{r['case']['id']}: zeromem refused the ledger's input: {r['z']['error']}")
        # A report that names the phase it ran out of memory in: zeromem's first OOM phase is that one.
        want = r["case"]["observed"].get("oom_phase")
        key = "first_oom_phase" if r["case"]["resource"] == "gpu" else "first_host_oom_phase"
        if want and "error" not in r["z"] and r["z"].get(key) != want:
            failures.append(f"{r['case']['id']}: the report ran out of memory in {want}, zeromem's {key} is "
                            f"{r['z'].get(key) or 'none'}")
    for k in sorted(t):
        print(f"  {k} = {t[k]}")
    for f in failures:
        print("ledger: FAIL " + f)
    n = len(rows)
    print(f"{n - len([r for r in rows if 'error' in r['z']])} passed, {len([r for r in rows if 'error' in r['z']])} failed")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zeromem", default=os.path.join(ROOT, "build", "zeromem"))
    ap.add_argument("--write", metavar="PATH")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--check-doc", metavar="PATH", help="fail when PATH differs from the regenerated document")
    ap.add_argument("--show", metavar="ID")
    ap.add_argument("--band", action="store_true", help="print each measured run's (estimated - observed) / capacity and the band")
    a = ap.parse_args()
    exe = os.path.abspath(a.zeromem)
    rows = score(exe)
    if a.band:
        for res in ("gpu", "host"):
            for i, k, e in sorted(band_points(rows, res), key=lambda x: x[2]):
                print(f"{res:4s} {i:28s} {k:18s} {e:+.4f}")
        print(json.dumps(band(rows)))
        return 0
    if a.show:
        for r in rows:
            if r["case"]["id"] == a.show:
                print(" ".join(r["z"]["cmd"]))
                print(json.dumps({k: r["z"].get(k) for k in ("fits_gpu", "fits_host", "peak_phase", "per_gpu", "per_node", "error")}, indent=1))
                print("zeromem", r["zeromem"], "deepspeed", r["deepspeed"], "rule", r["rule"], gib(r["rule_need"]))
        return 0
    rc = 0
    if a.write:
        with open(a.write, "w") as f:
            f.write(render(rows, exe))
    if a.check_doc:
        with open(a.check_doc) as f:
            if f.read() != render(rows, exe):
                print(f"ledger: {a.check_doc} is out of date: run python3 scripts/ledger.py --write {a.check_doc}")
                rc = 1
    if a.check:
        rc = max(rc, check(rows))
    return rc


if __name__ == "__main__":
    sys.exit(main())
