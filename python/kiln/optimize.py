"""`kiln optimize MODEL --feedback`: the compile/runtime feedback loop.

1. Profile: the model's kernel launches by simulated time (the cost model's per-pipe figures, which tests
   hold equal to the emulator's).
2. Suggest: for each bottleneck kernel (share of the model's time >= threshold) that the search tunes
   (direct convolution, GEMM), the report's tiling suggestion (`kiln visualize`: advice.best_tiling, a
   wider grid than the build's search, replayed exactly); a tiling predicted faster than the baked one is
   a suggestion, with its predicted gain. The report's other kinds (a relayout of the input) need steps
   kiln cannot bake yet and are not applied.
3. Apply and confirm: the baked variant and each suggestion are rebuilt side by side (a scratch build, as
   `kiln tune` does) and run on the emulator. A suggestion that is faster there becomes a tuning record;
   one that is not is reverted, and the output says so.
4. The records file then rebuilds the model with the improvements: -DKILN_TUNING_RECORDS=<file>.
"""
from __future__ import annotations

from pathlib import Path

from . import build_info
from .tune import _build_and_run, _entry, _source_tree, baked_model, check_build_dir, scratch_dir, tuned_families


def optimize(model: str, out: str, threshold: float = 0.15, build_dir: str | None = None, feedback: bool = True,
             progress=print) -> dict:

    from .advice import best_tiling
    from .codegen.families.registry import predict, tunable
    from .codegen.ir.manifest import opspec_of_record
    TUNABLE = tunable()
    from .codegen.select.tuning import load_records, write_records

    rec, profile, kernels = baked_model(model)
    launches = [s.kernel for s in rec.steps if s.kernel]
    total = sum(kernels[n].predicted_cycles or 0 for n in launches)
    share: dict[str, float] = {}
    for n in launches:
        share[n] = share.get(n, 0.0) + (kernels[n].predicted_cycles or 0) / total
    hot = sorted((n for n in share if share[n] >= threshold), key=lambda n: -share[n])
    if not hot:  # nothing above the threshold: look at the top three instead
        hot = sorted(share, key=lambda n: -share[n])[:3]
    report = {"model": model, "total_cycles": total, "kernels": [], "applied": 0}
    lines, pending = [], {}
    for n in hot:
        kr = kernels[n]
        item = {"kernel": n, "share": round(share[n], 4), "cycles": kr.predicted_cycles}
        report["kernels"].append(item)
        if kr.family not in tuned_families():
            item["outcome"] = (f"no suggestion: the feedback loop tunes direct convolutions and GEMMs; "
                               f"{kr.family} is not one of them")
            continue
        spec = opspec_of_record(kr)
        current = predict(spec, kr.family, kr.tiling, profile).cycles
        # the report's tiling suggestion (advice.best_tiling: the search grid plus wider tilings, exact replay)
        found = best_tiling(kr.family, spec, kr.tiling, profile)
        best_cycles, best = (found[0], found[1]) if found else (current, kr.tiling)
        tunable = TUNABLE[kr.family]
        if best_cycles >= current * 0.999 or all(best[t] == kr.tiling[t] for t in tunable):
            item["outcome"] = (f"no suggestion: no tiling of the {len(tunable)} tunable parameters is predicted "
                               f"faster than the baked {kr.variant} ({current:.0f} cycles)")
            continue
        item["suggestion"] = {t: best[t] for t in tunable}
        item["predicted_cycles"] = best_cycles
        item["predicted_gain"] = round(1 - best_cycles / current, 4)
        pending[kr.opspec] = (item, kr)
        lines.append(_entry(f"{kr.opspec}#current", kr.spec, kr.kind,
                            {t: kr.tiling[t] for t in tunable}))
        lines.append(_entry(f"{kr.opspec}#suggested", kr.spec, kr.kind, item["suggestion"]))
        progress(f"{n}: suggest {item['suggestion']} ({current:.0f} -> {best_cycles:.0f} predicted cycles)")
    records = list(load_records(out, profile).values()) if Path(out).is_file() else []
    if pending and not feedback:
        for item, _ in pending.values():
            item["outcome"] = "suggested (run with --feedback to rebuild, measure and apply it)"
    if pending and feedback:
        _source_tree()  # a KILN_SOURCE_DIR that is no checkout, or a bad --build-dir, stops here before the build
        check_build_dir(build_dir)
        with scratch_dir(build_dir, f"kiln-optimize-{rec.name}-") as work:
            (work / "candidates.toml").write_text("".join(lines))
            measured = _build_and_run(work, profile.name, progress, build_info()["dtype"])
        for h, (item, kr) in pending.items():
            before, after = measured[f"{h}#current"]["cycles"], measured[f"{h}#suggested"]["cycles"]
            item["simulated_before"], item["simulated_after"] = before, after
            if after < before:
                item["outcome"] = f"applied: {before:.0f} -> {after:.0f} simulated cycles"
                records = [r for r in records if r["opspec"] != h]
                records.append({"opspec": h, "name": kr.opspec_name, "family": kr.family,
                                "params": item["suggestion"], "simulated_cycles": after,
                                "candidates": [{"params": {t: kr.tiling[t] for t in TUNABLE[kr.family]},
                                                "simulated_cycles": before}]})
                report["applied"] += 1
            else:
                item["outcome"] = f"reverted: {before:.0f} -> {after:.0f} simulated cycles is no gain"
    if report["applied"]:
        write_records(out, profile, records)
        report["records"] = out
    per_launch = {i["kernel"]: launches.count(i["kernel"]) for i in report["kernels"]}
    saved = sum((i["simulated_before"] - i["simulated_after"]) * per_launch[i["kernel"]] for i in report["kernels"]
                if i.get("outcome", "").startswith("applied"))
    report["total_cycles_after"] = total - saved
    return report
