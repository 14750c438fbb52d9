"""The typed manifest records (codegen/ir/manifest.py) as render writes them: manifest() is the records' JSON,
and that JSON decodes back into equal records (the runtime's side is tests/kiln/test_manifest_records.py)."""
import json
from pathlib import Path

from codegen.emit.render import manifest, manifest_record
from codegen.ir.manifest import Manifest, opspec_of_record
from codegen.options import parse_options
from codegen.pipeline import plan

SOURCE = Path(__file__).resolve().parents[3]


def test_render_writes_the_manifest_through_the_records(tmp_path, search_cache):
    pl = plan(parse_options({"KILN_MODELS": "", "KILN_ISA_RESOLVED": "portable"}), SOURCE, tmp_path,
              search_cache_dir=search_cache)
    rec = manifest_record(pl)
    assert manifest(pl) == rec.to_json()
    assert Manifest.from_json(json.loads(json.dumps(rec.to_json(), indent=1))) == rec
    assert list(rec.to_json()) == ["profile", "options", "kernels", "models", "generic_kernels", "checksums"]
    # no models: the checksums are the .opspec files', one per unique spec
    assert all(p.startswith("opspecs/") for p in rec.checksums)
    assert len(rec.checksums) == len({k.opspec for k in rec.kernels})
    for k in rec.kernels:  # each kernel record decodes into the spec it was planned from
        assert opspec_of_record(k) == next(p.spec for p in pl.kernels if p.symbol == k.name)
        assert opspec_of_record(k.to_json()) == opspec_of_record(k)
