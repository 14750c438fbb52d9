// What a generic kernel looks like from the outside (codegen/shapes/generic.py): like a baked kernel, raw GM
// pointers in and one out, plus the runtime shape of this launch -- the input's spatial size, what follows
// from it, and the tiling chosen for it. Channel counts, window and epilogue are compiled into the kernel.
#pragma once
#include <cstddef>

#include "kiln/launch.hpp"

namespace kiln {

// Every field a generic template may read, once (codegen/shapes/generic.py RUNTIME_FIELDS lists the same names in
// the same order; a test holds them equal). A kernel reads only its family's fields; the rest stay 0.
// clang-format off: an X-macro list, packed
#define KILN_RUNTIME_SHAPE_FIELDS(X)                                                                          \
  X(h) X(w) X(ho) X(wo) X(h2) X(w2) X(numel) X(base_m) X(base_n) X(base_k1) X(c1_step) X(slab_rows) X(epi_tile) \
  X(l1_buffers) X(base_n2) X(base_k2) X(n_split) X(rows_per_block) X(chunk_pixels) X(tile_elems) X(blocks)   \
  X(planes_per_block) X(prefetch)
// clang-format on

struct RuntimeShape {
#define KILN_RUNTIME_SHAPE_MEMBER(name) long name = 0;
  KILN_RUNTIME_SHAPE_FIELDS(KILN_RUNTIME_SHAPE_MEMBER)
#undef KILN_RUNTIME_SHAPE_MEMBER
};

using GenericKernelFn = emu::KernelStats (*)(const void* const* inputs, void* output, const RuntimeShape& shape);

struct GenericKernelEntry {
  const char* name;
  const char* family;
  GenericKernelFn fn;
  std::size_t inputs;          // number of input tensors
  const char* runtime_fields;  // the RuntimeShape fields it reads, space-separated
};

}  // namespace kiln
