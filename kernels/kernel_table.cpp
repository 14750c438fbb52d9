// The generated kernel table and manifest (kiln_kernel_table.hpp, rendered by
// the codegen), compiled into the baked kernels library and reached by the
// module through kiln/baked.hpp.
#include "kiln/baked.hpp"

#include "kiln_generic_table.hpp"
#include "kiln_kernel_table.hpp"

namespace kiln::kernels {

const std::vector<KernelEntry>& baked_table() { return table(); }
const std::vector<GenericKernelEntry>& baked_generic_table() { return generic_table(); }
const char* baked_manifest_json() { return manifest_json; }

}  // namespace kiln::kernels
