"""resize_vector's build-time tables: the column progressions cover every output column once with its source,
a scale of 2 is two strided copies, and the buffers and GM bytes follow the rows a band reads."""
import pytest

from codegen.families import resize_vector as rv
from codegen.ir.profiles import PROFILES
from codegen.ir.resize_spec import ResizeSpec


def covered(runs) -> dict[int, int]:
    out: dict[int, int] = {}
    for d0, ds, s0, ss, cnt in runs:
        for j in range(cnt):
            assert d0 + j * ds not in out, "a column written twice"
            out[d0 + j * ds] = s0 + j * ss
    return out


@pytest.mark.parametrize("spec", [
    ResizeSpec(1, 20, 5, 6, 10, 12, "nearest", "asymmetric", "floor", 2.0, 2.0),
    ResizeSpec(1, 20, 13, 13, 19, 19, "linear", "half_pixel", "", 1.5, 1.5),
    ResizeSpec(2, 17, 10, 12, 4, 7, "nearest", "half_pixel", "floor", 0.4, 7 / 12),
    ResizeSpec(1, 16, 5, 3000, 10, 6000, "nearest", "asymmetric", "floor", 2.0, 2.0),  # runs split at 2040 pixels
])
def test_progressions_cover_each_column_once(spec):
    taps = spec.taps(1)
    tables = rv.column_tables(spec)
    assert covered(tables["gather0"]) == {j: t[0] for j, t in enumerate(taps)}
    if spec.mode == "linear":
        assert covered(tables["gather1"]) == {j: t[1] for j, t in enumerate(taps)}
        for key, k in (("weight0", 2), ("weight1", 3)):
            assert covered([(d, s, 0, 0, c) for d, s, _, _, c in tables[key]]) == dict.fromkeys(range(spec.wo), 0)
            assert all(taps[d0 + j * ds][k] == val for d0, ds, val, _, cnt in tables[key] for j in range(cnt))
    assert all(cnt <= rv.MAX_RUN and 0 <= ss <= 255 for *_, ss, cnt in tables["gather0"])


def test_scale_two_is_two_strided_copies_per_row():
    spec = ResizeSpec(1, 256, 20, 20, 40, 40, "nearest", "asymmetric", "floor", 2.0, 2.0)
    assert rv.column_tables(spec)["gather0"] == [(0, 2, 0, 1, 20), (1, 2, 0, 1, 20)]
    assert rv.row_groups(spec, 0, 4) == [(0, 0, 2), (1, 2, 2)]


def test_band_rows_buffers_and_bytes():
    down = ResizeSpec(1, 16, 10, 8, 5, 4, "nearest", "asymmetric", "floor", 0.5, 0.5)
    assert rv.band_rows(down, 0, 5) == [0, 2, 4, 6, 8] and rv.row_runs([0, 2, 3, 4, 8]) == [(0, 1), (2, 3), (8, 1)]
    v = rv.resize_rule(down, PROFILES["ascend910b"], None)
    assert rv.resize_mte2(down, v) == 5 * 8 * 32  # only the rows read, not the skipped ones
    lin = ResizeSpec(1, 16, 10, 8, 20, 16, "linear", "half_pixel", "", 2.0, 2.0)
    assert rv.slab_rows(lin, 20) == 10 and rv.resize_buffers(lin, 20)["UB"] == 10 * 8 * 32 + 10 * 16 * 32 + \
        4 * 16 * 32 + 2 * 16 * 32
