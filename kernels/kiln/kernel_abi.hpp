// What every generated kernel looks like from the outside: raw GM pointers in,
// one GM pointer out, simulated statistics back. The module checks shapes and
// dtypes against the table before calling, so kernels trust their arguments.
#pragma once
#include <cstddef>
#include <vector>

#include "kiln/generic_abi.hpp"
#include "kiln/launch.hpp"

namespace kiln {

// BF16: a Cube weight packed as bfloat16 (KILN_DTYPE=bf16); NumPy holds it as its uint16 bit patterns.
enum class DType { F16, BF16, F32 };

inline std::size_t dtype_bytes(DType d) { return d == DType::F32 ? 4 : 2; }

struct TensorDesc {
  const char* name;
  const char* layout;
  DType dtype;
  std::vector<std::size_t> shape;
  std::size_t numel() const {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

using KernelFn = emu::KernelStats (*)(const void* const* inputs, void* output);

struct KernelEntry {
  const char* name;
  const char* family;
  const char* variant;
  KernelFn fn;
  std::vector<TensorDesc> inputs;
  TensorDesc output;
};

}  // namespace kiln
