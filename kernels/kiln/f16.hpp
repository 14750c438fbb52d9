// The fp16 storage type on its own. kiln/half.hpp adds the conversions, which
// pull in <immintrin.h> (tens of MB of AVX-512 declarations to parse); the
// generated kernels only name the type, so they include this instead.
#pragma once
#include <cstdint>

namespace kiln {

using f16 = std::uint16_t;  // raw binary16 bits; numpy float16 has the same layout

}  // namespace kiln
