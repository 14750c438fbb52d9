// Architecture vocabulary of the emulated Ascend AI Core: buffer positions,
// pipes, the hardware profile record and the errors the emulator raises.
// Profile *values* are generated from codegen/ir/profiles.py (kiln_profiles.hpp in
// the build directory) so the cost model and the emulator share one table.
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kiln::emu {

enum class Pos : std::uint8_t { GM, L1, L0A, L0B, L0C, UB, BT, COUNT };
constexpr int kNumPos = static_cast<int>(Pos::COUNT);

inline const char* pos_name(Pos p) {
  switch (p) {
    case Pos::GM: return "GM";
    case Pos::L1: return "L1";
    case Pos::L0A: return "L0A";
    case Pos::L0B: return "L0B";
    case Pos::L0C: return "L0C";
    case Pos::UB: return "UB";
    case Pos::BT: return "BT";
    default: return "?";
  }
}

// Pipes of one core. Instructions are in order within a pipe; pipes overlap and
// are ordered against each other only by set_flag / wait_flag.
enum class Pipe : std::uint8_t { S, V, M, MTE1, MTE2, MTE3, FIX, COUNT };
constexpr int kNumPipes = static_cast<int>(Pipe::COUNT);

inline const char* pipe_name(Pipe p) {
  switch (p) {
    case Pipe::S: return "S";
    case Pipe::V: return "V";
    case Pipe::M: return "M";
    case Pipe::MTE1: return "MTE1";
    case Pipe::MTE2: return "MTE2";
    case Pipe::MTE3: return "MTE3";
    case Pipe::FIX: return "FIX";
    default: return "?";
  }
}

// Which kind of core a kernel runs on. On split profiles (910B) a Cube core
// (AIC) has L1/L0A/L0B/L0C/BT and no UB; a Vector core (AIV) has only UB.
// On coupled profiles (310P) one AI core has all of them.
enum class CoreKind : std::uint8_t { AIC, AIV };

// clang-format off: one line per group of ops, not one per op
enum class VecOp : std::uint8_t {
  Add, Sub, Mul, Div, Max, Min, MulAddDst, Adds, Muls, Maxs, Mins, Relu, Exp, Abs, Reciprocal, Copy, Dup, Cast,
  ReduceSum, ReduceMax, Transpose, Brcb, Ln, Sqrt, LeakyRelu, CmpLt, CmpGt, CmpEq, CmpLe, CmpGe, Sel, COUNT
};
// clang-format on
constexpr int kNumVecOps = static_cast<int>(VecOp::COUNT);

struct Profile {
  const char* name;
  const char* sources;
  int cube_cores;
  int vector_cores;
  bool coupled;  // Cube and Vector share one core (L0C can drain to UB)
  double clock_ghz;
  std::uint32_t capacity[kNumPos];   // bytes per core; GM entry unused
  std::uint32_t alignment[kNumPos];  // start-address alignment in bytes
  // Movement rates in bytes per cycle per core, and fixed head latencies.
  double gm_to_l1_bpc, gm_to_ub_bpc, l1_to_l0a_bpc, l1_to_l0b_bpc, load3d_bpc, l1_to_bt_bpc, ub_to_gm_bpc, fix_elems_pc;
  int mte2_head, mte1_head, load3d_head, bt_head, fix_head, mmad_head, mte3_head, vec_head;
  // Vector cycles per 256-byte repeat, fp16 and fp32 operands.
  double vec_cpr_f16[kNumVecOps];
  double vec_cpr_f32[kNumVecOps];
  // Instruction costs (codegen/ir/profiles.py): an instruction occupies its pipe for its body (these
  // per-instruction cycles + bytes / rate); the heads above are pipe latencies, paid once per burst.
  double gm_to_l1_copy, gm_to_ub_copy, ub_to_gm_copy, mte1_issue, bt_issue, mmad_issue, fix_gm_min_cycles,
      fix_local_issue, fix_f32_elems_pc, vec_min_cycles;
  double launch_cycles, mixed_launch_cycles, cross_core_cycles;  // per launch; added for AIC+AIV; per flag
  int vector_only_cores;                                         // 310P's standalone Vector cores (unused)
  // The memory system (issue 22 point 1): L2 capacity, a core's GM -> L1 / UB rates on an L2 hit (the
  // gm_to_* rates above are those of a miss), the chip-wide HBM and L2 bandwidths in GB/s.
  std::uint64_t l2_bytes;
  double l2_to_l1_bpc, l2_to_ub_bpc;
  double hbm_read_gbps, hbm_write_gbps, hbm_mixed_gbps, l2_gbps;
};

// Load3D (img2col) L1 -> L0A bytes per cycle for a kh-row kernel at stride_w (asc-devkit's Cube performance
// table 4; codegen/ir/profiles.py Profile.load3d_rate).
inline double load3d_rate(const Profile& p, int kh, int stride_w) {
  if (stride_w == 1) return kh == 1 ? p.load3d_bpc : std::max(32.0, double(512 / (kh + 2)));
  if (stride_w == 2 || stride_w == 4 || stride_w == 8)
    return std::max(32.0, double(512 / (2 * stride_w + (kh > 1 ? kh : 0))));
  return 32.0;
}

// Base of every error the emulator raises; the message names the kernel.
class EmulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class CapacityError : public EmulationError {
 public:
  using EmulationError::EmulationError;
};
class AlignmentError : public EmulationError {
 public:
  using EmulationError::EmulationError;
};
class SyncError : public EmulationError {
 public:
  using EmulationError::EmulationError;
};
class BoundsError : public EmulationError {
 public:
  using EmulationError::EmulationError;
};

}  // namespace kiln::emu
