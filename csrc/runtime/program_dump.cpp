#include "runtime/program_dump.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace tpu::runtime {

void dump_program(const std::string& program, const std::string& label) {
  const char* directory = std::getenv("TORCH_TPU_DUMP_PROGRAMS");
  if (directory == nullptr || *directory == '\0') return;
  static std::atomic<int> next{0};
  std::string name = label.empty() ? "program" : label;
  for (char& c : name) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
    if (!plain) c = '_';
  }
  char number[16];
  std::snprintf(number, sizeof number, "%05d", next.fetch_add(1));
  std::ofstream out(std::string(directory) + "/" + number + "-" + name + ".mlir");
  out << program;
}

}  // namespace tpu::runtime
