// The kernel table and manifest this build baked, behind two functions. The
// generated kiln_kernel_table.hpp changes with every option or kernel change;
// only kernels/kernel_table.cpp (a small TU in the baked library) includes it,
// so such a change recompiles that file instead of the pybind11 module.
#pragma once
#include <vector>

#include "kiln/kernel_abi.hpp"

namespace kiln::kernels {

const std::vector<KernelEntry>& baked_table();
const std::vector<GenericKernelEntry>& baked_generic_table();  // KILN_SHAPE_BUCKETS (codegen/shapes/generic.py)
const char* baked_manifest_json();

}  // namespace kiln::kernels
