// The generated kernel table and manifest (kiln_kernel_table.hpp, rendered by
// the codegen), compiled into the baked kernels library and reached by the
// module through kiln/baked.hpp. A model compiled on its own (`kiln compile`,
// cmake/KilnAddModel.cmake) renders them into its own namespace, named here by
// KILN_KERNEL_NAMESPACE.
#include "kiln/baked.hpp"

#include "kiln_generic_table.hpp"
#include "kiln_kernel_table.hpp"

#ifndef KILN_KERNEL_NAMESPACE
#define KILN_KERNEL_NAMESPACE kiln::kernels
#endif

namespace kiln::kernels {

const std::vector<KernelEntry>& baked_table() { return KILN_KERNEL_NAMESPACE::table(); }
const std::vector<GenericKernelEntry>& baked_generic_table() { return KILN_KERNEL_NAMESPACE::generic_table(); }
const char* baked_manifest_json() { return KILN_KERNEL_NAMESPACE::manifest_json; }

}  // namespace kiln::kernels
