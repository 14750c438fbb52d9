// What every generated kernel looks like from the outside: raw GM pointers in,
// one GM pointer out, simulated statistics back. The module checks shapes and
// dtypes against the table before calling, so kernels trust their arguments.
#pragma once
#include <cstddef>
#include <vector>

#include "kiln/generic_abi.hpp"
#include "kiln/launch.hpp"

namespace kiln {

enum class DType { F16, F32 };

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
