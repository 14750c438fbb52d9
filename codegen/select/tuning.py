"""Tuning records: variants measured on the emulator by `kiln tune`, reused by later builds.

Like TensorRT's timing cache or TVM's tuning log, the file is plain JSON a person can read and edit:

    {"format": "kiln-tuning/1", "profile": "ascend910b", "cost_model": "kiln-cost/2",
     "records": [{"opspec": "<hash>", "name": "<spec name>", "family": "<family>",
                  "params": {"base_m": 128, ...}, "simulated_cycles": 5836.0,
                  "candidates": [{"family": ..., "params": {...}, "simulated_cycles": ...}, ...]}]}

A build with KILN_TUNING_RECORDS=path uses the record of every kernel whose opspec hash is in the file
instead of searching (the [OPT] log says `reason=tuning_record`), so rebuilds are reproducible. Records
for another profile are refused: the hardware they were measured for differs; so are records made under another
cost model (COST_MODEL_VERSION, codegen/cost/model.py): their cycles and the variants they chose are stale.
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import KilnError
from ..cost.model import COST_MODEL_VERSION
from ..ir.files import InputPathError, check_input_file, write_atomic
from ..ir.profiles import Profile

FORMAT = "kiln-tuning/1"


def load_records(path: str | Path, profile: Profile) -> dict[str, dict]:
    """opspec hash -> record, checked; raises KilnError naming the file and what is wrong."""
    p = Path(path)
    try:
        check_input_file(p)  # a FIFO would block the read
        data = json.loads(p.read_text())
    except InputPathError as e:
        raise KilnError("tuning", str(p), f"cannot read tuning records: {e.reason}") from None
    except OSError as e:
        raise KilnError("tuning", str(p), f"cannot read tuning records: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: nested too deep
        raise KilnError("tuning", str(p), f"not valid UTF-8 JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise KilnError("tuning", str(p), f"format is {data.get('format') if isinstance(data, dict) else None!r}; "
                        f"expected {FORMAT}")
    if data.get("profile") != profile.name:
        raise KilnError("tuning", str(p), f"records were measured for {data.get('profile')!r}, this build targets "
                        f"{profile.name!r}; tune again for this target")
    if data.get("cost_model") != COST_MODEL_VERSION:
        raise KilnError("tuning", str(p), f"records were made under cost model {data.get('cost_model')!r}, this "
                        f"build's is {COST_MODEL_VERSION!r}: their cycles and choices are stale; run `kiln tune` "
                        "again")
    out = {}
    records = data.get("records", [])
    if not isinstance(records, list):
        raise KilnError("tuning", str(p), "'records' must be a list")
    for i, r in enumerate(records):
        where = f"records[{i}]"
        if not isinstance(r, dict) or not {"opspec", "family", "params", "simulated_cycles"} <= set(r):
            raise KilnError("tuning", f"{p} {where}", "needs opspec, family, params and simulated_cycles")
        if not isinstance(r["opspec"], str) or not isinstance(r["family"], str):
            raise KilnError("tuning", f"{p} {where}", "opspec and family must be strings")
        if not isinstance(r["params"], dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in r["params"].values()):
            raise KilnError("tuning", f"{p} {where}", "params must map names to positive integers")
        if r["opspec"] in out:
            raise KilnError("tuning", f"{p} {where}", f"a second record for opspec {r['opspec']}")
        out[r["opspec"]] = r
    return out


def write_records(path: str | Path, profile: Profile, records: list[dict]) -> None:
    """Writes (atomically) records sorted by opspec hash, so the same tuning gives the same file."""
    p = Path(path)
    text = json.dumps({"format": FORMAT, "profile": profile.name, "cost_model": COST_MODEL_VERSION,
                       "records": sorted(records, key=lambda r: r["opspec"])}, indent=1) + "\n"
    write_atomic(p, text)
