"""The typed manifest records (codegen/ir/manifest.py): the build's manifest decodes into them and encodes back
to the same JSON, byte for byte; render writes its manifest through them; kernel records decode into the
Opspecs they were baked from."""
import json

import kiln
from kiln import _core
from kiln.codegen.emit.opspec_file import spec_hash
from kiln.codegen.ir.manifest import SPACE_ARENA, KernelRecord, Manifest, ModelRecord, Ref, StepRecord, opspec_of_record


def test_the_builds_manifest_round_trips_byte_for_byte():
    raw = _core.manifest_json()
    man = Manifest.from_json(json.loads(raw))
    assert json.dumps(man.to_json(), separators=(",", ":")) == raw
    assert kiln.manifest_record() == man
    assert all(isinstance(k, KernelRecord) for k in man.kernels)
    assert all(isinstance(s, StepRecord) and isinstance(s.output, Ref) for m in man.models for s in m.steps)


def test_kernel_records_decode_into_the_spec_they_were_baked_from():
    for k in kiln.manifest_record().kernels:
        spec = opspec_of_record(k)
        assert spec.kind == k.kind or k.kind in ("softmax", "layernorm")
        assert spec.name == k.opspec_name and spec_hash(spec) == k.opspec
        assert opspec_of_record(k.to_json()) == spec  # the JSON decodes the same way


def test_model_records_are_what_the_model_runs():
    for name in kiln.models():
        m = kiln.load(name)
        rec = m.entry
        assert isinstance(rec, ModelRecord) and m.record == rec.to_json()
        assert [k.kernel for k in m.kernels] == [s.kernel for s in rec.kernel_steps]
        assert rec.kernel_launches == len(rec.kernel_steps)
        for s in rec.steps:  # arena references stay inside the arena
            for r in (*s.inputs, s.output):
                assert r.space != SPACE_ARENA or r.at + r.nbytes <= rec.arena_bytes
        if rec.shape_buckets:
            assert all(p.input_size is not None for p in rec.shape_buckets.plans)
