// Runs the model kiln baked into the library tiny_cnn (CMakeLists.txt) on an input file of raw fp32 values
// (C order, the input's shape), and prints the output and the simulated cycles.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "tiny_cnn.hpp"

namespace model = kiln::model::tiny_cnn;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s INPUT.bin  (raw fp32 in the shape of input \"%s\")\n", argv[0], "input");
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "%s: cannot open\n", argv[1]);
    return 2;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<float> x(bytes.size() / sizeof(float));
  std::copy(bytes.begin(), bytes.begin() + x.size() * sizeof(float), reinterpret_cast<char*>(x.data()));

  model::Model net;
  std::vector<float> y(net.outputs()[0].size());
  try {
    model::Inputs in;
    in.input = {x.data(), x.size()};
    model::Outputs out;
    out.logits = {y.data(), y.size()};
    const kiln::RunStats stats = net.run(in, out);
    for (float v : y) std::printf("%.9g\n", v);
    std::printf("simulated cycles %.3f (%.3f us on %s), %zu kernel launches\n", stats.cycles, stats.microseconds(),
                stats.profile.c_str(), stats.step_cycles.size());
  } catch (const kiln::ModelError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
